// deep_stack READY: recurses DEPTH frames deep, each frame holding known
// values in locals (~2.5 MiB of stack in total), signals ready at the deepest
// point, waits ~2 s, then unwinds, each frame verifying its locals, the
// argument it was called with and the value returned from below.
#include "e2e.h"

#define DEPTH 10000
#define LOCALS 24
#define HOLD_MS 2000

static const char* ready_path;
static volatile uint64_t* mid_frame;  // locals of frame DEPTH/2, for the sabotage hook
static char* top_of_stack;

static uint64_t frame_value(int depth, int k) {
  return e2e_mix(((uint64_t)depth << 8) | k);
}

// expected[d]: what recurse(d) returns, computed without recursion.
static uint64_t expected[DEPTH + 2];

// noinline and volatile keep every frame real: no tail call, no folding of
// the locals into registers.
__attribute__((noinline)) static uint64_t recurse(int depth, uint64_t arg) {
  volatile uint64_t locals[LOCALS];
  for (int k = 0; k < LOCALS; k++) locals[k] = frame_value(depth, k);
  if (depth == DEPTH / 2) mid_frame = locals;

  uint64_t below = 0;
  if (depth < DEPTH) {
    below = recurse(depth + 1, locals[3]);
  } else {
    long span = top_of_stack - (char*)locals;
    if (span < DEPTH * 100L) e2e_fail("stack only %ld bytes deep: recursion was optimized", span);
    if (e2e_sabotage()) mid_frame[5] ^= 0x100;
    e2e_ready(ready_path);
    for (int i = 0; i < HOLD_MS / 10; i++) e2e_sleep_ms(10);
  }

  for (int k = 0; k < LOCALS; k++) {
    if (locals[k] != frame_value(depth, k))
      e2e_fail("frame %d: local %d is %#llx, expected %#llx", depth, k,
               (unsigned long long)locals[k], (unsigned long long)frame_value(depth, k));
  }
  if (arg != frame_value(depth - 1, 3))
    e2e_fail("frame %d: argument is %#llx, expected %#llx", depth, (unsigned long long)arg,
             (unsigned long long)frame_value(depth - 1, 3));
  if (below != expected[depth + 1]) e2e_fail("frame %d: value returned from below is wrong", depth);
  return below * 31 + locals[0];
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  ready_path = argv[1];
  char here;
  top_of_stack = &here;
  for (int d = DEPTH; d >= 1; d--) expected[d] = expected[d + 1] * 31 + frame_value(d, 0);
  uint64_t r = recurse(1, frame_value(0, 3));
  if (r != expected[1]) e2e_fail("recursion returned %#llx", (unsigned long long)r);
  e2e_done();
}
