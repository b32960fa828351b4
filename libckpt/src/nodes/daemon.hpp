// cr_noded's loop: listen, one forked session per connection (agent.hpp),
// and the restored jobs kept as children (it is their subreaper) and reaped.
#pragma once

#include <ckpt/result.hpp>
#include <string>

#include "nodes/agent.hpp"

namespace ckpt::nodes {

struct DaemonOptions {
  std::string listen;  // ADDR:PORT ("*" for any address)
  std::string token_file;
  std::string dir;
  double timeout = 60;
};

// Runs until SIGTERM or SIGINT; says on stderr what each session did.
Status run_daemon(const DaemonOptions& opts);

}  // namespace ckpt::nodes
