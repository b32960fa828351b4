// ckpt/plan.h: the C entry points over ckpt/plan.hpp. Structs are copied
// through `size` so callers built against an older, shorter struct work.
#include <ckpt/plan.h>

#include <algorithm>
#include <ckpt/plan.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Copies the caller's struct (its `size` bytes at most) into a zeroed full one.
template <class T>
int read_in(const T* in, T& out) {
  std::memset(&out, 0, sizeof out);
  if (!in || in->size < sizeof(size_t)) return -EINVAL;
  std::memcpy(&out, in, std::min(in->size, sizeof(T)));
  return 0;
}

template <class T>
void write_out(const T& full, T* out) {
  size_t n = std::min(out->size, sizeof(T));
  size_t keep = out->size;
  std::memcpy(out, &full, n);
  out->size = keep;
}

int fail(const ckpt::Error& e, char* msg, size_t len) {
  if (msg && len) {
    size_t n = std::min(len - 1, e.message.size());
    std::memcpy(msg, e.message.data(), n);
    msg[n] = 0;
  }
  return -e.code;
}

int bad_struct(char* msg, size_t len) {
  return fail(ckpt::make_error(EINVAL, "missing struct or size not set"), msg, len);
}

}  // namespace

extern "C" int ckpt_plan_interval(const struct ckpt_plan_interval_opts* opts,
                                  struct ckpt_plan_interval_result* out, char* msg,
                                  size_t msg_len) {
  ckpt_plan_interval_opts o;
  if (read_in(opts, o) || !out || out->size < sizeof(size_t)) return bad_struct(msg, msg_len);
  ckpt::plan::IntervalInput in;
  in.checkpoint_s = o.checkpoint_s;
  in.restart_s = o.restart_s;
  in.mtbf_s = o.mtbf_s;
  in.verify_s = o.verify_s;
  in.silent_mtbf_s = o.silent_mtbf_s;
  in.predicted = o.predicted;
  auto p = ckpt::plan::plan_interval(in);
  if (!p.ok()) return fail(p.error(), msg, msg_len);
  ckpt_plan_interval_result r{};
  r.young_daly_period_s = p->young_daly_period_s;
  r.young_daly_overhead = p->young_daly_overhead;
  r.exact_period_s = p->exact_period_s;
  r.exact_overhead = p->exact_overhead;
  r.exact_overhead_at_young_daly = p->exact_overhead_at_young_daly;
  r.first_order_ok = p->first_order_ok;
  write_out(r, out);
  return 0;
}

extern "C" int ckpt_plan_incrementals(const struct ckpt_plan_incr_opts* opts,
                                      struct ckpt_plan_incr_result* out, char* msg,
                                      size_t msg_len) {
  ckpt_plan_incr_opts o;
  if (read_in(opts, o) || !out || out->size < sizeof(size_t)) return bad_struct(msg, msg_len);
  ckpt::plan::IncrementalInput in;
  in.full_s = o.full_s;
  in.incremental_s = o.incremental_s;
  in.restart_full_s = o.restart_full_s;
  in.restart_full_incr_s = o.restart_full_incr_s;
  in.mtbf_s = o.mtbf_s;
  in.interval_s = o.interval_s;
  auto p = ckpt::plan::plan_incrementals(in);
  if (!p.ok()) return fail(p.error(), msg, msg_len);
  ckpt_plan_incr_result r{};
  r.incrementals = p->incrementals;
  r.failure_probability = p->failure_probability;
  r.savings_s = p->savings_s;
  write_out(r, out);
  return 0;
}

extern "C" int ckpt_plan_migrate(const struct ckpt_plan_migrate_opts* opts,
                                 struct ckpt_plan_migrate_result* out, char* msg, size_t msg_len) {
  ckpt_plan_migrate_opts o;
  if (read_in(opts, o) || !out || out->size < sizeof(size_t)) return bad_struct(msg, msg_len);
  ckpt::plan::MigrateInput in;
  in.lead_s = o.lead_s;
  in.dirty_bytes_per_s = o.dirty_bytes_per_s;
  in.resident_bytes = o.resident_bytes;
  in.bandwidth_bytes_per_s = o.bandwidth_bytes_per_s;
  in.restart_s = o.restart_s;
  auto p = ckpt::plan::plan_migration(in);
  if (!p.ok()) return fail(p.error(), msg, msg_len);
  ckpt_plan_migrate_result r{};
  r.mode = p->mode == ckpt::plan::Mode::Live     ? CKPT_PLAN_LIVE
           : p->mode == ckpt::plan::Mode::Frozen ? CKPT_PLAN_FROZEN
                                                 : CKPT_PLAN_PAUSE;
  r.live_seconds = p->live_seconds;
  r.live_downtime_s = p->live_downtime_s;
  r.frozen_seconds = p->frozen_seconds;
  r.rounds = int(p->rounds.size());
  write_out(r, out);
  return 0;
}

extern "C" int ckpt_plan_spares(uint64_t nodes, int q, int r, int s, uint64_t* spares,
                                double* fraction, char* msg, size_t msg_len) {
  auto f = ckpt::plan::spare_fraction(double(nodes), q, r, s);
  if (!f.ok()) return fail(f.error(), msg, msg_len);
  if (fraction) *fraction = *f;
  if (spares) *spares = uint64_t(std::llround(*f * double(nodes)));
  return 0;
}

extern "C" int ckpt_plan_substitute(const struct ckpt_plan_mesh* mesh, const int* failed,
                                    size_t nfailed, int method, int* rank_nodes, size_t* nranks,
                                    char* msg, size_t msg_len) {
  ckpt_plan_mesh m;
  if (read_in(mesh, m) || !nranks || (nfailed && !failed)) return bad_struct(msg, msg_len);
  if (m.q < 1 || m.q > 8)
    return fail(ckpt::make_error(EINVAL, "the mesh needs 1 to 8 dimensions"), msg, msg_len);
  if (method < CKPT_PLAN_SLIDE_0D || method > CKPT_PLAN_SLIDE_HYBRID)
    return fail(ckpt::make_error(EINVAL, "unknown substitution method"), msg, msg_len);
  ckpt::plan::Mesh pm{std::vector<int>(m.dims, m.dims + m.q), m.spare_dims, m.thickness};
  auto map = ckpt::plan::RankMap::create(pm);
  if (!map.ok()) return fail(map.error(), msg, msg_len);
  const ckpt::plan::Slide how[] = {ckpt::plan::Slide::Zero, ckpt::plan::Slide::One,
                                   ckpt::plan::Slide::Q, ckpt::plan::Slide::Hybrid};
  for (size_t i = 0; i < nfailed; ++i) {
    ckpt::plan::Coords c(failed + i * size_t(m.q), failed + (i + 1) * size_t(m.q));
    auto s = map->fail(c, how[method]);
    if (!s.ok()) return fail(s.error(), msg, msg_len);
  }
  size_t room = *nranks;
  *nranks = map->ranks();
  if (room < map->ranks() || !rank_nodes)
    return fail(
        ckpt::make_error(ERANGE, "rank_nodes has room for " + std::to_string(room) +
                                     " ranks, the mesh has " + std::to_string(map->ranks())),
        msg, msg_len);
  for (uint64_t r = 0; r < map->ranks(); ++r) {
    ckpt::plan::Coords c = map->node_of(int64_t(r));
    std::copy(c.begin(), c.end(), rank_nodes + r * size_t(m.q));
  }
  return 0;
}
