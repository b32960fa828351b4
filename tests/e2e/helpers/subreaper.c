// subreaper CMD...: runs CMD as a child subreaper, so processes orphaned
// below it (a killed launcher's job) are re-parented here and reaped, not
// left to an init that may never reap them; exits with CMD's status.
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: subreaper CMD...\n");
    return 2;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t cmd = fork();
  if (cmd < 0) return perror("fork"), 2;
  if (cmd == 0) {
    execvp(argv[1], argv + 1);
    perror("exec");
    _exit(127);
  }
  for (;;) {
    int st;
    pid_t w = wait(&st);
    if (w < 0) return 2;
    if (w == cmd) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
}
