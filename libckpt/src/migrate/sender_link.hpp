// The sender's connection to cr_recv, shared by the single-process
// (migrate/sender) and the job (migrate/job_sender) paths.
#pragma once

#include <ckpt/migrate.hpp>
#include <ckpt/result.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dump/precopy_rule.hpp"
#include "migrate/protocol.hpp"
#include "util/fd.hpp"

namespace ckpt::migrate {

Result<UniqueFd> connect_to(const std::string& to, double timeout);
// Mutual challenge-response; returns the first generation number to use,
// and in `features` what the receiver accepts (kFeature*).
Result<uint64_t> sender_handshake(FrameWriter& w, FrameReader& r, const std::vector<uint8_t>& token,
                                  uint32_t* features = nullptr);

// An authenticated connection to the receiver of opts.to.
struct SenderLink {
  explicit SenderLink(UniqueFd f) : fd(std::move(f)), w(fd.get()), r(fd.get()) {}
  UniqueFd fd;
  FrameWriter w;
  FrameReader r;
  uint64_t first_gen = 0;  // the receiver's first generation number
  uint32_t features = 0;   // kFeature* bits the receiver announced
};
// The pre-copy stop rule's limits, as the options set them.
inline dump::PrecopyLimits precopy_limits(const MigrateOptions& o) {
  dump::PrecopyLimits lim;
  lim.threshold_bytes = o.threshold_bytes;
  lim.diff_bytes = o.diff_bytes;
  lim.deadline_seconds = o.deadline_seconds;
  lim.max_rounds = o.max_rounds;
  return lim;
}
// Loads the token, connects and authenticates both ways.
Result<std::unique_ptr<SenderLink>> open_link(const MigrateOptions& opts);
// cr_migrate --tree: the job of opts.pid (migrate/job_sender.cpp).
Result<MigrateStats> migrate_job(const MigrateOptions& opts);

// A node agent's migration of its part of a job across nodes (nodes/move):
// the final generation is delivered and the part frozen (its connections
// to other nodes locked) when `before_commit` runs; an error from it
// releases the part untouched. `commit_failed`: the destination failed
// after COMMIT; called before the part is released.
struct JobMigrateHooks {
  std::function<Status(const std::string& gen_dir)> before_commit;
  std::function<void(const Error&)> commit_failed;
};
Result<MigrateStats> migrate_job(const MigrateOptions& opts, const JobMigrateHooks& hooks);

}  // namespace ckpt::migrate
