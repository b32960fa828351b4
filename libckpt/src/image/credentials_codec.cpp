#include "image/credentials_codec.hpp"

namespace ckpt::image {

namespace {
constexpr uint32_t kMaxGroups = 65536;       // NGROUPS_MAX
constexpr uint32_t kMaxAffinityWords = 128;  // 8192 CPUs
}  // namespace

void encode_credentials(const TaskCredentials& c, ByteWriter& w) {
  w.i32(c.tid);
  w.u32(c.flags);
  for (uint32_t v : c.uid) w.u32(v);
  for (uint32_t v : c.gid) w.u32(v);
  w.u32(uint32_t(c.groups.size()));
  for (uint32_t g : c.groups) w.u32(g);
  for (uint64_t v :
       {c.cap_inheritable, c.cap_permitted, c.cap_effective, c.cap_bounding, c.cap_ambient})
    w.u64(v);
  w.u32(c.securebits);
  w.i32(c.sched_policy);
  w.i32(c.sched_priority);
  w.i32(c.nice);
  w.u32(uint32_t(c.affinity.size()));
  for (uint64_t v : c.affinity) w.u64(v);
}

bool decode_credentials(ByteReader& r, TaskCredentials* c) {
  if (!r.i32(&c->tid) || !r.u32(&c->flags)) return false;
  for (uint32_t& v : c->uid)
    if (!r.u32(&v)) return false;
  for (uint32_t& v : c->gid)
    if (!r.u32(&v)) return false;
  uint32_t n;
  if (!r.u32(&n) || n > kMaxGroups || n > r.left() / 4) return false;
  c->groups.resize(n);
  for (uint32_t& g : c->groups)
    if (!r.u32(&g)) return false;
  for (uint64_t* v : {&c->cap_inheritable, &c->cap_permitted, &c->cap_effective, &c->cap_bounding,
                      &c->cap_ambient})
    if (!r.u64(v)) return false;
  if (!r.u32(&c->securebits) || !r.i32(&c->sched_policy) || !r.i32(&c->sched_priority) ||
      !r.i32(&c->nice) || !r.u32(&n) || n > kMaxAffinityWords || n > r.left() / 8)
    return false;
  c->affinity.resize(n);
  for (uint64_t& v : c->affinity)
    if (!r.u64(&v)) return false;
  return true;  // later appended fields are skipped by this reader
}

}  // namespace ckpt::image
