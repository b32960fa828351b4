// jobgen: random jobs for checkpoint/restart tests, one per seed.
//   jobgen describe SEED         the job and the checkpoint plan, readable
//   jobgen plan SEED             the plan as shell assignments (jobgen.sh)
//   jobgen run SEED WORK READY   runs the job; WORK/finish lets it end;
//                                WORK/result holds what it computed
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "member.hpp"
#include "rng.hpp"
#include "spec.hpp"
#include "sys.hpp"

using namespace jobgen;

namespace {

int usage() {
  std::fprintf(stderr, "usage: jobgen describe|plan SEED | jobgen run SEED WORK READY\n");
  return 2;
}

void print_plan(const Job& job) {
  const Plan& p = job.plan;
  std::printf("PROCS=%zu\nREFUSAL=%d\nFULL_DELAY_MS=%d\nFULL_LIVE=%d\n", job.members.size(),
              job.expects_refusal() ? 1 : 0, p.full_delay_ms, p.full_live ? 1 : 0);
  std::string d, l;
  for (size_t i = 0; i < p.incr_delay_ms.size(); ++i) {
    d += (i ? " " : "") + std::to_string(p.incr_delay_ms[i]);
    l += (i ? " " : "") + std::to_string(p.incr_live[i] ? 1 : 0);
  }
  std::printf("INCR_DELAYS_MS=(%s)\nINCR_LIVE=(%s)\n", d.c_str(), l.c_str());
  std::printf("COMPRESS=%d\nKILL_DELAY_MS=%d\nKILL_BY_TOOL=%d\nRESTORE_GENERATION=%d\n",
              p.compress ? 1 : 0, p.kill_delay_ms, p.kill_by_tool ? 1 : 0, p.restore_generation);
  std::printf("TRACKER_PICK=%u\n", p.tracker_pick);
  // What a refusal of this job must say (an extended regular expression).
  std::string match;
  for (const Member& m : job.members) {
    const char* why = m.refusal == Refusal::kInFlight      ? "descriptors in flight"
                      : m.refusal == Refusal::kOutsidePeer ? "its peer is not in the job"
                                                           : nullptr;
    if (why && match.find(why) == std::string::npos)
      match += (match.empty() ? "" : "|") + std::string(why);
  }
  std::printf("REFUSAL_MATCH='%s'\n", match.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  char* end = nullptr;
  const uint64_t seed = std::strtoull(argv[2], &end, 10);
  if (!end || *end) return usage();
  static const Job job = draw(seed);
  self.job = &job;
  if (!std::strcmp(argv[1], "describe")) {
    std::fputs(describe(job).c_str(), stdout);
    return 0;
  }
  if (!std::strcmp(argv[1], "plan")) {
    print_plan(job);
    return 0;
  }
  if (std::strcmp(argv[1], "run") != 0 || argc != 5) return usage();
  self.work = argv[3];
  // Names outside the work directory (/dev/shm, abstract sockets) carry a
  // hash of its path: two runs at once never share one.
  uint64_t h = 0;
  for (const char* c = argv[3]; *c; ++c) h = mix(h, uint64_t(*c));
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(h));
  self.tag = tag;
  return run_root(argv[4]);
}
