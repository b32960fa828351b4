// The sender's connection to cr_recv, shared by the single-process
// (migrate/sender) and the job (migrate/job_sender) paths.
#pragma once

#include <ckpt/migrate.hpp>
#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "migrate/protocol.hpp"
#include "util/fd.hpp"

namespace ckpt::migrate {

Result<UniqueFd> connect_to(const std::string& to, double timeout);
// Mutual challenge-response; returns the first generation number to use.
Result<uint64_t> sender_handshake(FrameWriter& w, FrameReader& r,
                                  const std::vector<uint8_t>& token);
// cr_migrate --tree: the job of opts.pid (migrate/job_sender.cpp).
Result<MigrateStats> migrate_job(const MigrateOptions& opts);

}  // namespace ckpt::migrate
