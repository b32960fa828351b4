// heap_pattern READY [MIB [STEPS]]: a large malloc'd block (default 256 MiB,
// mmap-backed) and ~2000 small malloc'd blocks (brk heap), all filled with a
// position-dependent pattern. After ready it keeps rewriting 1 MiB chunks
// (STEPS steps of 10 ms, default 200, each bumping one chunk's version, so
// pages change after the checkpoint too), then verifies every byte.
// With E2E_COMPRESSIBLE=1 in the environment each word of the big block keeps
// only its low byte (the rest zero), so its pages compress
// (tests/e2e/compress.sh) while every byte still depends on its position and
// version.
// E2E_PACE_FILE / E2E_HOLD_FILE (e2e.h): the 10 ms pause lasts while the
// pace file exists (the rest of the steps run at full speed once it is
// gone), and the program does not end while the hold file exists.
#include "e2e.h"

#define CHUNK (1UL << 20)
#define SMALL_BLOCKS 2000

static uint64_t word_mask = ~0ULL;

static uint64_t big_word(uint64_t index, uint32_t version) {
  return e2e_mix(index ^ ((uint64_t)version << 44)) & word_mask;
}

static void fill_chunk(uint64_t* heap, size_t chunk, uint32_t version) {
  const size_t words = CHUNK / 8;
  for (size_t i = chunk * words; i < (chunk + 1) * words; i++) heap[i] = big_word(i, version);
}

static size_t small_size(int block) {
  return 16 + (size_t)(e2e_mix(block) % 4080);
}

static uint8_t small_byte(int block, size_t i) {
  return (uint8_t)e2e_mix(((uint64_t)block << 32) | i);
}

// The chunk that step `s` rewrites: a stride co-prime with any power of two,
// so successive steps touch chunks far apart.
static size_t step_chunk(long s, size_t nchunks) {
  return (size_t)(s * 7919) % nchunks;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY [MIB [STEPS]]");
  size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 256;
  long steps = argc > 3 ? strtol(argv[3], NULL, 10) : 200;
  if (mib == 0 || steps < 0) e2e_fail("bad MIB or STEPS");
  const size_t size = mib * CHUNK, nchunks = mib;
  const char* compressible = getenv("E2E_COMPRESSIBLE");
  if (compressible && *compressible == '1') word_mask = 0xff;

  uint64_t* heap = malloc(size);
  uint32_t* version = calloc(nchunks, sizeof *version);
  uint8_t* small[SMALL_BLOCKS];
  if (!heap || !version) e2e_fail("malloc of %zu MiB failed", mib);
  for (size_t c = 0; c < nchunks; c++) fill_chunk(heap, c, 0);
  for (int b = 0; b < SMALL_BLOCKS; b++) {
    small[b] = malloc(small_size(b));
    if (!small[b]) e2e_fail("malloc of small block %d failed", b);
    for (size_t i = 0; i < small_size(b); i++) small[b][i] = small_byte(b, i);
  }

  // (The big block's chunks may all be rewritten later, erasing a flip there.)
  if (e2e_sabotage()) small[SMALL_BLOCKS / 2][7] ^= 0x40;
  e2e_ready(argv[1]);

  for (long s = 0; s < steps; s++) {
    size_t c = step_chunk(s, nchunks);
    fill_chunk(heap, c, ++version[c]);
    e2e_pace(10);
  }
  e2e_hold();

  // The versions are themselves state: recompute them independently.
  uint32_t* expect = calloc(nchunks, sizeof *expect);
  if (!expect) e2e_fail("calloc failed");
  for (long s = 0; s < steps; s++) expect[step_chunk(s, nchunks)]++;
  for (size_t c = 0; c < nchunks; c++) {
    if (version[c] != expect[c])
      e2e_fail("chunk %zu: version %u, expected %u", c, version[c], expect[c]);
  }
  for (size_t i = 0; i < size / 8; i++) {
    uint64_t want = big_word(i, expect[i / (CHUNK / 8)]);
    if (heap[i] != want)
      e2e_fail("big block: word at offset %zu is %#llx, expected %#llx", i * 8,
               (unsigned long long)heap[i], (unsigned long long)want);
  }
  for (int b = 0; b < SMALL_BLOCKS; b++) {
    for (size_t i = 0; i < small_size(b); i++) {
      if (small[b][i] != small_byte(b, i))
        e2e_fail("small block %d: byte %zu is %#x, expected %#x", b, i, small[b][i],
                 small_byte(b, i));
    }
  }
  e2e_done();
}
