// Checkpoint policy (cr_plan): how often to checkpoint, how many incrementals
// per full, live/frozen migration or pause, where spare nodes go and who
// replaces a failed node. Pure functions of the figures given; formulas and
// decisions in docs/policy.md. Every function refuses nonsense (negative
// times, p >= 1, an MTBF not longer than the checkpoint cost...) with EINVAL
// and a one-line cause. The C API for launchers is ckpt/plan.h.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::plan {

// ---- What a checkpoint chain tells about its job ------------------------------

// Figures measured by the chain itself (sizes, and times between generations).
// A chain records no checkpoint or restart durations: C, R, O_f and O_i come
// from the tools' --json statistics or from the user (docs/policy.md).
struct ChainFigures {
  uint64_t generations = 0;   // in the newest chain
  uint64_t incrementals = 0;  // generations - 1
  uint64_t full_content_bytes = 0;
  uint64_t full_pages = 0;
  double mean_incremental_content_bytes = 0;  // 0 without incrementals
  double mean_incremental_pages = 0;
  uint64_t resident_bytes = 0;   // pages the newest generation restores, times the page size
  double mean_interval_s = 0;    // between generations' start times; 0 without incrementals
  double dirty_pages_per_s = 0;  // pages each incremental saved / time since its parent
  double dirty_bytes_per_s = 0;
};
// Reads the newest chain in `dir` (the same reader as cr_info).
Result<ChainFigures> chain_figures(const std::string& dir);

// R estimated for a chain without a measured restart: what a restore of its
// newest generation writes (ChainFigures::resident_bytes), at the speed this
// machine reads and checks the chain's page content, measured now on up to
// 256 MiB of it (the work a restore does before it copies a run in). Only an
// estimate: a restore also rebuilds the process and copies the pages into
// it, and content in the page cache reads faster than from the device.
struct RestartEstimate {
  double restart_s = 0;
  uint64_t restore_bytes = 0;
  uint64_t sampled_bytes = 0;  // page content read and checked for the speed
  double read_bytes_per_s = 0;
};
Result<RestartEstimate> estimate_restart(const std::string& dir);

// ---- Failures and the checkpoint period -------------------------------------

// Platform MTBF from a node's: M = node_mtbf / nodes.
Result<double> platform_mtbf(double node_mtbf_s, double nodes);

struct IntervalInput {
  double checkpoint_s = 0;   // C
  double restart_s = 0;      // R
  double mtbf_s = 0;         // M, fail-stop errors of the platform
  double verify_s = 0;       // V, a verification that detects silent errors
  double silent_mtbf_s = 0;  // 1/lambda_s; 0: no silent errors
  double predicted = 0;      // p: fraction of fail-stop errors predicted and avoided
  // false: R is not known. Young/Daly does not use it, the exact E(T) does:
  // the plan then gives the first order only (IntervalPlan::exact_computed).
  bool restart_known = true;
};

struct IntervalPlan {
  double lambda = 0;         // effective fail-stop rate (1 - p)/M, per second
  double lambda_silent = 0;  // silent error rate, per second
  // First order (Young/Daly, with silent errors when given).
  double young_daly_period_s = 0;  // T*
  double young_daly_overhead = 0;  // H*, a fraction of the work
  // The exact expected time E(T), minimised numerically.
  double exact_period_s = 0;
  double exact_overhead = 0;                // H(T) = E(T)/T - 1 at exact_period_s
  double exact_overhead_at_young_daly = 0;  // what T* really costs
  double period_difference = 0;             // (T* - T_exact)/T_exact
  double overhead_difference = 0;           // (H* - H_exact)/H_exact
  bool first_order_ok = true;               // both differences within 10 %
  std::string note;                         // why first order is off, when it is
  // false (R not known): the exact fields, the differences and
  // first_order_ok are not computed (0, true) and `note` says so.
  bool exact_computed = true;
};

// Exact expected wall time of one period of `work_s` useful work: fail-stop
// errors (rate lambda) strike during work and verification, silent errors
// (lambda_s) during work and are caught by the verification; either costs
// the attempt plus R; the checkpoint and the restart are not struck.
//   E(T) = C + e^(lambda_s*T) * (e^(lambda*W) - 1)/lambda + R*(e^(lambda*W + lambda_s*T) - 1),
// W = T + V. With V = 0 and no silent errors this is policy.md's
// T + C + (e^(lambda*T) - 1)*(E_lost + R).
double expected_period_time(const IntervalInput& in, double work_s);
// H(T) = E(T)/T - 1.
double overhead(const IntervalInput& in, double work_s);
Result<IntervalPlan> plan_interval(const IntervalInput& in);

// ---- Incrementals between fulls ----------------------------------------------

struct IncrementalInput {
  double full_s = 0;               // O_f, cost of a full checkpoint
  double incremental_s = 0;        // O_i, cost of an incremental
  double restart_full_s = 0;       // R_f
  double restart_full_incr_s = 0;  // R_(f+i): from a full plus one incremental
  double mtbf_s = 0;               // platform MTBF
  double interval_s = 0;           // time between checkpoints; 0: Young/Daly from O_f
};

struct IncrementalPlan {
  double mu = 0;                   // O_i/O_f
  double delta_s = 0;              // extra restart time per incremental, R_(f+i) - R_f
  double interval_s = 0;           // the interval used
  double failure_probability = 0;  // P_i = 1 - e^(-interval/M)
  int64_t incrementals = 0;        // m per full; -1: no limit (an incremental adds no restart time)
  double savings_s = 0;            // S_m with R_(f+m*i) = R_f + m*delta (0 when unlimited)
  std::string note;
};

// S_n = n*(O_f - O_i) - (R_(f+n*i) - R_f).
double savings(int64_t n, double full_s, double incremental_s, double restart_full_s,
               double restart_full_n_incr_s);
// m = ceil((1 - mu)*O_f/(P_i*delta) - 1), at least 0.
Result<IncrementalPlan> plan_incrementals(const IncrementalInput& in);

// ---- Migration ahead of a predicted failure ----------------------------------

struct MigrateInput {
  double lead_s = 0;  // warning lead time before the predicted failure
  double dirty_bytes_per_s = 0;
  double resident_bytes = 0;
  double bandwidth_bytes_per_s = 0;
  double restart_s = 0;  // starting the process at the destination
  // The live sender's stop rules (ckpt::MigrateOptions' defaults).
  double threshold_bytes = 1 << 20;
  double diff_bytes = 256 << 10;
  double deadline_s = 60;
  int max_rounds = 30;
};

struct PrecopyRound {
  double bytes = 0;
  double seconds = 0;
};

enum class Mode { Live, Frozen, Pause };
const char* mode_name(Mode m);

struct MigratePlan {
  Mode mode = Mode::Pause;
  std::string reason;
  // Live: rounds as the sender would run them (the last is sent frozen).
  std::vector<PrecopyRound> rounds;
  std::string stop_reason;
  double live_seconds = 0;     // whole live migration: pre-copy + stop-and-copy + restart
  double live_downtime_s = 0;  // last round + restart
  double frozen_seconds = 0;   // resident/bandwidth + restart (all of it downtime)
};

Result<MigratePlan> plan_migration(const MigrateInput& in);

struct BackMigration {
  bool migrate_back = false;
  double gain_s = 0;  // remaining*(T_degraded - T_original)/T_original - T_migration
};
// Return to the repaired node iff the slowdown avoided over the remaining
// work exceeds the migration's cost.
Result<BackMigration> plan_back_migration(double remaining_s, double degraded_s, double original_s,
                                          double migration_s);

// ---- Where a checkpoint goes ------------------------------------------------

struct StorageInput {
  double mem_per_node_bytes = 0;
  double nodes = 0;                // nodes of the job
  double network_bytes_per_s = 0;  // per switch link to the parallel file system
  double switch_links = 0;
  double memory_bytes_per_s = 0;  // a node's memory bandwidth
  double latency_s = 0;           // network latency to a partner node
};

struct StorageCosts {
  double file_system_s = 0;  // (mem/B_net) * (nodes/switch_links)
  double local_s = 0;        // mem/B_mem
  double partner_s = 0;      // 2 * (local + latency + mem/B_mem)
};

// Checkpoint cost C per storage level (policy.md, "Storage levels").
Result<StorageCosts> storage_costs(const StorageInput& in);

// ---- Multi-level checkpoints ----------------------------------------------

// Levels: 0 node-local, 1 a partner node's copy, 2 shared storage. A
// failure of class i (share[i] of all failures) is recovered from the
// newest checkpoint of level i or above: a node's own memory survives a
// process crash (class 0), a partner's copy a node loss (class 1), only
// the shared storage the loss of a node and its partner (class 2).
struct LevelsInput {
  double checkpoint_s[3] = {0, 0,
                            0};     // a checkpoint that reaches level i (the lower ones included)
  double restart_s[3] = {0, 0, 0};  // a restart from level i
  double mtbf_s = 0;                // of the whole job, all classes
  // Default: the production severity mix of policy.md ("Storage levels").
  double share[3] = {0.138, 0.784, 0.078};
  uint64_t max_ratio = 1000;  // the largest n1, n2 searched
};

struct LevelsPlan {
  double period_s[3] = {0, 0, 0};  // between checkpoints that reach level i: T, n1 T, n1 n2 T
  uint64_t per_next[2] = {0,
                          0};  // level-0 checkpoints per level-1 one (n1), level-1 per level-2 (n2)
  double waste = 0;            // expected fraction of time lost: checkpoints, rework, restarts
  double single_period_s = 0;  // Young's period with every checkpoint on level 2
  double single_waste = 0;     // its waste
};

// The first-order optimum of the three-level schedule (docs/policy.md,
// "Levels"): waste(T, n1, n2) = A/T + B*T + sum(lambda_i R_i) with
// A = ((n1 n2 - n2) C0 + (n2 - 1) C1 + C2) / (n1 n2),
// B = lambda/2 (p0 + p1 n1 + p2 n1 n2), minimised at T = sqrt(A/B) for
// each n1, n2 in [1, max_ratio]. A level no failure needs and that costs no
// less than the next one is never worth it: the search finds n = 1 there.
Result<LevelsPlan> plan_levels(const LevelsInput& in);
// The model's waste of a given schedule.
double levels_waste(const LevelsInput& in, double period_s, uint64_t n1, uint64_t n2);

// ---- Spare nodes on a Cartesian mesh -------------------------------------------

// policy.md's fraction for N = n^q nodes, r dimensions keeping a slab of
// thickness s: R = 1 - ((n - s)^r * n^(q - r))/N.
Result<double> spare_fraction(double nodes, int q, int r, int s);

// A mesh with dims[i] nodes along dimension i; the first spare_dims
// dimensions keep their last `thickness` planes as spares. Nodes and ranks
// are numbered row-major (nodes over dims, ranks over the compute region).
struct Mesh {
  std::vector<int> dims;
  int spare_dims = 0;
  int thickness = 1;
};
Status check_mesh(const Mesh& m);
uint64_t mesh_nodes(const Mesh& m);
uint64_t mesh_spares(const Mesh& m);  // counted node by node

enum class Slide { Zero, One, Q, Hybrid };
const char* slide_name(Slide s);

using Coords = std::vector<int>;

struct RankMove {
  int64_t rank = 0;
  Coords from, to;
};

struct Substitution {
  Coords failed;
  std::string method;  // "0D", "1D", "qD", or "none" (the failed node held no rank)
  int dimension = -1;  // 1D/qD: the dimension slid along
  std::vector<RankMove> moves;
};

// Which node each rank runs on, kept across successive failures.
class RankMap {
 public:
  static Result<RankMap> create(const Mesh& m);
  const Mesh& mesh() const { return mesh_; }
  uint64_t ranks() const { return node_of_rank_.size(); }
  Coords node_of(int64_t rank) const { return coords(node_of_rank_[rank]); }
  Coords coords(uint64_t node) const;
  // Marks `failed` dead and moves its rank (if any) by `how` (Hybrid: qD,
  // then 1D, then 0D, the first that works). Fails, changing nothing, when
  // no method can place the rank.
  Result<Substitution> fail(const Coords& failed, Slide how);
  // Largest Manhattan distance between the nodes of two ranks that are
  // neighbours in the logical grid (1 before any failure).
  int max_neighbour_hops() const;

 private:
  bool try_slide(const Coords& f, int d, bool whole_planes, Substitution& out);
  bool try_nearest(const Coords& f, Substitution& out);
  int64_t node_id(const Coords& c) const;
  Mesh mesh_;
  std::vector<int64_t> node_of_rank_;
  std::vector<int64_t> rank_at_node_;  // -1: empty
  std::vector<bool> failed_;
  std::vector<int> compute_dims_;
};

// Worst-case message collisions after F failures (policy.md): 0D 2F+1 for
// F <= 6 or on a torus, else 4(F - 3); 1D 2 + F. -1 where policy.md gives none.
int64_t worst_collisions(Slide s, int64_t failures, bool torus);

}  // namespace ckpt::plan
