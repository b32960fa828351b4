// syscall_in PID NR [ARG...]: makes the running process PID execute system
// call NR with up to six integer arguments, as if its own code had, and
// prints the result. The tests use it to act inside an unmodified program
// (close_range(3, ~0, 0) as a daemon does) without a debugger: gdb's
// inferior calls need to write the extended register state, which some
// kernels refuse ("Couldn't write extended state status").
//
// How: seize and interrupt the process, save its registers, write a
// `syscall; int3` pair over the instruction at its program counter, run it
// with the call's registers, then put the bytes and the registers back.
// orig_rax = -1 keeps the kernel from restarting the system call the
// process was interrupted in while ours runs; the saved registers carry
// that restart, so the process resumes what it was doing.
// Exit: 0 the call ran (its result may be an error, printed as -errno);
// 1 a ptrace step failed; 2 usage.
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static int die(const char* what, pid_t pid) {
  fprintf(stderr, "syscall_in: %s (PID %d): %s\n", what, (int)pid, strerror(errno));
  return 1;
}

// A signal that arrives while the process is held: delivered at the detach.
static int pending_signal;

// Waits for `pid` to stop with SIGTRAP or a ptrace event stop; any other
// signal is held back for the detach and the process resumed, so the
// program's handlers never run while its code is patched.
static int wait_trap(pid_t pid) {
  for (;;) {
    int status;
    if (waitpid(pid, &status, __WALL) < 0) return -1;
    if (!WIFSTOPPED(status)) {
      errno = ESRCH;
      return -1;
    }
    if (WSTOPSIG(status) == SIGTRAP) return 0;
    if ((status >> 16) == PTRACE_EVENT_STOP) return 0;
    pending_signal = WSTOPSIG(status);
    if (ptrace(PTRACE_CONT, pid, 0, 0) < 0) return -1;
  }
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 9) {
    fprintf(stderr, "usage: syscall_in PID NR [ARG...] (up to 6 arguments)\n");
    return 2;
  }
  pid_t pid = (pid_t)strtol(argv[1], NULL, 10);
  unsigned long long args[6] = {0};
  long nr = strtol(argv[2], NULL, 0);
  for (int i = 3; i < argc; i++) args[i - 3] = strtoull(argv[i], NULL, 0);

  if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0) return die("seize", pid);
  if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0) return die("interrupt", pid);
  if (wait_trap(pid) < 0) return die("wait for the stop", pid);

  struct user_regs_struct saved, regs;
  if (ptrace(PTRACE_GETREGS, pid, 0, &saved) < 0) return die("read registers", pid);
  errno = 0;
  long word = ptrace(PTRACE_PEEKTEXT, pid, (void*)saved.rip, 0);
  if (errno) return die("read code", pid);
  long patched = word;
  memcpy(&patched, "\x0f\x05\xcc", 3);  // syscall; int3
  if (ptrace(PTRACE_POKETEXT, pid, (void*)saved.rip, (void*)patched) < 0)
    return die("write code", pid);

  regs = saved;
  regs.orig_rax = (unsigned long long)-1;
  regs.rax = (unsigned long long)nr;
  regs.rdi = args[0];
  regs.rsi = args[1];
  regs.rdx = args[2];
  regs.r10 = args[3];
  regs.r8 = args[4];
  regs.r9 = args[5];
  int rc = 0;
  long result = 0;
  if (ptrace(PTRACE_SETREGS, pid, 0, &regs) < 0 || ptrace(PTRACE_CONT, pid, 0, 0) < 0 ||
      wait_trap(pid) < 0 || ptrace(PTRACE_GETREGS, pid, 0, &regs) < 0) {
    rc = die("run the call", pid);
  } else {
    result = (long)regs.rax;
  }
  if (ptrace(PTRACE_POKETEXT, pid, (void*)saved.rip, (void*)word) < 0 ||
      ptrace(PTRACE_SETREGS, pid, 0, &saved) < 0)
    return die("restore the process", pid);
  if (ptrace(PTRACE_DETACH, pid, 0, (void*)(long)pending_signal) < 0) return die("detach", pid);
  if (rc == 0) printf("%ld\n", result);
  return rc;
}
