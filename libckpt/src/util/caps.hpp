// The calling thread's effective capabilities.
#pragma once

namespace ckpt {

// Whether capability `cap` (CAP_*) is in the effective set.
bool has_effective_cap(int cap);

}  // namespace ckpt
