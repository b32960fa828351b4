// kill_at_step.so: preloaded into a checkpoint tool by tool_kill.sh (never
// part of the library). Every ptrace request or memory write that changes
// the target is one "step"; CKPT_KILL_AT_STEP=N makes the tool SIGKILL
// itself right after its Nth step, so the target is left in exactly the
// state that step produced. CKPT_STEP_COUNT_FILE=PATH receives the number
// of steps taken when the tool exits normally (how many there are to try).
// CKPT_STEP_HANDOVER=1 counts PTRACE_SETOPTIONS and PTRACE_DETACH as steps
// too: a tool killed right after setting EXITKILL (the sender's COMMIT
// comes next) or after letting a restored process go (the receiver's
// RUNNING comes next).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long steps;

static void after_step(void) {
  ++steps;
  const char* at = getenv("CKPT_KILL_AT_STEP");
  if (at && atol(at) == steps) kill(getpid(), SIGKILL);
}

static int changes_target(long req) {
  if (req == PTRACE_DETACH || req == PTRACE_SETOPTIONS) return getenv("CKPT_STEP_HANDOVER") != NULL;
  switch (req) {
    case PTRACE_SETREGS:
    case PTRACE_SETREGSET:
    case PTRACE_SETSIGMASK:
    case PTRACE_SYSCALL:
    case PTRACE_CONT:
    case PTRACE_POKEDATA:
    case PTRACE_POKETEXT:
    case PTRACE_SETFPREGS:
      return 1;
    default:
      return 0;
  }
}

long ptrace(enum __ptrace_request req, ...) {
  static long (*real)(int, pid_t, void*, void*);
  if (!real) real = (long (*)(int, pid_t, void*, void*))dlsym(RTLD_NEXT, "ptrace");
  va_list ap;
  va_start(ap, req);
  pid_t pid = va_arg(ap, pid_t);
  void* addr = va_arg(ap, void*);
  void* data = va_arg(ap, void*);
  va_end(ap);
  long r = real((int)req, pid, addr, data);
  if (changes_target((long)req)) after_step();
  return r;
}

ssize_t process_vm_writev(pid_t pid, const struct iovec* l, unsigned long ln, const struct iovec* r,
                          unsigned long rn, unsigned long flags) {
  static ssize_t (*real)(pid_t, const struct iovec*, unsigned long, const struct iovec*,
                         unsigned long, unsigned long);
  if (!real) real = dlsym(RTLD_NEXT, "process_vm_writev");
  ssize_t n = real(pid, l, ln, r, rn, flags);
  after_step();
  return n;
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("CKPT_STEP_COUNT_FILE");
  // Not from a process that took no step (a wrapper such as kill_at,
  // which ends after the tool and would overwrite its count).
  if (!path || steps == 0) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "%ld\n", steps);
  fclose(f);
}
