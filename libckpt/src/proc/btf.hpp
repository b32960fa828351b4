// Just enough of the kernel's BTF (/sys/kernel/btf/vmlinux, the type
// information of the running kernel) to find where a structure keeps a
// field and which BTF id a function has: what a BPF program written without
// a compiler needs to read kernel structures (dump/vma_flags).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::proc {

class Btf {
 public:
  // Parses `blob` (a BTF file's bytes); fails on anything it does not know.
  static Result<Btf> parse(std::vector<uint8_t> blob);

  // Byte offset and size of `field` in struct or union `type`, looked up through
  // anonymous unions and structs; fails when there is no such field or it
  // is a bit field.
  struct Field {
    uint32_t offset = 0, size = 0;
  };
  Result<Field> field(const std::string& type, const std::string& field) const;
  // The BTF id of function `name`.
  Result<uint32_t> func_id(const std::string& name) const;

 private:
  struct Type {
    uint32_t name_off, info, size_or_type;
    size_t extra;  // offset of the kind's extra data in blob_
  };
  uint32_t kind(const Type& t) const { return (t.info >> 24) & 0x1f; }
  uint32_t vlen(const Type& t) const { return t.info & 0xffff; }
  const char* name(uint32_t off) const;
  Result<uint32_t> size_of(uint32_t id) const;
  bool find_member(uint32_t id, const std::string& field, uint32_t base_bits, Field* out,
                   int depth) const;

  std::vector<uint8_t> blob_;
  size_t str_at_ = 0, str_len_ = 0;
  std::vector<Type> types_;  // index = BTF id (0: void)
};

}  // namespace ckpt::proc
