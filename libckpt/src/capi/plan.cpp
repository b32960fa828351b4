// ckpt/plan.h: the C entry points over ckpt/plan.hpp, with ckpt.h's
// conventions for structs, messages and exceptions (capi/handle.hpp).
#include <ckpt/plan.h>

#include "capi/handle.hpp"

#include <algorithm>
#include <ckpt/plan.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using ckpt::capi::guarded;

// The cause, in `msg` (when given) and as the thread's ckpt_last_message().
int fail(const ckpt::Error& e, char* msg, size_t len) {
  if (msg && len) {
    size_t n = std::min(len - 1, e.message.size());
    std::memcpy(msg, e.message.data(), n);
    msg[n] = 0;
  }
  return ckpt::capi::fail(nullptr, e);
}

// Reads the caller's struct as ckpt.h's calls do (capi::read_opts: at
// least its size field, what this library does not know zero); a failure
// gives the cause in `msg` too.
template <class T>
int read_in(const T* in, T& out, const char* what, char* msg, size_t len) {
  if (!in) return fail(ckpt::make_error(EINVAL, std::string(what) + " is NULL"), msg, len);
  if (int rc = ckpt::capi::read_opts(nullptr, in, sizeof(size_t), out, what); rc != 0) {
    if (msg && len) {
      const std::string m = ckpt_last_message();
      fail(ckpt::make_error(-rc, m), msg, len);
    }
    return rc;
  }
  return 0;
}

using ckpt::capi::write_out;

int bad_out(const char* what, char* msg, size_t len) {
  return fail(ckpt::make_error(EINVAL, std::string(what) + " is NULL or its size is not set"), msg,
              len);
}

}  // namespace

extern "C" int ckpt_plan_interval(const struct ckpt_plan_interval_opts* opts,
                                  struct ckpt_plan_interval_result* out, char* msg,
                                  size_t msg_len) {
  return guarded(nullptr, "ckpt_plan_interval", [&]() -> int {
    ckpt_plan_interval_opts o;
    if (int rc = read_in(opts, o, "ckpt_plan_interval_opts", msg, msg_len)) return rc;
    if (!out || out->size < sizeof(size_t))
      return bad_out("ckpt_plan_interval_result", msg, msg_len);
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
  });
}

extern "C" int ckpt_plan_incrementals(const struct ckpt_plan_incr_opts* opts,
                                      struct ckpt_plan_incr_result* out, char* msg,
                                      size_t msg_len) {
  return guarded(nullptr, "ckpt_plan_incrementals", [&]() -> int {
    ckpt_plan_incr_opts o;
    if (int rc = read_in(opts, o, "ckpt_plan_incr_opts", msg, msg_len)) return rc;
    if (!out || out->size < sizeof(size_t)) return bad_out("ckpt_plan_incr_result", msg, msg_len);
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
  });
}

extern "C" int ckpt_plan_migrate(const struct ckpt_plan_migrate_opts* opts,
                                 struct ckpt_plan_migrate_result* out, char* msg, size_t msg_len) {
  return guarded(nullptr, "ckpt_plan_migrate", [&]() -> int {
    ckpt_plan_migrate_opts o;
    if (int rc = read_in(opts, o, "ckpt_plan_migrate_opts", msg, msg_len)) return rc;
    if (!out || out->size < sizeof(size_t))
      return bad_out("ckpt_plan_migrate_result", msg, msg_len);
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
  });
}

extern "C" int ckpt_plan_spares(uint64_t nodes, int q, int r, int s, uint64_t* spares,
                                double* fraction, char* msg, size_t msg_len) {
  return guarded(nullptr, "ckpt_plan_spares", [&]() -> int {
    auto f = ckpt::plan::spare_fraction(double(nodes), q, r, s);
    if (!f.ok()) return fail(f.error(), msg, msg_len);
    if (fraction) *fraction = *f;
    if (spares) *spares = uint64_t(std::llround(*f * double(nodes)));
    return 0;
  });
}

extern "C" int ckpt_plan_substitute(const struct ckpt_plan_mesh* mesh, const int* failed,
                                    size_t nfailed, int method, int* rank_nodes, size_t* nranks,
                                    char* msg, size_t msg_len) {
  return guarded(nullptr, "ckpt_plan_substitute", [&]() -> int {
    ckpt_plan_mesh m;
    if (int rc = read_in(mesh, m, "ckpt_plan_mesh", msg, msg_len)) return rc;
    if (!nranks || (nfailed && !failed)) return bad_out("nranks or failed", msg, msg_len);
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
  });
}
