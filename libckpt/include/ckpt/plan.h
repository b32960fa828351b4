/* Checkpoint policy for launchers and resource managers: the C face of
 * ckpt/plan.hpp (formulas in docs/policy.md).
 *
 * The conventions of ckpt/ckpt.h, without a handle. Every call returns 0 or
 * -errno (-EINVAL for nonsense figures, -ENOSPC when no spare is left);
 * nothing is kept between calls. Every struct starts with `size`: set it to
 * sizeof the struct your code was compiled with, so a newer library knows
 * which fields you have (fields are only ever appended; fields beyond
 * `size` read as 0 and are not written; a struct bigger than this
 * library's is accepted when what it does not know is zero, and its output
 * beyond that is zeroed). The one-line cause of a failure is the thread's
 * ckpt_last_message() (ckpt/ckpt.h); a refused input's also goes to `msg`
 * when it is not NULL (NUL-terminated, truncated to msg_len), an
 * -ENOMEM's or -EIO's only to ckpt_last_message(). No C++ exception
 * crosses. */
#ifndef CKPT_PLAN_H
#define CKPT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ckpt_plan_interval_opts {
  size_t size;
  double checkpoint_s;  /* C */
  double restart_s;     /* R */
  double mtbf_s;        /* platform MTBF of fail-stop errors */
  double verify_s;      /* V; needs silent_mtbf_s */
  double silent_mtbf_s; /* 0: no silent errors */
  double predicted;     /* fraction of failures predicted and avoided, [0, 1) */
};

struct ckpt_plan_interval_result {
  size_t size;
  double young_daly_period_s;
  double young_daly_overhead; /* fraction of the work */
  double exact_period_s;      /* E(T)/T minimised numerically */
  double exact_overhead;
  double exact_overhead_at_young_daly;
  int first_order_ok; /* 1: T* and H* within 10 % of the exact figures */
};

int ckpt_plan_interval(const struct ckpt_plan_interval_opts* opts,
                       struct ckpt_plan_interval_result* out, char* msg, size_t msg_len);

struct ckpt_plan_incr_opts {
  size_t size;
  double full_s;              /* O_f */
  double incremental_s;       /* O_i */
  double restart_full_s;      /* R_f */
  double restart_full_incr_s; /* R_(f+i) */
  double mtbf_s;
  double interval_s; /* 0: the Young/Daly period of a full */
};

struct ckpt_plan_incr_result {
  size_t size;
  int64_t incrementals; /* per full; -1: no limit */
  double failure_probability;
  double savings_s; /* S_m */
};

int ckpt_plan_incrementals(const struct ckpt_plan_incr_opts* opts,
                           struct ckpt_plan_incr_result* out, char* msg, size_t msg_len);

enum ckpt_plan_mode { CKPT_PLAN_LIVE = 0, CKPT_PLAN_FROZEN = 1, CKPT_PLAN_PAUSE = 2 };

struct ckpt_plan_migrate_opts {
  size_t size;
  double lead_s;
  double dirty_bytes_per_s;
  double resident_bytes;
  double bandwidth_bytes_per_s;
  double restart_s;
};

struct ckpt_plan_migrate_result {
  size_t size;
  int mode; /* enum ckpt_plan_mode */
  double live_seconds;
  double live_downtime_s;
  double frozen_seconds;
  int rounds;
};

int ckpt_plan_migrate(const struct ckpt_plan_migrate_opts* opts,
                      struct ckpt_plan_migrate_result* out, char* msg, size_t msg_len);

/* Spare nodes of an n^q mesh whose first r dimensions keep a slab of
 * thickness s: count and fraction. */
int ckpt_plan_spares(uint64_t nodes, int q, int r, int s, uint64_t* spares, double* fraction,
                     char* msg, size_t msg_len);

/* A mesh with dims[i] nodes along dimension i (q <= 8); the first
 * spare_dims dimensions keep their last `thickness` planes as spares. Ranks
 * fill the other nodes row-major (docs/policy.md, "spares"). */
struct ckpt_plan_mesh {
  size_t size;
  int q;
  int dims[8];
  int spare_dims;
  int thickness;
  int reserved; /* must be 0 */
};

enum ckpt_plan_slide {
  CKPT_PLAN_SLIDE_0D = 0,
  CKPT_PLAN_SLIDE_1D = 1,
  CKPT_PLAN_SLIDE_QD = 2,
  CKPT_PLAN_SLIDE_HYBRID = 3 /* qD, then 1D, then 0D */
};

/* Applies `nfailed` node failures in order (node i's coordinates at
 * failed[i*q .. i*q + q - 1]) with `method`, and writes the resulting map:
 * rank r's node coordinates at rank_nodes[r*q ...]. *nranks: in, the room
 * in rank_nodes (in ranks); out, the number of ranks. -ENOSPC when a failure
 * finds no substitute, -ERANGE when rank_nodes is too small (*nranks then
 * says how many are needed). */
int ckpt_plan_substitute(const struct ckpt_plan_mesh* mesh, const int* failed, size_t nfailed,
                         int method, int* rank_nodes, size_t* nranks, char* msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* CKPT_PLAN_H */
