#include "restore/call_batch.hpp"

#include <algorithm>

namespace ckpt::restore {

size_t CallBatch::add(const char* what, const std::string& where, long nr, uint64_t a1, uint64_t a2,
                      uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6) {
  proc::RemoteSyscall::BatchCall c;
  c.nr = nr;
  c.a[0] = a1, c.a[1] = a2, c.a[2] = a3, c.a[3] = a4, c.a[4] = a5, c.a[5] = a6;
  calls_.push_back(c);
  names_.push_back({what, where, int(pools_.size()) - 1});
  return calls_.size() - 1;
}

size_t CallBatch::add_may_fail(long nr, uint64_t a1, uint64_t a2, uint64_t a3) {
  size_t i = add(nullptr, {}, nr, a1, a2, a3);
  calls_[i].may_fail = true;
  return i;
}

Result<uint64_t> CallBatch::add_string(const std::string& s) {
  const size_t len = s.size() + 1;
  if (len > area_.strings_len)
    return make_error(ENAMETOOLONG, "argument too long for the trampoline: " + s.substr(0, 64));
  if (pools_.back().size() + len > area_.strings_len) pools_.emplace_back();
  std::string& pool = pools_.back();
  const uint64_t addr = area_.strings + pool.size();
  pool.append(s.c_str(), len);
  return addr;
}

Status CallBatch::run() {
  int written = -1;  // the pool fill the tracee holds
  for (size_t first = 0; first < calls_.size();) {
    const int pool = names_[first].pool;
    size_t last = first;
    while (last < calls_.size() && last - first < area_.max_calls && names_[last].pool == pool)
      ++last;
    if (pool != written && !pools_[size_t(pool)].empty()) {
      const std::string& text = pools_[size_t(pool)];
      CKPT_TRY(proc::write_remote(pid_, area_.strings, text.data(), text.size()));
      written = pool;
    }
    std::vector<proc::RemoteSyscall::BatchCall> chunk(calls_.begin() + long(first),
                                                      calls_.begin() + long(last));
    CKPT_TRY(rs_.call_batch(area_.code, area_.table, &chunk));
    std::copy(chunk.begin(), chunk.end(), calls_.begin() + long(first));
    for (size_t i = first; i < last; ++i) {
      const long r = calls_[i].ret;
      if (calls_[i].may_fail || r == proc::RemoteSyscall::kNotRun || !proc::is_syscall_error(r))
        continue;
      Error e = sys_error(names_[i].what, int(-r));
      return names_[i].where.empty() ? e : e.context(names_[i].where);
    }
    first = last;
  }
  return {};
}

}  // namespace ckpt::restore
