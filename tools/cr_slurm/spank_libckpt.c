// spank_libckpt.so: the SPANK plugin that puts a Slurm job step under
// libckpt. It only registers and checks the options and, in each task just
// before its exec, puts cr_slurm in the task's place (argv[0]) with the
// options and the task's identity in its environment; cr_slurm runs the task
// as a checkpointed job, or restores it after a requeue (docs/slurm.md).
// Written in C, as spank.h declares the callbacks for C, and kept to libc:
// it is loaded into srun, sbatch and slurmstepd.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(libckpt, 1)

#ifndef CR_SLURM_DEFAULT_PATH
#define CR_SLURM_DEFAULT_PATH "/usr/local/bin/cr_slurm"
#endif

enum opt { kDir, kInterval, kIncrementals, kKeep, kBeforeEnd, kSignal, kBatch, kLocal, kCount };

// Values as given (validated by the callbacks), in every context.
static const char* g_value[kCount];
static char g_cr_slurm[4096] = CR_SLURM_DEFAULT_PATH;

static bool whole_number(const char* s, unsigned long max) {
  if (!s || !*s) return false;
  char* end = NULL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  return errno == 0 && *end == 0 && s[0] != '-' && v <= max;
}

static bool seconds_or_auto(const char* s) {
  if (s && strcmp(s, "auto") == 0) return true;
  return whole_number(s, 1000000000UL);
}

// A signal the wrapper may take for itself: not one it forwards or cannot catch.
static int signal_number(const char* s) {
  if (!s || !*s) return -1;
  const char* name = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;
  int sig = -1;
  if (whole_number(name, 64))
    sig = atoi(name);
  else
    for (int i = 1; i < NSIG; ++i)
      if (sigabbrev_np(i) && strcmp(sigabbrev_np(i), name) == 0) sig = i;
  if (sig == SIGKILL || sig == SIGSTOP || sig == SIGTERM || sig == SIGINT || sig == SIGHUP ||
      sig == SIGCHLD || sig == SIGCONT || sig <= 0 || sig >= NSIG)
    return -1;
  return sig;
}

static bool valid(int opt, const char* v) {
  switch (opt) {
    case kDir:
      return v && v[0] == '/';
    case kInterval:
      return seconds_or_auto(v);
    case kIncrementals:
      return whole_number(v, 1000000UL);
    case kKeep:
      return whole_number(v, 1000000UL) && strtoul(v, NULL, 10) >= 1;
    case kBeforeEnd:
      return whole_number(v, 1000000000UL);
    case kSignal:
      return signal_number(v) > 0;
    case kBatch:
      return true;
    case kLocal:
      return v && v[0] == '/';
  }
  return false;
}

static const char* const kExpect[kCount] = {
    "an absolute directory",
    "seconds or auto",
    "a whole number",
    "a whole number of at least 1",
    "seconds",
    "a signal name or number other than TERM, INT, HUP, CHLD, CONT, KILL, STOP",
    "",
    "an absolute directory"};

static const char* const kName[kCount] = {"ckpt-dir",   "ckpt-interval",   "ckpt-incrementals",
                                          "ckpt-keep",  "ckpt-before-end", "ckpt-signal",
                                          "ckpt-batch", "ckpt-local"};

static int take(int opt, const char* optarg, int remote) {
  (void)remote;
  if (!valid(opt, optarg)) {
    slurm_error("libckpt: --%s=%s: expected %s", kName[opt], optarg ? optarg : "", kExpect[opt]);
    return -1;
  }
  g_value[opt] = optarg ? strdup(optarg) : "1";
  return 0;
}

static struct spank_option g_options[] = {
    {(char*)"ckpt-dir", (char*)"DIR",
     (char*)"checkpoint the job's tasks into DIR/job-ID/step-S/task-T (libckpt) and restore them "
            "from there after a requeue",
     1, kDir, take},
    {(char*)"ckpt-interval", (char*)"S|auto",
     (char*)"seconds between checkpoints (default 600; 0: none on a schedule), or auto (cr_plan)",
     1, kInterval, take},
    {(char*)"ckpt-incrementals", (char*)"N", (char*)"incrementals after each full (default 4)", 1,
     kIncrementals, take},
    {(char*)"ckpt-keep", (char*)"K", (char*)"chains kept per task (default 2)", 1, kKeep, take},
    {(char*)"ckpt-before-end", (char*)"S",
     (char*)"S seconds before the time limit: checkpoint, stop and requeue the job", 1, kBeforeEnd,
     take},
    {(char*)"ckpt-signal", (char*)"SIG",
     (char*)"on SIG (default USR1) a task's wrapper checkpoints, stops and requeues the job, e.g. "
            "with --signal=B:USR1@120 or scancel --batch --signal=USR1",
     1, kSignal, take},
    {(char*)"ckpt-batch", NULL,
     (char*)"checkpoint the batch script and all it starts on its node (e.g. mpirun on one node) "
            "instead of the steps srun starts",
     0, kBatch, take},
    {(char*)"ckpt-local", (char*)"DIR",
     (char*)"write each checkpoint to DIR on the node first (%n: the node's name) and copy it to "
            "--ckpt-dir in the background",
     1, kLocal, take},
    SPANK_OPTIONS_TABLE_END};

static const char* const kEnv[kCount] = {
    "CR_SLURM_DIR",        "CR_SLURM_INTERVAL", "CR_SLURM_INCREMENTALS", "CR_SLURM_KEEP",
    "CR_SLURM_BEFORE_END", "CR_SLURM_SIGNAL",   "CR_SLURM_BATCH",        "CR_SLURM_LOCAL"};

static bool setenv_or_log(spank_t sp, const char* name, const char* value) {
  if (spank_setenv(sp, name, value, 1) == ESPANK_SUCCESS) return true;
  slurm_error("libckpt: cannot set %s in the task's environment", name);
  return false;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  for (int i = 0; i < ac; ++i)
    if (strncmp(av[i], "cr_slurm=", 9) == 0)
      snprintf(g_cr_slurm, sizeof g_cr_slurm, "%s", av[i] + 9);
  for (struct spank_option* o = g_options; o->name; ++o)
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("libckpt: cannot register --%s", o->name);
      return -1;
    }
  return 0;
}

// Combinations, checked where the user is (srun, sbatch, salloc): one line.
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  (void)sp, (void)ac, (void)av;
  if (g_value[kDir]) return 0;
  for (int o = kInterval; o < kCount; ++o)
    if (g_value[o]) {
      slurm_error("libckpt: --%s needs --ckpt-dir=DIR", kName[o]);
      return -1;
    }
  return 0;
}

// In the task, before its exec: cr_slurm takes argv[0]'s place. Slurm
// execs task->argv, which for a step without --multi-prog is the step's
// argv that S_JOB_ARGV returns.
int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac, (void)av;
  if (!g_value[kDir]) return 0;
  uint32_t job = 0, step = 0, task = 0;
  int argc = 0;
  char** argv = NULL;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_TASK_GLOBAL_ID, &task) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv[0]) {
    slurm_error("libckpt: cannot read the task's identity: not checkpointed");
    return -1;
  }
  const bool batch = step == SLURM_BATCH_SCRIPT;
  // One level of checkpointing: the batch script (--ckpt-batch) or the
  // steps srun starts, never a step inside a checkpointed batch script.
  if (batch != (g_value[kBatch] != NULL)) return 0;
  char buf[64];
  if (spank_getenv(sp, "CR_SLURM_INSIDE", buf, sizeof buf) == ESPANK_SUCCESS) return 0;
  char id[64];
  bool ok = setenv_or_log(sp, "CR_SLURM_COMMAND0", argv[0]);
  snprintf(id, sizeof id, "%u", job);
  ok = ok && setenv_or_log(sp, "CR_SLURM_JOB", id);
  if (batch)
    snprintf(id, sizeof id, "batch");
  else
    snprintf(id, sizeof id, "%u", step);
  ok = ok && setenv_or_log(sp, "CR_SLURM_STEP", id);
  snprintf(id, sizeof id, "%u", task);
  ok = ok && setenv_or_log(sp, "CR_SLURM_TASK", id);
  for (int o = 0; o < kCount && ok; ++o)
    if (g_value[o]) ok = setenv_or_log(sp, kEnv[o], g_value[o]);
  if (!ok) return -1;
  argv[0] = strdup(g_cr_slurm);
  return argv[0] ? 0 : -1;
}
