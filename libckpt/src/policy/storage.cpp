// Checkpoint cost per storage level: the parallel file system shared through
// the switch's links, the node's own memory, a partner node's (docs/policy.md).
#include <ckpt/plan.hpp>

#include "policy/validate.hpp"

namespace ckpt::plan {

Result<StorageCosts> storage_costs(const StorageInput& in) {
  CKPT_TRY(need_positive("the memory per node", in.mem_per_node_bytes));
  CKPT_TRY(need_positive("the node count", in.nodes));
  CKPT_TRY(need_positive("the network bandwidth", in.network_bytes_per_s));
  CKPT_TRY(need_positive("the number of switch links", in.switch_links));
  CKPT_TRY(need_positive("the memory bandwidth", in.memory_bytes_per_s));
  CKPT_TRY(need_non_negative("the latency", in.latency_s));
  StorageCosts c;
  c.file_system_s = in.mem_per_node_bytes / in.network_bytes_per_s * (in.nodes / in.switch_links);
  c.local_s = in.mem_per_node_bytes / in.memory_bytes_per_s;
  // Written locally, then copied to the partner and written there.
  c.partner_s = 2 * (c.local_s + in.latency_s + in.mem_per_node_bytes / in.memory_bytes_per_s);
  return c;
}

}  // namespace ckpt::plan
