// cr_plan's planners (libckpt/src/policy): every reference value of
// shared/policy.md, the exact E(T) against the literal formula and an
// independent root finder, Monte-Carlo runs of exponential failures against
// the predicted overhead, monotonicity, spare substitution invariants, the C
// API and the figures read from a real chain.
#include <gtest/gtest.h>

#include <ckpt/plan.h>

#include <chrono>
#include <ckpt/plan.hpp>
#include <cmath>
#include <random>
#include <set>

#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"

namespace plan = ckpt::plan;

namespace {

constexpr double kYear = 365 * 86400.0;

plan::IntervalInput fail_stop(double C, double R, double M, double p = 0) {
  plan::IntervalInput in;
  in.checkpoint_s = C;
  in.restart_s = R;
  in.mtbf_s = M;
  in.predicted = p;
  return in;
}

// ---- Reference values of policy.md ------------------------------------------

TEST(PolicyReference, PlatformMtbfShrinksWithNodes) {
  // 100 years per processor and 36,500 processors give 1 day.
  auto m = plan::platform_mtbf(100 * kYear, 36500);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NEAR(*m, 86400, 1e-6);
}

TEST(PolicyReference, PredictionStretchesTheInterval) {
  // C = 23 s, MTBF 1.25 h, p = 0.7: about 455 s -> about 831 s, roughly half the checkpoints.
  auto base = plan::plan_interval(fail_stop(23, 0, 1.25 * 3600));
  auto pred = plan::plan_interval(fail_stop(23, 0, 1.25 * 3600, 0.7));
  ASSERT_TRUE(base.ok() && pred.ok());
  EXPECT_EQ(std::lround(base->young_daly_period_s), 455);
  EXPECT_EQ(std::lround(pred->young_daly_period_s), 831);
  double ratio = base->young_daly_period_s / pred->young_daly_period_s;  // checkpoints, new/old
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.6);
}

TEST(PolicyReference, YoungDalyFormulas) {
  // T* = sqrt(2*M*C), H* = sqrt(2*lambda*C).
  auto p = plan::plan_interval(fail_stop(60, 30, 86400));
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->young_daly_period_s, std::sqrt(2 * 86400.0 * 60), 1e-9);
  EXPECT_NEAR(p->young_daly_overhead, std::sqrt(2 * 60 / 86400.0), 1e-12);
  EXPECT_NEAR(p->lambda, 1 / 86400.0, 1e-18);
}

TEST(PolicyReference, SilentErrorFormulas) {
  // Both kinds: T* = sqrt((V + C)/(lambda_s + lambda/2)), H* = 2*sqrt((lambda_s + lambda/2)(V +
  // C)).
  plan::IntervalInput in = fail_stop(50, 20, 86400);
  in.verify_s = 10;
  in.silent_mtbf_s = 2 * 86400;
  auto p = plan::plan_interval(in);
  ASSERT_TRUE(p.ok()) << p.error().message;
  double rate = 1 / (2 * 86400.0) + 1 / (2 * 86400.0);
  EXPECT_NEAR(p->young_daly_period_s, std::sqrt(60 / rate), 1e-9);
  EXPECT_NEAR(p->young_daly_overhead, 2 * std::sqrt(rate * 60), 1e-12);
  // Silent errors alone (fail-stop negligible): T* = sqrt((V + C)/lambda_s), H* = 2*sqrt(lambda_s(V
  // + C)).
  in.mtbf_s = 1e15;
  p = plan::plan_interval(in);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->young_daly_period_s, std::sqrt(60 * 2 * 86400.0), 1e-3);
  EXPECT_NEAR(p->young_daly_overhead, 2 * std::sqrt(60 / (2 * 86400.0)), 1e-9);
}

TEST(PolicyReference, IncrementalSavings) {
  // Incrementals saved 16.64 s per checkpoint, restart from full + incrementals
  // cost 1.17 s more: S_1 = 16.64 - 1.17 = 15.47 s; S_n = n*16.64 - the restart growth.
  double Of = 20.0, Oi = Of - 16.64, Rf = 4.0;
  EXPECT_NEAR(plan::savings(1, Of, Oi, Rf, Rf + 1.17), 15.47, 1e-9);
  EXPECT_NEAR(plan::savings(3, Of, Oi, Rf, Rf + 1.17), 3 * 16.64 - 1.17, 1e-9);
  EXPECT_NEAR(plan::savings(0, Of, Oi, Rf, Rf), 0, 1e-12);
}

TEST(PolicyReference, IncrementalsPerFull) {
  // m = ceil((1 - mu)*O_f/(P_i*delta) - 1): O_f 20, O_i 6 (mu 0.3), delta 1.3 s,
  // P_i 0.1: 14/0.13 - 1 = 106.69 -> 107.
  plan::IncrementalInput in{20, 6, 4, 5.3, 86400, 0};
  in.interval_s = -86400 * std::log(0.9);  // P_i = 1 - e^(-T/M) = 0.1
  auto p = plan::plan_incrementals(in);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NEAR(p->failure_probability, 0.1, 1e-12);
  EXPECT_NEAR(p->mu, 0.3, 1e-12);
  EXPECT_NEAR(p->delta_s, 1.3, 1e-12);
  EXPECT_EQ(p->incrementals, 107);
  EXPECT_NEAR(p->savings_s, 107 * 14 - 107 * 1.3, 1e-6);
  // Default interval: the Young/Daly period of a full.
  in.interval_s = 0;
  p = plan::plan_incrementals(in);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->interval_s, std::sqrt(2 * 20 * 86400.0), 1e-9);
  // Incrementals as dear as fulls: none. Free restarts: no limit.
  in.incremental_s = 25;
  EXPECT_EQ(plan::plan_incrementals(in)->incrementals, 0);
  in.incremental_s = 6;
  in.restart_full_incr_s = 4;
  EXPECT_EQ(plan::plan_incrementals(in)->incrementals, -1);
}

TEST(PolicyReference, SparesOf24Cubed) {
  // 24^3 nodes with 3D(2,1): 1128 spares, about 8.2 %.
  auto f = plan::spare_fraction(24 * 24 * 24, 3, 2, 1);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(std::llround(*f * 13824), 1128);
  EXPECT_NEAR(100 * *f, 8.2, 0.05);
  plan::Mesh m{{24, 24, 24}, 2, 1};
  EXPECT_EQ(plan::mesh_spares(m), 1128u);
  uint64_t spares = 0;
  double frac = 0;
  ASSERT_EQ(ckpt_plan_spares(13824, 3, 2, 1, &spares, &frac, nullptr, 0), 0);
  EXPECT_EQ(spares, 1128u);
}

TEST(PolicyReference, SpareFormulaMatchesTheCount) {
  // The closed formula against node-by-node counting, for many meshes.
  for (int n : {3, 5, 8})
    for (int q = 1; q <= 3; ++q)
      for (int r = 0; r <= q; ++r)
        for (int s = 1; s < n; ++s) {
          std::vector<int> dims(size_t(q), n);
          double nodes = std::pow(n, q);
          auto f = plan::spare_fraction(nodes, q, r, s);
          ASSERT_TRUE(f.ok());
          EXPECT_EQ(std::llround(*f * nodes), int64_t(plan::mesh_spares({dims, r, s})))
              << n << "^" << q << " r=" << r << " s=" << s;
        }
}

TEST(PolicyReference, CollisionBounds) {
  EXPECT_EQ(plan::worst_collisions(plan::Slide::Zero, 3, false), 7);  // 2F + 1
  EXPECT_EQ(plan::worst_collisions(plan::Slide::Zero, 6, false), 13);
  EXPECT_EQ(plan::worst_collisions(plan::Slide::Zero, 7, false), 16);  // 4(F - 3)
  EXPECT_EQ(plan::worst_collisions(plan::Slide::Zero, 7, true), 15);   // torus: 2F + 1
  EXPECT_EQ(plan::worst_collisions(plan::Slide::One, 3, false), 5);    // 2 + F
  EXPECT_EQ(plan::worst_collisions(plan::Slide::Q, 3, false), -1);     // none given
}

TEST(PolicyReference, BackMigration) {
  // remaining * (T_degraded - T_original)/T_original > T_migration
  auto yes = plan::plan_back_migration(1000, 1.2, 1.0, 150);
  ASSERT_TRUE(yes.ok());
  EXPECT_TRUE(yes->migrate_back);
  EXPECT_NEAR(yes->gain_s, 50, 1e-9);
  auto no = plan::plan_back_migration(1000, 1.2, 1.0, 250);
  ASSERT_TRUE(no.ok());
  EXPECT_FALSE(no->migrate_back);
  EXPECT_NEAR(no->gain_s, -50, 1e-9);
}

TEST(PolicyReference, StorageLevels) {
  // 0.5 us latency, 600 GB/s network, 12 switch links, 40 GB/s memory: 0.8/1.6 s
  // local, about 3.2/6.4 s partner, about 8.9/17.8 min to the file system for a
  // machine-sized job. policy.md does not give that job's node count; 120,000
  // nodes is the count both file-system figures imply (8.9 min * 60 * 12 /
  // (32 GB / 600 GB/s) = 120,150).
  for (auto [gb, local, partner, fs_min] :
       {std::tuple{32.0, 0.8, 3.2, 8.9}, std::tuple{64.0, 1.6, 6.4, 17.8}}) {
    plan::StorageInput in{gb * 1e9, 120000, 600e9, 12, 40e9, 0.5e-6};
    auto c = plan::storage_costs(in);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_NEAR(c->local_s, local, 1e-9);
    EXPECT_NEAR(c->partner_s, partner, 0.05);
    EXPECT_NEAR(c->file_system_s / 60, fs_min, 0.05);
  }
  EXPECT_FALSE(plan::storage_costs({32e9, 100, 0, 12, 40e9, 0}).ok());
}

// ---- The exact expected time -------------------------------------------------

TEST(PolicyExact, MatchesTheLiteralFormula) {
  // E(T) = T + C + (e^(lambda*T) - 1)*(E_lost + R), E_lost = 1/lambda - T/(e^(lambda*T) - 1).
  for (double T : {10.0, 300.0, 3000.0, 20000.0}) {
    plan::IntervalInput in = fail_stop(40, 25, 7200);
    double l = 1 / 7200.0, e = std::exp(l * T) - 1;
    double literal = T + 40 + e * ((1 / l - T / e) + 25);
    EXPECT_NEAR(plan::expected_period_time(in, T), literal, 1e-9 * literal) << T;
  }
}

// The optimum of E(T)/T for fail-stop errors solves e^x(x - 1) + 1 = C*lambda/(1 + lambda*R),
// x = lambda*T (the derivative's root): found here by bisection, not by the planner's search.
double exact_optimum(double C, double R, double M) {
  double l = 1 / M, target = C * l / (1 + l * R), lo = 0, hi = 50;
  for (int i = 0; i < 300; ++i) {
    double mid = (lo + hi) / 2;
    (std::exp(mid) * (mid - 1) + 1 < target ? lo : hi) = mid;
  }
  return (lo + hi) / 2 / l;
}

TEST(PolicyExact, NumericalMinimumIsTheTrueOne) {
  for (auto [C, R, M] : {std::tuple{23.0, 10.0, 4500.0},
                         {60.0, 60.0, 86400.0},
                         {600.0, 300.0, 3600.0},
                         {1.0, 0.0, 1e7}}) {
    auto p = plan::plan_interval(fail_stop(C, R, M));
    ASSERT_TRUE(p.ok());
    double t = exact_optimum(C, R, M);
    EXPECT_NEAR(p->exact_period_s, t, 1e-6 * t) << C << " " << R << " " << M;
    EXPECT_LE(p->exact_overhead, p->exact_overhead_at_young_daly + 1e-15);
  }
}

TEST(PolicyExact, SaysWhenFirstOrderIsOff) {
  auto small = plan::plan_interval(fail_stop(10, 10, 86400));
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->first_order_ok) << small->period_difference;
  EXPECT_TRUE(small->note.empty());
  auto large = plan::plan_interval(fail_stop(1800, 600, 3600));
  ASSERT_TRUE(large.ok());
  EXPECT_FALSE(large->first_order_ok);
  EXPECT_NE(large->note.find("first order is off"), std::string::npos);
}

TEST(PolicyExact, YoungDalyWithoutR) {
  // R unknown: the first order, which does not use R, and nothing computed with R.
  plan::IntervalInput in = fail_stop(23, 0, 4500);
  in.restart_known = false;
  auto p = plan::plan_interval(in);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NEAR(p->young_daly_period_s, std::sqrt(2 * 4500.0 * 23), 1e-9);
  EXPECT_NEAR(p->young_daly_overhead, std::sqrt(2 * 23 / 4500.0), 1e-12);
  EXPECT_FALSE(p->exact_computed);
  EXPECT_EQ(p->exact_period_s, 0);
  EXPECT_EQ(p->exact_overhead_at_young_daly, 0);
  EXPECT_NE(p->note.find("needs the restart time R"), std::string::npos) << p->note;
  // With R = 0 known, the exact optimum is computed.
  auto known = plan::plan_interval(fail_stop(23, 0, 4500));
  ASSERT_TRUE(known.ok());
  EXPECT_TRUE(known->exact_computed);
  EXPECT_GT(known->exact_period_s, 0);
  EXPECT_DOUBLE_EQ(known->young_daly_period_s, p->young_daly_period_s);
}

// ---- Monte Carlo -------------------------------------------------------------

// Runs `periods` periods of `T` s of work under exponential fail-stop errors
// (rate lambda, during work and verification) and silent errors (rate ls,
// during work, caught by the verification); returns the measured overhead.
double simulate(const plan::IntervalInput& in, double T, int periods, uint64_t seed) {
  std::mt19937_64 rng(seed);
  double lambda = (1 - in.predicted) / in.mtbf_s;
  double ls = in.silent_mtbf_s > 0 ? 1 / in.silent_mtbf_s : 0;
  std::exponential_distribution<double> fail(lambda);
  std::exponential_distribution<double> silent(ls > 0 ? ls : 1);
  double wall = 0, W = T + in.verify_s;
  for (int i = 0; i < periods; ++i) {
    for (;;) {
      double x = fail(rng);
      if (x < W) {  // fail-stop: the attempt up to the failure is lost
        wall += x + in.restart_s;
        continue;
      }
      wall += W;
      if (ls > 0 && silent(rng) < T) {  // corrupted: the verification sees it
        wall += in.restart_s;
        continue;
      }
      wall += in.checkpoint_s;
      break;
    }
  }
  return wall / (double(periods) * T) - 1;
}

TEST(PolicyMonteCarlo, SimulatedFailuresGiveThePredictedOverhead) {
  auto t0 = std::chrono::steady_clock::now();
  struct Case {
    plan::IntervalInput in;
    const char* what;
  };
  // A long restart and frequent silent errors, so each term of E(T) weighs.
  plan::IntervalInput silent = fail_stop(120, 600, 6 * 3600);
  silent.verify_s = 30;
  silent.silent_mtbf_s = 3 * 3600;
  plan::IntervalInput large = fail_stop(300, 120, 3600);  // first order is off here
  for (const Case& c :
       {Case{fail_stop(60, 30, 3600), "fail-stop"}, Case{fail_stop(23, 10, 4500, 0.7), "predicted"},
        Case{silent, "silent"}, Case{large, "large C"}}) {
    auto p = plan::plan_interval(c.in);
    ASSERT_TRUE(p.ok()) << p.error().message;
    for (double T : {p->exact_period_s, p->young_daly_period_s, 0.5 * p->exact_period_s}) {
      double sim = simulate(c.in, T, 200000, 42);
      double predicted = plan::overhead(c.in, T);
      EXPECT_NEAR(sim, predicted, 0.03 * predicted) << c.what << " T=" << T;
    }
    // The optimum beats periods twice as short or long in the simulation too.
    double at_opt = simulate(c.in, p->exact_period_s, 200000, 7);
    EXPECT_LT(at_opt, simulate(c.in, 0.5 * p->exact_period_s, 200000, 7)) << c.what;
    EXPECT_LT(at_opt, simulate(c.in, 2 * p->exact_period_s, 200000, 7)) << c.what;
  }
  // Small C against M: first order agrees with the simulation too.
  auto p = plan::plan_interval(fail_stop(10, 10, 86400));
  ASSERT_TRUE(p.ok());
  double sim = simulate(fail_stop(10, 10, 86400), p->young_daly_period_s, 200000, 3);
  EXPECT_NEAR(sim, p->young_daly_overhead, 0.03 * p->young_daly_overhead);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0);
}

// ---- Properties --------------------------------------------------------------

TEST(PolicyProperties, PeriodGrowsWithCostAndFallsWithFailureRate) {
  double prev_yd = 0, prev_exact = 0;
  for (double C = 1; C <= 1000; C *= 1.5) {
    auto p = plan::plan_interval(fail_stop(C, 30, 86400));
    ASSERT_TRUE(p.ok());
    EXPECT_GT(p->young_daly_period_s, prev_yd) << C;
    EXPECT_GT(p->exact_period_s, prev_exact) << C;
    prev_yd = p->young_daly_period_s;
    prev_exact = p->exact_period_s;
  }
  prev_yd = prev_exact = INFINITY;
  for (double M = 1e6; M >= 200; M /= 1.5) {  // failure rate 1/M grows
    auto p = plan::plan_interval(fail_stop(60, 30, M));
    ASSERT_TRUE(p.ok());
    EXPECT_LT(p->young_daly_period_s, prev_yd) << M;
    EXPECT_LT(p->exact_period_s, prev_exact) << M;
    prev_yd = p->young_daly_period_s;
    prev_exact = p->exact_period_s;
  }
  prev_exact = 0;
  for (double pr = 0; pr < 0.95; pr += 0.1) {  // predicting more failures lowers the rate
    auto p = plan::plan_interval(fail_stop(60, 30, 3600, pr));
    ASSERT_TRUE(p.ok());
    EXPECT_GT(p->exact_period_s, prev_exact) << pr;
    prev_exact = p->exact_period_s;
  }
}

TEST(PolicyProperties, NonsenseIsRefused) {
  auto bad = [](plan::IntervalInput in) {
    auto p = plan::plan_interval(in);
    EXPECT_FALSE(p.ok());
    if (!p.ok()) {
      EXPECT_EQ(p.error().code, EINVAL);
      EXPECT_EQ(p.error().message.find('\n'), std::string::npos);
    }
  };
  bad(fail_stop(-1, 0, 3600));
  bad(fail_stop(0, 0, 3600));
  bad(fail_stop(60, -5, 3600));
  bad(fail_stop(60, 0, 30));       // MTBF shorter than C
  bad(fail_stop(60, 0, 3600, 1));  // p >= 1
  bad(fail_stop(60, 0, 3600, -0.1));
  bad(fail_stop(NAN, 0, 3600));
  plan::IntervalInput v = fail_stop(60, 0, 3600);
  v.verify_s = 5;  // a verification without silent errors
  bad(v);
  EXPECT_FALSE(plan::platform_mtbf(86400, 0).ok());
  EXPECT_FALSE(plan::platform_mtbf(86400, 2.5).ok());
  EXPECT_FALSE(plan::plan_incrementals({10, 5, 1, 2, 5, 0}).ok());  // MTBF shorter than O_f
  EXPECT_FALSE(plan::plan_incrementals({10, -5, 1, 2, 3600, 0}).ok());
  EXPECT_FALSE(plan::plan_migration({10, 1e6, -1, 1e8, 1}).ok());
  EXPECT_FALSE(plan::plan_migration({10, 1e6, 1e9, 0, 1}).ok());
  EXPECT_FALSE(plan::plan_back_migration(100, 0, 1, 1).ok());
  EXPECT_FALSE(plan::spare_fraction(1000, 3, 4, 1).ok());
  EXPECT_FALSE(plan::spare_fraction(1001, 3, 2, 1).ok());  // not a cube
  EXPECT_FALSE(plan::spare_fraction(1000, 3, 2, 10).ok());
}

// ---- Migration ---------------------------------------------------------------

plan::MigrateInput one_gbe(double lead, double dirty) {
  plan::MigrateInput in;
  in.lead_s = lead;
  in.dirty_bytes_per_s = dirty;
  in.resident_bytes = double(1 << 30);
  in.bandwidth_bytes_per_s = 125e6;
  in.restart_s = 0.5;
  return in;
}

TEST(PolicyMigrate, LiveFrozenOrPause) {
  // 1 GiB over 1 GbE: frozen = 8.59 s + 0.5 s; live at 10 MB/s dirty adds
  // rounds of 86 MB, 6.9 MB, 0.55 MB (under the 1 MiB threshold: the last).
  auto live = plan::plan_migration(one_gbe(10, 10e6));
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->mode, plan::Mode::Live) << live->reason;
  ASSERT_EQ(live->rounds.size(), 4u);
  EXPECT_NEAR(live->rounds[1].bytes, 10e6 * (1 << 30) / 125e6, 1);
  EXPECT_EQ(live->stop_reason, "dirty set under the threshold");
  double copy = double(1 << 30) / 125e6;
  EXPECT_NEAR(live->frozen_seconds, copy + 0.5, 1e-9);
  double sum = 0;
  for (auto& r : live->rounds) sum += r.seconds;
  EXPECT_NEAR(live->live_seconds, sum + 0.5, 1e-9);
  EXPECT_NEAR(live->live_downtime_s, live->rounds.back().seconds + 0.5, 1e-12);
  EXPECT_LT(live->live_downtime_s, 0.51);

  auto frozen = plan::plan_migration(one_gbe(9.2, 10e6));  // live needs 9.84 s
  ASSERT_TRUE(frozen.ok());
  EXPECT_EQ(frozen->mode, plan::Mode::Frozen) << frozen->reason;
  auto pause = plan::plan_migration(one_gbe(5, 10e6));
  ASSERT_TRUE(pause.ok());
  EXPECT_EQ(pause->mode, plan::Mode::Pause) << pause->reason;

  // Written faster than the link: the dirty set stops shrinking and the last
  // round is as long as a frozen copy, so frozen wins even with time for live.
  auto hot = plan::plan_migration(one_gbe(100, 200e6));
  ASSERT_TRUE(hot.ok());
  EXPECT_EQ(hot->stop_reason, "dirty set no longer shrinks");
  EXPECT_EQ(hot->mode, plan::Mode::Frozen) << hot->reason;
}

TEST(PolicyMigrate, MoreDirtyMeansLongerLive) {
  // Up to half the bandwidth the threshold ends the pre-copy and rounds only
  // grow with the rate (beyond, the shrink rule and the deadline cut it short).
  double prev = 0;
  for (double d = 0; d <= 62.5e6; d += 2.5e6) {
    auto p = plan::plan_migration(one_gbe(100, d));
    ASSERT_TRUE(p.ok());
    EXPECT_GE(p->live_seconds, prev) << d;
    prev = p->live_seconds;
  }
}

// ---- Spare substitution ------------------------------------------------------

// Every rank on its own live node; returns the ranks' nodes.
void expect_valid(const plan::RankMap& m, const std::set<plan::Coords>& failed) {
  std::set<plan::Coords> used;
  for (uint64_t r = 0; r < m.ranks(); ++r) {
    plan::Coords c = m.node_of(int64_t(r));
    EXPECT_TRUE(used.insert(c).second) << "two ranks on one node";
    EXPECT_EQ(failed.count(c), 0u) << "a rank on a failed node";
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_GE(c[i], 0);
      EXPECT_LT(c[i], m.mesh().dims[i]);
    }
  }
}

TEST(PolicySpares, QdSlidesWholePlanes) {
  auto m = plan::RankMap::create({{6, 6}, 2, 1});  // 5x5 ranks, 11 spares
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ranks(), 25u);
  EXPECT_EQ(m->max_neighbour_hops(), 1);
  auto s = m->fail({2, 2}, plan::Slide::Q);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->method, "qD");
  EXPECT_EQ(s->moves.size(), 15u);  // planes x = 2, 3, 4 of 5 ranks each
  for (auto& mv : s->moves) {
    EXPECT_EQ(mv.to[s->dimension], mv.from[s->dimension] + 1);
    EXPECT_EQ(mv.to[1 - s->dimension], mv.from[1 - s->dimension]);
  }
  expect_valid(*m, {{2, 2}});
  EXPECT_EQ(m->max_neighbour_hops(), 2);  // +1 hop between the split planes
  // One more along the other dimension, then the spare planes are used up.
  auto s2 = m->fail({1, 1}, plan::Slide::Q);
  ASSERT_TRUE(s2.ok()) << s2.error().message;
  EXPECT_NE(s2->dimension, s->dimension);
  expect_valid(*m, {{2, 2}, {1, 1}});
  auto s3 = m->fail({0, 0}, plan::Slide::Q);
  EXPECT_FALSE(s3.ok());
  EXPECT_EQ(s3.error().code, ENOSPC);
  expect_valid(*m, {{2, 2}, {1, 1}});  // unchanged by the refusal
  // Hybrid falls back to 1D or 0D for the same node.
  auto s4 = m->fail({0, 0}, plan::Slide::Hybrid);
  ASSERT_TRUE(s4.ok()) << s4.error().message;
  EXPECT_NE(s4->method, "qD");
  expect_valid(*m, {{2, 2}, {1, 1}, {0, 0}});
}

TEST(PolicySpares, OneDSlidesTheLine) {
  auto m = plan::RankMap::create({{6, 6}, 2, 1});
  ASSERT_TRUE(m.ok());
  auto s = m->fail({2, 3}, plan::Slide::One);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->method, "1D");
  // Along x: (2,3) (3,3) (4,3) -> 3 moves; along y: (2,3) (2,4) -> 2 moves: y wins.
  EXPECT_EQ(s->dimension, 1);
  ASSERT_EQ(s->moves.size(), 2u);
  EXPECT_EQ(m->node_of(2 * 5 + 3), (plan::Coords{2, 4}));
  EXPECT_EQ(m->node_of(2 * 5 + 4), (plan::Coords{2, 5}));
  expect_valid(*m, {{2, 3}});
  EXPECT_EQ(m->max_neighbour_hops(), 2);
}

TEST(PolicySpares, ZeroDTakesTheNearestSpare) {
  auto m = plan::RankMap::create({{6, 6}, 2, 1});
  ASSERT_TRUE(m.ok());
  auto s = m->fail({4, 4}, plan::Slide::Zero);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->moves.size(), 1u);
  EXPECT_EQ(s->moves[0].rank, 24);
  EXPECT_EQ(s->moves[0].to, (plan::Coords{4, 5}));  // distance 1, lowest node number
  auto s2 = m->fail({0, 0}, plan::Slide::Zero);
  ASSERT_TRUE(s2.ok());
  auto& to = s2->moves[0].to;
  EXPECT_EQ(std::abs(to[0]) + std::abs(to[1]), 5);  // nearest spares are 5 away
  EXPECT_GE(m->max_neighbour_hops(), 5);
  // A failed spare holds no rank: nothing moves.
  auto s3 = m->fail({5, 5}, plan::Slide::Zero);
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->method, "none");
  // No spares at all: refused.
  auto none = plan::RankMap::create({{4, 4}, 0, 1});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->fail({1, 1}, plan::Slide::Hybrid).ok());
}

TEST(PolicySpares, RandomFailuresKeepTheMapValid) {
  std::mt19937 rng(11);
  for (auto how : {plan::Slide::Zero, plan::Slide::One, plan::Slide::Q, plan::Slide::Hybrid}) {
    auto m = plan::RankMap::create({{7, 6, 5}, 2, 2});
    ASSERT_TRUE(m.ok());
    std::set<plan::Coords> failed;
    int placed = 0;
    for (int i = 0; i < 200; ++i) {
      plan::Coords c{int(rng() % 7), int(rng() % 6), int(rng() % 5)};
      if (failed.count(c)) continue;
      auto s = m->fail(c, how);
      if (!s.ok()) {
        EXPECT_EQ(s.error().code, ENOSPC);
        continue;
      }
      failed.insert(c);
      placed += s->method != "none";
      expect_valid(*m, failed);
    }
    EXPECT_GT(placed, 1) << plan::slide_name(how);
  }
}

// ---- C API -------------------------------------------------------------------

TEST(PolicyCApi, IntervalAndVersionedStructs) {
  ckpt_plan_interval_opts o{};
  o.size = sizeof o;
  o.checkpoint_s = 23;
  o.mtbf_s = 4500;
  o.predicted = 0.7;
  ckpt_plan_interval_result out{};
  out.size = sizeof out;
  ASSERT_EQ(ckpt_plan_interval(&o, &out, nullptr, 0), 0);
  EXPECT_EQ(std::lround(out.young_daly_period_s), 831);
  // A caller built before `predicted` existed: it reads as 0.
  o.size = offsetof(ckpt_plan_interval_opts, predicted);
  ASSERT_EQ(ckpt_plan_interval(&o, &out, nullptr, 0), 0);
  EXPECT_EQ(std::lround(out.young_daly_period_s), 455);
  // An older, shorter output struct: nothing written past its size.
  struct {
    ckpt_plan_interval_result head;
    double guard;
  } small{};
  small.head.size = offsetof(ckpt_plan_interval_result, exact_period_s);
  small.head.exact_period_s = -1;
  small.guard = -2;
  o.size = sizeof o;
  ASSERT_EQ(ckpt_plan_interval(&o, &small.head, nullptr, 0), 0);
  EXPECT_EQ(small.head.exact_period_s, -1);
  EXPECT_EQ(small.guard, -2);
  EXPECT_EQ(std::lround(small.head.young_daly_period_s), 831);
  // Nonsense: -EINVAL with a one-line cause.
  char msg[128];
  o.predicted = 1;
  EXPECT_EQ(ckpt_plan_interval(&o, &out, msg, sizeof msg), -EINVAL);
  EXPECT_NE(std::string(msg).find("predicted"), std::string::npos) << msg;
  o.size = 0;
  EXPECT_EQ(ckpt_plan_interval(&o, &out, msg, sizeof msg), -EINVAL);
}

TEST(PolicyCApi, IncrementalsAndMigrate) {
  ckpt_plan_incr_opts o{sizeof(ckpt_plan_incr_opts), 20, 6, 4, 5.3, 86400, -86400 * std::log(0.9)};
  ckpt_plan_incr_result out{sizeof(ckpt_plan_incr_result), 0, 0, 0};
  ASSERT_EQ(ckpt_plan_incrementals(&o, &out, nullptr, 0), 0);
  EXPECT_EQ(out.incrementals, 107);
  ckpt_plan_migrate_opts mo{sizeof mo, 10, 10e6, double(1 << 30), 125e6, 0.5};
  ckpt_plan_migrate_result mout{};
  mout.size = sizeof mout;
  ASSERT_EQ(ckpt_plan_migrate(&mo, &mout, nullptr, 0), 0);
  EXPECT_EQ(mout.mode, CKPT_PLAN_LIVE);
  EXPECT_EQ(mout.rounds, 4);
  mo.lead_s = 5;
  ASSERT_EQ(ckpt_plan_migrate(&mo, &mout, nullptr, 0), 0);
  EXPECT_EQ(mout.mode, CKPT_PLAN_PAUSE);
  mo.bandwidth_bytes_per_s = -1;
  EXPECT_EQ(ckpt_plan_migrate(&mo, &mout, nullptr, 0), -EINVAL);
}

// ---- Figures of a real chain -------------------------------------------------

struct GenPlan {
  uint64_t pages;
  int64_t at_ns;
};

// Writes generations 1..n of one process into `dir` (64-page mapping; gen g
// holds gens[g-1].pages pages, created at gens[g-1].at_ns).
void write_chain(const std::string& dir, const std::array<uint8_t, 16>& chain, int32_t pid,
                 const std::vector<GenPlan>& gens) {
  using namespace ckpt::image;
  const uint64_t base = 0x10000000, npages = 64;
  ckpt::testing::AlignedBytes pages(npages * kPageSize);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = uint8_t(i * 7 + 1);
  uint64_t parent_digest = 0;  // each generation is linked to its parent (format 2)
  for (uint64_t g = 1; g <= gens.size(); ++g) {
    auto w = SnapshotWriter::create(dir, g, chain);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->add_pages(base, pages.data(), gens[g - 1].pages).ok());
    ImageMeta m = ckpt::testing::make_meta(g, chain);
    m.process.pid = pid;
    m.created_unix_ns = gens[g - 1].at_ns;
    VmaRecord v;
    v.start = base;
    v.end = base + npages * kPageSize;
    v.prot = 3;
    m.vmas = {v};
    if (g > 1) m.complete.clear();
    if (g > 1) m.link.parent_digest = parent_digest;
    auto st = (*w)->commit(m);
    ASSERT_TRUE(st.ok()) << st.error().message;
    parent_digest = (*w)->meta_digest();
  }
}

// gen 1: 64 pages; gen 2 (3 s later): 8 pages; gen 3 (another 5 s): 24 pages.
const std::vector<GenPlan> kRootGens = {
    {64, 1'000'000'000'000}, {8, 1'003'000'000'000}, {24, 1'008'000'000'000}};

TEST(PolicyChain, FiguresFromAChain) {
  using ckpt::image::kPageSize;
  ckpt::testing::TempDir tmp;
  write_chain(tmp.path(), ckpt::testing::make_chain_id(5), 424242, kRootGens);
  auto f = plan::chain_figures(tmp.path());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->generations, 3u);
  EXPECT_EQ(f->incrementals, 2u);
  EXPECT_EQ(f->full_pages, 64u);
  EXPECT_EQ(f->full_content_bytes, 64 * kPageSize);
  EXPECT_EQ(f->resident_bytes, 64 * kPageSize);
  EXPECT_DOUBLE_EQ(f->mean_incremental_pages, 16);
  EXPECT_DOUBLE_EQ(f->mean_interval_s, 4);
  EXPECT_DOUBLE_EQ(f->dirty_pages_per_s, 32.0 / 8);
  EXPECT_DOUBLE_EQ(f->dirty_bytes_per_s, 4.0 * kPageSize);
  EXPECT_FALSE(plan::chain_figures(tmp.path() + "/missing").ok());
}

TEST(PolicyChain, AJobAddsUpItsMembers) {
  // The root as above and a second member (member-5000/ in each generation)
  // with 32, 4 and 12 pages at the same times: sizes and rates add up.
  using namespace ckpt::image;
  ckpt::testing::TempDir tmp, other;
  auto chain = ckpt::testing::make_chain_id(6);
  write_chain(tmp.path(), chain, 424242, kRootGens);
  write_chain(other.path(), chain, 5000,
              {{32, 1'000'000'000'000}, {4, 1'003'000'000'000}, {12, 1'008'000'000'000}});
  for (uint64_t g = 1; g <= 3; ++g) {
    std::string gen = generation_dir(tmp.path(), g);
    ASSERT_EQ(
        ::rename(generation_dir(other.path(), g).c_str(), member_dir(gen, 5000, 424242).c_str()),
        0);
    JobMeta job;
    job.generation = g;
    job.chain_id = chain;
    JobMember root, child;
    root.pid = root.pgid = root.sid = 424242;
    root.ppid = 1;
    child.pid = 5000;
    child.ppid = child.pgid = child.sid = 424242;
    job.members = {root, child};
    ASSERT_TRUE(write_job_file(gen, job).ok());
  }
  auto f = plan::chain_figures(tmp.path());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->generations, 3u);
  EXPECT_EQ(f->full_pages, 96u);
  EXPECT_EQ(f->resident_bytes, 96 * kPageSize);
  EXPECT_DOUBLE_EQ(f->mean_incremental_pages, 16 + 8);
  EXPECT_DOUBLE_EQ(f->mean_interval_s, 4);
  EXPECT_DOUBLE_EQ(f->dirty_pages_per_s, 32.0 / 8 + 16.0 / 8);
  // A member missing from a generation is an error, not a smaller figure.
  std::string gone = member_dir(generation_dir(tmp.path(), 3), 5000, 424242);
  ASSERT_EQ(::rename(gone.c_str(), (gone + ".x").c_str()), 0);
  auto broken = plan::chain_figures(tmp.path());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("process 5000"), std::string::npos)
      << broken.error().message;
}

}  // namespace

// ---- Multi-level checkpoints -------------------------------------------------

namespace {

plan::LevelsInput three_levels(double c0, double c1, double c2, double mtbf) {
  plan::LevelsInput in;
  in.checkpoint_s[0] = in.restart_s[0] = c0;
  in.checkpoint_s[1] = in.restart_s[1] = c1;
  in.checkpoint_s[2] = in.restart_s[2] = c2;
  in.mtbf_s = mtbf;
  return in;
}

// Runs `segments` segments of T s of work, each followed by a checkpoint
// that reaches level 2 every n1*n2-th time, level 1 every n1-th, else level
// 0; failures (rate 1/MTBF, during work, checkpoints and restarts) of a
// class drawn from the shares roll back to the newest checkpoint of that
// level or above, and take the lower levels' copies with them. Returns the
// measured waste: 1 - work / wall time.
double simulate_levels(const plan::LevelsInput& in, double T, uint64_t n1, uint64_t n2,
                       uint64_t segments, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> next_failure(1 / in.mtbf_s);
  std::discrete_distribution<int> cls({in.share[0], in.share[1], in.share[2]});
  double wall = 0, until_failure = next_failure(rng);
  uint64_t done = 0, saved[3] = {0, 0, 0};
  // Spends `d` s; false if a failure struck first (the time until it is spent).
  auto spend = [&](double d) {
    if (until_failure < d) {
      wall += until_failure;
      until_failure = next_failure(rng);
      return false;
    }
    until_failure -= d;
    wall += d;
    return true;
  };
  while (done < segments) {
    bool ok = spend(T);
    int level = 0;
    if (ok) {
      const uint64_t k = done + 1;
      level = k % (n1 * n2) == 0 ? 2 : k % n1 == 0 ? 1 : 0;
      ok = spend(in.checkpoint_s[level]);
    }
    if (ok) {
      ++done;
      for (int i = 0; i <= level; ++i) saved[i] = done;
      continue;
    }
    for (;;) {  // a failure: restart from the newest copy that survived it
      const int c = cls(rng);
      for (int i = 0; i < c; ++i) saved[i] = saved[c];
      done = saved[c];
      if (spend(in.restart_s[c])) break;
    }
  }
  return 1 - double(segments) * T / wall;
}

}  // namespace

TEST(PolicyLevels, WorkedExampleByHand) {
  // C = R = 2, 8, 60 s; MTBF 6 h; policy.md's mix 13.8 / 78.4 / 7.8 %.
  const plan::LevelsInput in = three_levels(2, 8, 60, 21600);
  // n1 = 3, n2 = 4, T = 300 s: A = ((12 - 4) 2 + 3 * 8 + 60) / 12 = 8.3333,
  // B = (0.138 + 0.784 * 3 + 0.078 * 12) / 43200 = 7.9306e-5,
  // restarts = (0.138 * 2 + 0.784 * 8 + 0.078 * 60) / 21600 = 5.1981e-4:
  // waste = 8.3333 / 300 + 7.9306e-5 * 300 + 5.1981e-4 = 0.052089.
  EXPECT_NEAR(plan::levels_waste(in, 300, 3, 4), 0.052089, 2e-6);
  auto p = plan::plan_levels(in);
  ASSERT_TRUE(p.ok()) << p.error().message;
  // Everything on the shared level: sqrt(2 * 60 / 21600) + 60 / 21600.
  EXPECT_NEAR(p->single_waste, 0.077314, 2e-6);
  EXPECT_NEAR(p->single_period_s, std::sqrt(2 * 60 * 21600.0), 1e-6);
  // The optimum: T = sqrt(A/B) for its n1, n2, and no schedule of a grid
  // around it does better.
  const uint64_t n1 = p->per_next[0], n2 = p->per_next[1];
  EXPECT_NEAR(p->waste, plan::levels_waste(in, p->period_s[0], n1, n2), 1e-12);
  EXPECT_DOUBLE_EQ(p->period_s[1], p->period_s[0] * double(n1));
  EXPECT_DOUBLE_EQ(p->period_s[2], p->period_s[0] * double(n1 * n2));
  for (uint64_t a = 1; a <= 40; ++a)
    for (uint64_t b = 1; b <= 40; ++b)
      for (double f : {0.5, 0.8, 1.0, 1.25, 2.0})
        EXPECT_LE(p->waste, plan::levels_waste(in, f * p->period_s[0], a, b) + 1e-12);
  // Three levels beat one here by far: most failures need only a partner.
  EXPECT_LT(p->waste, 0.6 * p->single_waste);
}

TEST(PolicyLevels, SimulatedFailuresGiveThePredictedWaste) {
  const plan::LevelsInput in = three_levels(2, 8, 60, 21600);
  auto p = plan::plan_levels(in);
  ASSERT_TRUE(p.ok());
  const uint64_t n1 = p->per_next[0], n2 = p->per_next[1];
  const double sim = simulate_levels(in, p->period_s[0], n1, n2, 400000, 11);
  EXPECT_NEAR(sim, p->waste, 0.05 * p->waste);
  // The plan beats a shared-level checkpoint every time in the simulation,
  // and schedules with other ratios or periods.
  EXPECT_LT(sim, simulate_levels(in, p->single_period_s, 1, 1, 400000, 12) * 0.7);
  EXPECT_LT(sim, simulate_levels(in, p->period_s[0], n1 + 2, n2, 400000, 13));
  EXPECT_LT(sim, simulate_levels(in, 2 * p->period_s[0], n1, n2, 400000, 14));
  EXPECT_LT(sim, simulate_levels(in, p->period_s[0], n1, n2 * 3, 400000, 15));
}

TEST(PolicyLevels, NonsenseIsRefused) {
  plan::LevelsInput in = three_levels(2, 8, 60, 21600);
  in.share[2] = 0.5;  // shares add up to 1.422
  auto p = plan::plan_levels(in);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, EINVAL);
  EXPECT_NE(p.error().message.find("add up to 1"), std::string::npos);
  in = three_levels(2, 0, 60, 21600);
  EXPECT_FALSE(plan::plan_levels(in).ok());
  in = three_levels(2, 8, 60, -1);
  EXPECT_FALSE(plan::plan_levels(in).ok());
}
