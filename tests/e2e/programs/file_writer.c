// file_writer READY OUT: writes RECORDS fixed-size numbered records to OUT
// with write(2) (one fd, kept open, no O_APPEND: the file offset is state),
// 50 ms apart, and signals ready after READY_AFTER of them. At the end it
// reads OUT back through a new fd and checks it holds exactly the records.
// The driver also compares OUT with the output of an uninterrupted run.
#include "e2e.h"

#define RECORDS 60
#define READY_AFTER 10
#define RECORD_SIZE 64

static void record(int i, char out[RECORD_SIZE + 1]) {
  // Fixed width: "record 0007 of 0060 <16 hex digits> <padding>\n".
  int n = snprintf(out, RECORD_SIZE + 1, "record %04d of %04d %016llx", i, RECORDS,
                   (unsigned long long)e2e_mix(i));
  memset(out + n, '.', RECORD_SIZE - 1 - n);
  out[RECORD_SIZE - 1] = '\n';
  out[RECORD_SIZE] = '\0';
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY OUT");
  const char* path = argv[2];
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) e2e_fail("create %s: %s", path, strerror(errno));

  char rec[RECORD_SIZE + 1];
  for (int i = 0; i < RECORDS; i++) {
    if (i == READY_AFTER) e2e_ready(argv[1]);
    record(i, rec);
    if (write(fd, rec, RECORD_SIZE) != RECORD_SIZE) e2e_fail("write record %d failed", i);
    e2e_sleep_ms(50);
  }
  off_t end = lseek(fd, 0, SEEK_CUR);
  if (end != (off_t)RECORDS * RECORD_SIZE)
    e2e_fail("file offset is %lld after %d records", (long long)end, RECORDS);

  static char got[RECORDS * RECORD_SIZE + 1];
  int rfd = open(path, O_RDONLY);
  if (rfd < 0) e2e_fail("reopen %s: %s", path, strerror(errno));
  ssize_t n = read(rfd, got, sizeof got);
  close(rfd);
  if (n != RECORDS * RECORD_SIZE)
    e2e_fail("%s holds %zd bytes, expected %d", path, n, RECORDS * RECORD_SIZE);
  for (int i = 0; i < RECORDS; i++) {
    record(i, rec);
    if (memcmp(got + i * RECORD_SIZE, rec, RECORD_SIZE) != 0)
      e2e_fail("record %d in %s is wrong", i, path);
  }
  e2e_done();
}
