#include "util/caps.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ckpt {

bool has_effective_cap(int cap) {
  if (cap < 0 || cap >= 64) return false;
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  return d[cap / 32].effective & (1u << (cap % 32));
}

}  // namespace ckpt
