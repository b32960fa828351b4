/* launcher: a minimal launcher embedding libckpt through its C API.
 *
 *   launcher DIR -- COMMAND [ARGS...]
 *
 * Starts COMMAND as its child. Each SIGUSR1 checkpoints the job (COMMAND and
 * all its descendants): a full checkpoint first, incrementals after it, each
 * verified and described on one line. When the job's root dies by a signal,
 * its remaining processes are killed and the job is restored from the newest
 * checkpoint as this launcher's child again (up to 3 times). Exits with the
 * job's exit status (128 + N for signal N).
 *
 * Build: cc launcher.c $(pkg-config --cflags --libs libckpt)
 *    or: find_package(libckpt) + target_link_libraries(launcher libckpt::ckpt)
 */
#define _GNU_SOURCE
#include <ckpt/ckpt.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_progress(void* user, int phase, uint64_t done, uint64_t total) {
  unsigned* calls = user;
  (void)phase, (void)done, (void)total;
  ++*calls;
}

/* Kills and reaps what is left of the job: orphans are our children, since
 * this process is a child subreaper. */
static void kill_leftovers(void) {
  for (;;) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", getpid(), getpid());
    FILE* f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (n == 0) break;
    for (char* p = strtok(buf, " \n"); p; p = strtok(NULL, " \n")) kill(atoi(p), SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    usleep(1000);
  }
}

static int checkpoint(ckpt_ctx* ctx, const char* dir, pid_t root, int* have_chain) {
  struct ckpt_checkpoint_opts o = {.size = sizeof o, .dir = dir, .pid = root, .flags = CKPT_TREE};
  struct ckpt_checkpoint_stats s = {.size = sizeof s};
  int rc =
      *have_chain ? ckpt_checkpoint_incremental(ctx, &o, &s) : ckpt_checkpoint_full(ctx, &o, &s);
  if (rc < 0) {
    fprintf(stderr, "launcher: checkpoint failed (%s): %s\n", strerror(-rc), ckpt_ctx_message(ctx));
    return rc;
  }
  *have_chain = 1;
  rc = ckpt_verify(ctx, dir, s.generation);
  if (rc < 0) {
    fprintf(stderr, "launcher: verify failed: %s\n", ckpt_ctx_message(ctx));
    return rc;
  }
  struct ckpt_generation_info info = {.size = sizeof info};
  rc = ckpt_info(ctx, dir, 0, &info);
  if (rc < 0) {
    fprintf(stderr, "launcher: info failed: %s\n", ckpt_ctx_message(ctx));
    return rc;
  }
  fprintf(stderr,
          "launcher: checkpoint generation %llu (%s) of %llu processes, %llu bytes, frozen %.3f s, "
          "verified\n",
          (unsigned long long)info.generation, info.parent_generation ? "incremental" : "full",
          (unsigned long long)info.processes, (unsigned long long)s.bytes_written,
          s.frozen_seconds);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: launcher DIR -- COMMAND [ARGS...]\n");
    return 2;
  }
  const char* dir = argv[1];
  ckpt_ctx* ctx = NULL;
  if (ckpt_ctx_new(CKPT_API_VERSION, &ctx) < 0) {
    fprintf(stderr, "launcher: %s\n", ckpt_last_message());
    return 1;
  }
  unsigned progress_calls = 0;
  ckpt_set_progress(ctx, on_progress, &progress_calls);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  /* SIGUSR1 and SIGCHLD are taken synchronously (sigwaitinfo), so none is
   * lost while a checkpoint runs. */
  sigset_t wanted, old;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGUSR1);
  sigaddset(&wanted, SIGCHLD);
  sigprocmask(SIG_BLOCK, &wanted, &old);

  pid_t root = fork();
  if (root < 0) return perror("fork"), 1;
  if (root == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(argv[3], argv + 3);
    perror("exec");
    _exit(127);
  }
  fprintf(stderr, "launcher: started %d (libckpt %s)\n", root, ckpt_version());

  int have_chain = 0, restarts = 0, status = 0;
  for (;;) {
    pid_t w = waitpid(-1, &status, WNOHANG);
    if (w < 0) return perror("waitpid"), 1;
    if (w == 0) { /* nothing ended: wait for a signal */
      if (sigwaitinfo(&wanted, NULL) != SIGUSR1) continue;
      if (checkpoint(ctx, dir, root, &have_chain) == 0 || kill(root, 0) == 0) continue;
      /* The root died during the checkpoint and the library, its tracer,
       * reaped it (cr_run checkpoints from a child process to keep the
       * status): count it as a death by signal. */
      status = SIGKILL;
      w = root;
    }
    if (w != root) continue; /* an orphaned member of the job */
    if (!WIFSIGNALED(status) || !have_chain || restarts == 3) break;
    fprintf(stderr, "launcher: job died by signal %d; restoring\n", WTERMSIG(status));
    kill_leftovers();
    struct ckpt_restore_opts ro = {.size = sizeof ro, .dir = dir};
    struct ckpt_restore_stats rs = {.size = sizeof rs};
    int rc = ckpt_restore(ctx, &ro, &rs);
    if (rc < 0) {
      fprintf(stderr, "launcher: restore failed: %s\n", ckpt_ctx_message(ctx));
      return 1;
    }
    ++restarts;
    root = rs.pid;
    fprintf(stderr, "launcher: restored generation %llu as %d (%llu processes, %.3f s)\n",
            (unsigned long long)rs.generation, rs.pid, (unsigned long long)rs.processes,
            rs.seconds);
  }
  kill_leftovers();
  ckpt_ctx_free(ctx);
  fprintf(stderr, "launcher: job ended (%u progress reports)\n", progress_calls);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}
