// Programs that work in rounds (hot_cold.c, huge_flip.c) keep a copy of
// their memory per round in DIR/round-K.copy; a restored one compares its
// memory with the copy of its round. Each page's first word is
// (round << 32 | page), so a mismatch names the round the page came from.
#pragma once
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

static void round_copy_save(const char* dir, int k, const unsigned char* mem, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/round-%d.copy", dir, k);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) e2e_fail("create %s: %s", path, strerror(errno));
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, mem + done, len - done);
    if (n <= 0) e2e_fail("write %s: %s", path, strerror(errno));
    done += (size_t)n;
  }
  if (close(fd) != 0) e2e_fail("close %s: %s", path, strerror(errno));
}

// Fails naming the first page (block and page in it) that differs.
static void round_copy_verify(const char* dir, int k, const unsigned char* mem, size_t len,
                              uint64_t pages_per_block) {
  const size_t page = 4096;
  char path[4096];
  snprintf(path, sizeof path, "%s/round-%d.copy", dir, k);
  unsigned char* copy = malloc(len);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (!copy || fd < 0) e2e_fail("open %s: %s", path, strerror(errno));
  size_t done = 0;
  while (done < len) {
    ssize_t n = read(fd, copy + done, len - done);
    if (n <= 0) e2e_fail("read %s: short", path);
    done += (size_t)n;
  }
  close(fd);
  for (uint64_t p = 0; p < len / page; p++) {
    if (memcmp(mem + p * page, copy + p * page, page) == 0) continue;
    uint64_t found, want;
    memcpy(&found, mem + p * page, 8);
    memcpy(&want, copy + p * page, 8);
    e2e_fail(
        "round %d: block %llu page %llu differs: holds round %lld's content, round %d "
        "expects round %lld's",
        k, (unsigned long long)(p / pages_per_block), (unsigned long long)(p % pages_per_block),
        found ? (long long)(found >> 32) : -1LL, k, want ? (long long)(want >> 32) : -1LL);
  }
  free(copy);
}
