/* libckpt C API: checkpoint, restore, verify, pause and migrate running
 * processes and process trees, for launchers and resource managers. The C
 * face of ckpt/ckpt.hpp, ckpt/pause.hpp and ckpt/migrate.hpp, with the
 * conventions of ckpt/plan.h (policy). Manual: libckpt(3).
 *
 * Conventions (the same for every call):
 *  - Every call returns 0 or -errno (-EINVAL for bad arguments: a NULL
 *    handle or options, a struct whose `size` is too small, an unknown API
 *    version). Nothing is global and nothing exits or aborts the caller.
 *  - A handle (ckpt_ctx) carries the one-line cause of its last failure,
 *    ckpt_ctx_message(); ckpt_last_message() gives the calling thread's
 *    last cause, also for failures that had no handle (NULL). A handle is
 *    used by one thread at a time.
 *  - Every struct starts with `size`: set it to sizeof the struct your code
 *    was compiled with, and zero the rest before setting fields (= {0} or
 *    designated initializers). Fields are only ever appended. Options need
 *    at least the fields of API version 1 (CKPT_*_OPTS_SIZE_V1); a bigger
 *    struct is accepted when the fields this library does not know are
 *    zero, and every options struct's `reserved` must be zero (it fills what
 *    would be padding, where a newer field could otherwise go unseen).
 *    Outputs (stats, may be NULL) are written up to their `size`; what the
 *    caller's struct has beyond this library's is zeroed.
 *  - No C++ exception, abort or signal handler crosses this API: out of
 *    memory is -ENOMEM, a thread that cannot be made its -errno.
 *  - Messages are at most 511 bytes.
 *  - A failed checkpoint leaves the target running as before; a failed
 *    restore leaves nothing behind; no partial generation becomes visible.
 */
#ifndef CKPT_CKPT_H
#define CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library this header comes with. ckpt_version_number() is the one
 * running: the two may differ when the program runs against a newer
 * libckpt.so of the same major version. */
#define CKPT_VERSION_MAJOR 2
#define CKPT_VERSION_MINOR 0
#define CKPT_VERSION_PATCH 0
#define CKPT_VERSION_NUMBER \
  (CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH)

/* The behaviour of the calls this header describes; pass it to
 * ckpt_ctx_new(). It changes only when a call's meaning changes for
 * callers that do not change (new calls, fields and flags do not). */
#define CKPT_API_VERSION 1

typedef struct ckpt_ctx ckpt_ctx;

/* Creates a handle for `api_version` (CKPT_API_VERSION). -EINVAL for an
 * unknown version, -ENOMEM. */
int ckpt_ctx_new(int api_version, ckpt_ctx** out);
void ckpt_ctx_free(ckpt_ctx* ctx); /* NULL is fine */

/* The one-line cause of the handle's last failure ("" after a success).
 * Valid until the next call on the handle. NULL handle: ckpt_last_message(). */
const char* ckpt_ctx_message(const ckpt_ctx* ctx);
/* The calling thread's last failure cause, whatever the handle. */
const char* ckpt_last_message(void);

/* The running library's version, "MAJOR.MINOR.PATCH", and as a number
 * (MAJOR * 10000 + MINOR * 100 + PATCH, as CKPT_VERSION_NUMBER). */
const char* ckpt_version(void);
unsigned ckpt_version_number(void);
/* 0 when the running library has everything of version major.minor (the
 * same major, a minor at least as high), else -EINVAL with a message. */
int ckpt_check_version(unsigned major, unsigned minor);

/* The dirty trackers the options' `tracker` accepts besides "auto", best
 * first ("auto" picks the first this kernel supports): the name at `index`,
 * NULL past the last. */
const char* ckpt_tracker_name(unsigned index);

/* Progress of long work: bytes done of bytes total, now and then. Runs on the
 * calling thread, inside the call; it must not call libckpt on the same
 * handle. */
enum ckpt_phase { CKPT_PHASE_CHECKPOINT = 1, CKPT_PHASE_RESTORE = 2, CKPT_PHASE_MIGRATE = 3 };
typedef void (*ckpt_progress_fn)(void* user, int phase, uint64_t done, uint64_t total);
/* NULL fn: no progress. */
int ckpt_set_progress(ckpt_ctx* ctx, ckpt_progress_fn fn, void* user);

/* ---- Checkpoint ---------------------------------------------------------- */

enum ckpt_checkpoint_flags {
  CKPT_TREE = 1u << 0, /* the process and all its descendants, as one job */
  CKPT_KILL = 1u << 1, /* end the job after a successful checkpoint */
  /* write page content with O_DIRECT: what cr_run does for its scheduled
   * checkpoints (no page cache filled, less memory traffic beside the job) */
  CKPT_DIRECT = 1u << 2,
  CKPT_FORCE = 1u << 3, /* full: move another process's chain in dir aside */
  /* TCP connections to peers outside the job saved in repair mode (held back
   * while frozen; with CKPT_KILL until the restore rebuilds them) */
  CKPT_TCP_ESTABLISHED = 1u << 4,
  /* memory pre-copied while the job runs, the job frozen only for what it
   * wrote since (a kernel dirty tracker) */
  CKPT_LIVE = 1u << 5,
  /* no fsync: an OS crash may lose this generation, never show half of one */
  CKPT_NO_SYNC = 1u << 6
};

struct ckpt_checkpoint_opts {
  size_t size;
  const char* dir;     /* checkpoint directory (created if missing) */
  pid_t pid;           /* the target; with CKPT_TREE the root of the job */
  unsigned flags;      /* enum ckpt_checkpoint_flags */
  const char* tracker; /* NULL or "auto", or one of ckpt_tracker_name() */
  /* appended after V1 (a V1-sized struct reads as 0): zstd level 1-19 for
   * page content, 0 = stored plain (docs/format.md, compressed runs) */
  int compress_level;
  int reserved; /* must be 0 */
};
#define CKPT_CHECKPOINT_OPTS_SIZE_V1 \
  (offsetof(struct ckpt_checkpoint_opts, tracker) + sizeof(char*))

struct ckpt_checkpoint_stats {
  size_t size;
  uint64_t generation;
  uint64_t parent_generation; /* 0: a full checkpoint */
  uint64_t processes;         /* members of the job (zombies included) */
  double frozen_seconds;      /* the job was stopped this long */
  double memory_seconds;
  double total_seconds;
  uint64_t vmas;
  uint64_t pages_scanned;
  uint64_t pages_skipped;
  uint64_t pages_written;
  uint64_t pages_zero;
  uint64_t bytes_written; /* all files of the generation */
  char tracker[24];       /* the chain's dirty tracker, NUL-terminated */
  int tracking_reset;     /* 1: tracking was lost, this incremental saved everything */
};

/* A full checkpoint: starts a new chain in opts->dir. */
int ckpt_checkpoint_full(ckpt_ctx* ctx, const struct ckpt_checkpoint_opts* opts,
                         struct ckpt_checkpoint_stats* stats);
/* An incremental checkpoint on top of the newest generation in opts->dir
 * (-ENOENT-like failure with a message when there is none). */
int ckpt_checkpoint_incremental(ckpt_ctx* ctx, const struct ckpt_checkpoint_opts* opts,
                                struct ckpt_checkpoint_stats* stats);
/* Unmaps the copy buffers kept for the next checkpoint (ckpt::release_buffers). */
void ckpt_release_buffers(void);

/* ---- Restore ------------------------------------------------------------- */

enum ckpt_restore_flags {
  CKPT_RESTORE_NEW_PID = 1u << 0, /* a new PID when the original one is taken */
  CKPT_RESTORE_FORCE = 1u << 1,   /* even if files changed on disk since the checkpoint */
  /* Detached: the restored job is not the caller's child (it is restored by
   * a short-lived intermediate process that this call forks, and reparented
   * to the nearest child subreaper, or init); the caller cannot wait for it.
   * Progress still reaches the callback on the calling thread. Without it
   * (attached) the restored root is the caller's child and the caller must
   * reap it. */
  CKPT_RESTORE_DETACH = 1u << 2
};

struct ckpt_restore_opts {
  size_t size;
  const char* dir;
  uint64_t generation; /* 0: the newest committed generation */
  unsigned flags;      /* enum ckpt_restore_flags */
  unsigned reserved;   /* must be 0 */
};
#define CKPT_RESTORE_OPTS_SIZE_V1 (offsetof(struct ckpt_restore_opts, flags) + sizeof(unsigned))

struct ckpt_restore_stats {
  size_t size;
  pid_t pid; /* the restored process (a job's root), running */
  uint64_t processes;
  uint64_t generation;
  uint64_t generations_read;
  double seconds;
  uint64_t pages_read;
  uint64_t pages_written;
  uint64_t bytes_read;
};

/* Every checksum is verified before the job runs. */
int ckpt_restore(ckpt_ctx* ctx, const struct ckpt_restore_opts* opts,
                 struct ckpt_restore_stats* stats);

/* ---- Info and verify ----------------------------------------------------- */

/* The committed generations in dir, ascending. *n: in, the room in gens;
 * out, how many there are. -ERANGE when gens is too small (or NULL). */
int ckpt_generations(ckpt_ctx* ctx, const char* dir, uint64_t* gens, size_t* n);

struct ckpt_generation_info {
  size_t size;
  uint64_t generation;
  uint64_t parent_generation; /* 0: a full checkpoint */
  pid_t pid;                  /* the job's root */
  char comm[16];              /* its name, NUL-terminated */
  uint64_t processes;         /* members of the job */
  uint64_t threads;           /* of the root */
  uint64_t vmas;              /* of the root */
  uint64_t pages;             /* of all members */
  uint64_t content_bytes;     /* of all members */
  int64_t created_unix_ns;
};

/* Describes generation `generation` of dir (0: the newest). */
int ckpt_info(ckpt_ctx* ctx, const char* dir, uint64_t generation,
              struct ckpt_generation_info* info);
/* Checks every checksum and the chain a restore of `generation` would read
 * (0: every generation in dir). -EBADMSG for damage, -ENOENT for a missing
 * generation or parent, with a message naming the first one. */
int ckpt_verify(ckpt_ctx* ctx, const char* dir, uint64_t generation);

struct ckpt_compact_stats {
  size_t size;
  uint64_t generation; /* the new full */
  uint64_t generations_folded;
  uint64_t bytes_written;
  double seconds;
};
/* Folds the newest chain in dir into one full generation, offline. */
int ckpt_compact(ckpt_ctx* ctx, const char* dir, struct ckpt_compact_stats* stats);

struct ckpt_untrack_stats {
  size_t size;
  uint64_t processes; /* members of the newest generation found running */
  uint64_t released;  /* of those, the ones that still held the tracker */
  char tracker[24];   /* the chain's, NUL-terminated */
};
/* Ends the dirty-page tracking the chain in dir keeps in its running
 * process or job (cr_untrack): it is handed back clean; the chain stays
 * restorable and its next incremental saves everything. */
int ckpt_untrack(ckpt_ctx* ctx, const char* dir, struct ckpt_untrack_stats* stats);

/* ---- Pause (rollback in place) ------------------------------------------- */

enum ckpt_pause_flags {
  /* the job of pid (also implied by a chain taken with CKPT_TREE): rolled
   * back by kill and restore with the same PIDs; its root is then the
   * caller's child */
  CKPT_PAUSE_TREE = 1u << 0
};

struct ckpt_pause_opts {
  size_t size;
  const char* dir; /* checkpoint directory of this process */
  pid_t pid;
  unsigned flags; /* appended after V1: enum ckpt_pause_flags */
};
#define CKPT_PAUSE_OPTS_SIZE_V1 (offsetof(struct ckpt_pause_opts, pid) + sizeof(pid_t))

struct ckpt_pause_stats {
  size_t size;
  uint64_t generation;
  uint64_t pages_compared;
  uint64_t pages_written;
  uint64_t pages_dropped;
  double frozen_seconds;
  double seconds;
  /* appended after V1 */
  uint64_t processes; /* members rolled back */
  pid_t pid;          /* the (root) process now running the checkpoint */
  int restarted;      /* 1: a job, killed and restored with the same PIDs (the
                       * root is the caller's child: wait for it); 0: in place */
};

/* Rolls process opts->pid back to the newest generation in opts->dir: a
 * single process in place (the same process continues), a job by kill and
 * restore with the same PIDs. */
int ckpt_pause(ckpt_ctx* ctx, const struct ckpt_pause_opts* opts, struct ckpt_pause_stats* stats);

/* ---- Migrate ------------------------------------------------------------- */

enum ckpt_migrate_flags {
  CKPT_MIGRATE_LIVE = 1u << 0, /* else frozen */
  CKPT_MIGRATE_TREE = 1u << 1, /* the process and all its descendants, as one job */
  /* with CKPT_MIGRATE_TREE: connections to peers outside the job too */
  CKPT_MIGRATE_TCP_ESTABLISHED = 1u << 2
};

struct ckpt_migrate_opts {
  size_t size;
  const char* to;         /* "HOST:PORT" where cr_recv listens */
  const char* token_file; /* shared secret, owner-only */
  pid_t pid;
  unsigned flags;          /* enum ckpt_migrate_flags */
  const char* tracker;     /* live: NULL or "auto", or one of ckpt_tracker_name() */
  double timeout_seconds;  /* 0: 60 */
  double deadline_seconds; /* live: 0: 60 */
  uint64_t reserved;       /* must be 0 */
};
#define CKPT_MIGRATE_OPTS_SIZE_V1 \
  (offsetof(struct ckpt_migrate_opts, deadline_seconds) + sizeof(double))

struct ckpt_migrate_stats {
  size_t size;
  pid_t remote_pid;
  uint64_t rounds;
  uint64_t bytes_total;
  double migration_seconds;
  double downtime_seconds;
  uint64_t processes; /* appended after V1: members moved */
};

/* Moves process opts->pid to the receiver; it ends here only once it runs
 * there, and continues here untouched on any failure. */
int ckpt_migrate(ckpt_ctx* ctx, const struct ckpt_migrate_opts* opts,
                 struct ckpt_migrate_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_CKPT_H */
