// fpu_vector READY: keeps known values live in FPU and vector registers across
// a checkpoint, and runs a floating-point computation through it.
//
// fpu_hold() (assembly below, so no compiler code can touch the registers in
// between) loads:
//   x87 st0-st7 with 80-bit values, the x87 control word and MXCSR with
//   non-default rounding modes (and FTZ/DAZ);
//   xmm4-xmm15, or ymm4-ymm15 with AVX, or zmm4-zmm31 and k1-k7 with AVX-512;
// then publishes the ready file with a raw rename(2), and iterates the
// logistic map x = r*x*(1-x) in xmm0-xmm3 (chaotic: any bit lost in a register
// or a wrong rounding mode changes the result) in STEPS steps, each followed by
// a 10 ms nanosleep(2) (system calls preserve all these registers). At the end
// it stores everything back. The expected values come from a first call with
// no ready file and no sleeping, made before ready.
#include <stddef.h>

#include "e2e.h"

#define STEPS 150
#define ITERS 200000

#define FEAT_AVX 1
#define FEAT_AVX512 2  // AVX512F and AVX512BW (kmovq)

struct fpu_hold {
  uint8_t vec_in[32][64];  // register images: index = register number
  uint8_t vec_out[32][64];
  uint8_t x87_in[8][16];  // 80-bit values in 16-byte slots; x87_in[7] ends up in st0
  uint8_t x87_out[8][16];
  uint64_t k_in[8];
  uint64_t k_out[8];
  double x0, r, x_out;
  uint32_t mxcsr_in, mxcsr_out, saved_mxcsr;
  uint16_t fcw_in, fcw_out, saved_fcw, pad;
  uint32_t features;
  uint64_t steps, iters;
  struct timespec nap;
  const char* ready_tmp;  // NULL: no ready file and no sleeping
  const char* ready_path;
  int64_t rename_rc;
};

// Offsets for the assembly, checked against the C layout.
#define VEC_IN 0
#define VEC_OUT 2048
#define X87_IN 4096
#define X87_OUT 4224
#define K_IN 4352
#define K_OUT 4416
#define X0 4480
#define R 4488
#define X_OUT 4496
#define MXCSR_IN 4504
#define MXCSR_OUT 4508
#define SAVED_MXCSR 4512
#define FCW_IN 4516
#define FCW_OUT 4518
#define SAVED_FCW 4520
#define FEATURES 4524
#define STEPS_OFF 4528
#define ITERS_OFF 4536
#define NAP 4544
#define READY_TMP 4560
#define READY_PATH 4568
#define RENAME_RC 4576

#define CHECK_OFF(field, off) _Static_assert(offsetof(struct fpu_hold, field) == off, #field)
CHECK_OFF(vec_out, VEC_OUT);
CHECK_OFF(x87_in, X87_IN);
CHECK_OFF(x87_out, X87_OUT);
CHECK_OFF(k_in, K_IN);
CHECK_OFF(k_out, K_OUT);
CHECK_OFF(x0, X0);
CHECK_OFF(r, R);
CHECK_OFF(x_out, X_OUT);
CHECK_OFF(mxcsr_in, MXCSR_IN);
CHECK_OFF(mxcsr_out, MXCSR_OUT);
CHECK_OFF(saved_mxcsr, SAVED_MXCSR);
CHECK_OFF(fcw_in, FCW_IN);
CHECK_OFF(fcw_out, FCW_OUT);
CHECK_OFF(saved_fcw, SAVED_FCW);
CHECK_OFF(features, FEATURES);
CHECK_OFF(steps, STEPS_OFF);
CHECK_OFF(iters, ITERS_OFF);
CHECK_OFF(nap, NAP);
CHECK_OFF(ready_tmp, READY_TMP);
CHECK_OFF(ready_path, READY_PATH);
CHECK_OFF(rename_rc, RENAME_RC);

#define STR_(x) #x
#define STR(x) STR_(x)

void fpu_hold(struct fpu_hold* h);

// System V ABI: rbx, r12, r13 are callee-saved (and survive syscall, which
// clobbers rax, rcx, r11 only); MXCSR and the x87 control word are restored.
__asm__(
    ".text\n"
    ".globl fpu_hold\n"
    ".type fpu_hold, @function\n"
    "fpu_hold:\n"
    "  push %rbx\n"
    "  push %r12\n"
    "  push %r13\n"
    "  mov %rdi, %rbx\n"
    "  stmxcsr " STR(SAVED_MXCSR) "(%rbx)\n"
    "  fnstcw " STR(SAVED_FCW) "(%rbx)\n"
    "  fninit\n"
    "  fldcw " STR(FCW_IN) "(%rbx)\n"
    "  ldmxcsr " STR(MXCSR_IN) "(%rbx)\n"
    "  .irp i,0,1,2,3,4,5,6,7\n"
    "  fldt " STR(X87_IN) "+\\i*16(%rbx)\n"
    "  .endr\n"
    "  testl $" STR(FEAT_AVX512) ", " STR(FEATURES) "(%rbx)\n"
    "  jz 1f\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
    "  vmovdqu64 " STR(VEC_IN) "+\\i*64(%rbx), %zmm\\i\n"
    "  .endr\n"
    "  .irp i,1,2,3,4,5,6,7\n"
    "  kmovq " STR(K_IN) "+\\i*8(%rbx), %k\\i\n"
    "  .endr\n"
    "  jmp 3f\n"
    "1:testl $" STR(FEAT_AVX) ", " STR(FEATURES) "(%rbx)\n"
    "  jz 2f\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "  vmovdqu " STR(VEC_IN) "+\\i*64(%rbx), %ymm\\i\n"
    "  .endr\n"
    "  jmp 3f\n"
    "2:\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "  movdqu " STR(VEC_IN) "+\\i*64(%rbx), %xmm\\i\n"
    "  .endr\n"
    // Registers are live: publish the ready file (rename(2) is syscall 82).
    "3:mov " STR(READY_TMP) "(%rbx), %rdi\n"
    "  test %rdi, %rdi\n"
    "  jz 4f\n"
    "  mov " STR(READY_PATH) "(%rbx), %rsi\n"
    "  mov $82, %eax\n"
    "  syscall\n"
    "  mov %rax, " STR(RENAME_RC) "(%rbx)\n"
    // Logistic map: xmm0 = x, xmm1 = r, xmm2 = 1.0, xmm3 = scratch.
    "4:movsd " STR(X0) "(%rbx), %xmm0\n"
    "  movsd " STR(R) "(%rbx), %xmm1\n"
    "  mov $0x3ff0000000000000, %rax\n"
    "  movq %rax, %xmm2\n"
    "  mov " STR(STEPS_OFF) "(%rbx), %r12\n"
    "5:mov " STR(ITERS_OFF) "(%rbx), %r13\n"
    "6:movapd %xmm2, %xmm3\n"
    "  subsd %xmm0, %xmm3\n"
    "  mulsd %xmm1, %xmm0\n"
    "  mulsd %xmm3, %xmm0\n"
    "  dec %r13\n"
    "  jnz 6b\n"
    // nanosleep(&nap, NULL) is syscall 35; its result does not matter here.
    "  cmpq $0, " STR(READY_TMP) "(%rbx)\n"
    "  je 7f\n"
    "  mov $35, %eax\n"
    "  lea " STR(NAP) "(%rbx), %rdi\n"
    "  xor %esi, %esi\n"
    "  syscall\n"
    "7:dec %r12\n"
    "  jnz 5b\n"
    "  movsd %xmm0, " STR(X_OUT) "(%rbx)\n"
    "  stmxcsr " STR(MXCSR_OUT) "(%rbx)\n"
    "  fnstcw " STR(FCW_OUT) "(%rbx)\n"
    "  .irp i,7,6,5,4,3,2,1,0\n"
    "  fstpt " STR(X87_OUT) "+\\i*16(%rbx)\n"
    "  .endr\n"
    "  testl $" STR(FEAT_AVX512) ", " STR(FEATURES) "(%rbx)\n"
    "  jz 1f\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
    "  vmovdqu64 %zmm\\i, " STR(VEC_OUT) "+\\i*64(%rbx)\n"
    "  .endr\n"
    "  .irp i,1,2,3,4,5,6,7\n"
    "  kmovq %k\\i, " STR(K_OUT) "+\\i*8(%rbx)\n"
    "  .endr\n"
    "  vzeroupper\n"
    "  jmp 3f\n"
    "1:testl $" STR(FEAT_AVX) ", " STR(FEATURES) "(%rbx)\n"
    "  jz 2f\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "  vmovdqu %ymm\\i, " STR(VEC_OUT) "+\\i*64(%rbx)\n"
    "  .endr\n"
    "  vzeroupper\n"
    "  jmp 3f\n"
    "2:\n"
    "  .irp i,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "  movdqu %xmm\\i, " STR(VEC_OUT) "+\\i*64(%rbx)\n"
    "  .endr\n"
    "3:ldmxcsr " STR(SAVED_MXCSR) "(%rbx)\n"
    "  fldcw " STR(SAVED_FCW) "(%rbx)\n"
    "  pop %r13\n"
    "  pop %r12\n"
    "  pop %rbx\n"
    "  ret\n"
    ".size fpu_hold, .-fpu_hold\n");

static void setup(struct fpu_hold* h, uint32_t features) {
  memset(h, 0, sizeof *h);
  for (int r = 0; r < 32; r++)
    for (int b = 0; b < 64; b++) h->vec_in[r][b] = (uint8_t)e2e_mix(r * 64 + b);
  for (int i = 0; i < 8; i++) {
    // Values with a 64-bit mantissa: not representable as doubles.
    long double v = (long double)(i + 1) / 3.0L * (i % 2 ? -1 : 1) + (long double)i * 1e6L;
    memcpy(h->x87_in[i], &v, 10);
  }
  for (int i = 0; i < 8; i++) h->k_in[i] = e2e_mix(1000 + i);
  h->x0 = 0.123456789;
  h->r = 3.99;
  h->mxcsr_in = 0xdfc0;  // FTZ, round up, DAZ, all exceptions masked
  h->fcw_in = 0x0a7f;    // round up, 53-bit precision, all exceptions masked
  h->features = features;
  h->steps = STEPS;
  h->iters = ITERS;
  h->nap.tv_nsec = 10 * 1000 * 1000;
}

// Compares what came out of the registers with what went in.
static void check_registers(const struct fpu_hold* h) {
  int width = (h->features & FEAT_AVX512) ? 64 : (h->features & FEAT_AVX) ? 32 : 16;
  for (int r = 4; r < 32; r++) {
    int w = r < 16 ? width : (h->features & FEAT_AVX512) ? 64 : 0;
    const char* name = w == 64 ? "zmm" : w == 32 ? "ymm" : "xmm";
    for (int b = 0; b < w; b++) {
      if (h->vec_out[r][b] != h->vec_in[r][b])
        e2e_fail("%s%d byte %d is %#x, expected %#x", name, r, b, h->vec_out[r][b],
                 h->vec_in[r][b]);
    }
  }
  if (h->features & FEAT_AVX512) {
    for (int k = 1; k < 8; k++) {
      if (h->k_out[k] != h->k_in[k])
        e2e_fail("k%d is %#llx, expected %#llx", k, (unsigned long long)h->k_out[k],
                 (unsigned long long)h->k_in[k]);
    }
  }
  for (int i = 0; i < 8; i++) {
    if (memcmp(h->x87_out[i], h->x87_in[i], 10) != 0) e2e_fail("x87 st%d changed", 7 - i);
  }
  if (h->fcw_out != h->fcw_in)
    e2e_fail("x87 control word %#x, expected %#x", h->fcw_out, h->fcw_in);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  __builtin_cpu_init();
  uint32_t features = 0;
  if (__builtin_cpu_supports("avx")) features |= FEAT_AVX;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    features |= FEAT_AVX512;

  static struct fpu_hold expect, live;
  setup(&expect, features);
  fpu_hold(&expect);
  check_registers(&expect);  // the harness itself works without a checkpoint

  setup(&live, features);
  char tmp[4096];
  e2e_ready_prepare(argv[1], tmp, sizeof tmp);
  live.ready_tmp = tmp;
  live.ready_path = argv[1];
  fpu_hold(&live);
  if (live.rename_rc != 0) e2e_fail("rename of the ready file: %s", strerror((int)-live.rename_rc));

  if (e2e_sabotage()) live.vec_in[9][1] ^= 0x10;  // checks that the comparison is live
  check_registers(&live);
  if (memcmp(&live.x_out, &expect.x_out, sizeof(double)) != 0)
    e2e_fail("logistic map gave %.17g, expected %.17g", live.x_out, expect.x_out);
  // Same operations, same sticky exception flags.
  if (live.mxcsr_out != expect.mxcsr_out)
    e2e_fail("MXCSR %#x, expected %#x", live.mxcsr_out, expect.mxcsr_out);
  e2e_done();
}
