#include "proc/btf.hpp"

#include <cstring>

namespace ckpt::proc {

namespace {

enum Kind : uint32_t {
  kInt = 1,
  kPtr,
  kArray,
  kStruct,
  kUnion,
  kEnum,
  kFwd,
  kTypedef,
  kVolatile,
  kConst,
  kRestrict,
  kFunc,
  kFuncProto,
  kVar,
  kDatasec,
  kFloat,
  kDeclTag,
  kTypeTag,
  kEnum64
};

template <class T>
T get(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

Error bad(const std::string& why) {
  return make_error(EBADMSG, "kernel BTF: " + why);
}

}  // namespace

Result<Btf> Btf::parse(std::vector<uint8_t> blob) {
  Btf b;
  b.blob_ = std::move(blob);
  const auto& d = b.blob_;
  if (d.size() < 24 || get<uint16_t>(d, 0) != 0xeb9f) return bad("not BTF data");
  const uint32_t hdr = get<uint32_t>(d, 4), type_off = get<uint32_t>(d, 8),
                 type_len = get<uint32_t>(d, 12), str_off = get<uint32_t>(d, 16),
                 str_len = get<uint32_t>(d, 20);
  const uint64_t types_at = uint64_t(hdr) + type_off, types_end = types_at + type_len;
  b.str_at_ = size_t(hdr) + str_off;
  b.str_len_ = str_len;
  if (types_end > d.size() || b.str_at_ + uint64_t(str_len) > d.size() || str_len == 0)
    return bad("sections out of range");
  b.types_.push_back({0, 0, 0, 0});  // id 0: void
  for (size_t at = types_at; at < types_end;) {
    if (at + 12 > types_end) return bad("truncated type");
    Type t{get<uint32_t>(d, at), get<uint32_t>(d, at + 4), get<uint32_t>(d, at + 8), at + 12};
    size_t extra = 0;
    switch (b.kind(t)) {
      case kInt:
      case kVar:
      case kDeclTag:
        extra = 4;
        break;
      case kPtr:
      case kFwd:
      case kTypedef:
      case kVolatile:
      case kConst:
      case kRestrict:
      case kFunc:
      case kFloat:
      case kTypeTag:
        extra = 0;
        break;
      case kArray:
        extra = 12;
        break;
      case kStruct:
      case kUnion:
      case kDatasec:
      case kEnum64:
        extra = 12 * size_t(b.vlen(t));
        break;
      case kEnum:
      case kFuncProto:
        extra = 8 * size_t(b.vlen(t));
        break;
      default:
        return bad("unknown type kind " + std::to_string(b.kind(t)));
    }
    if (t.extra + extra > types_end) return bad("truncated type");
    b.types_.push_back(t);
    at = t.extra + extra;
  }
  return b;
}

const char* Btf::name(uint32_t off) const {
  if (off >= str_len_) return "";
  return reinterpret_cast<const char*>(blob_.data() + str_at_ + off);
}

Result<uint32_t> Btf::size_of(uint32_t id) const {
  for (int hops = 0; hops < 16 && id < types_.size(); ++hops) {
    const Type& t = types_[id];
    switch (kind(t)) {
      case kInt:
      case kStruct:
      case kUnion:
      case kEnum:
      case kEnum64:
      case kFloat:
        return t.size_or_type;
      case kPtr:
        return uint32_t(8);
      case kTypedef:
      case kVolatile:
      case kConst:
      case kRestrict:
      case kTypeTag:
        id = t.size_or_type;
        continue;
      default:
        return bad("no size for type " + std::to_string(id));
    }
  }
  return bad("type chain too long");
}

bool Btf::find_member(uint32_t id, const std::string& field, uint32_t base_bits, Field* out,
                      int depth) const {
  if (depth > 4 || id >= types_.size()) return false;
  const Type& t = types_[id];
  if (kind(t) != kStruct && kind(t) != kUnion) return false;
  const bool bitfields = t.info >> 31;
  for (uint32_t i = 0; i < vlen(t); ++i) {
    const size_t m = t.extra + 12 * size_t(i);
    const uint32_t m_name = get<uint32_t>(blob_, m), m_type = get<uint32_t>(blob_, m + 4),
                   m_off = get<uint32_t>(blob_, m + 8);
    const uint32_t bits = bitfields ? m_off & 0xffffff : m_off;
    if (bitfields && (m_off >> 24) != 0) continue;  // a bit field
    if (m_name == 0) {  // anonymous union or struct: its members are ours
      if (find_member(m_type, field, base_bits + bits, out, depth + 1)) return true;
      continue;
    }
    if (field != name(m_name) || (base_bits + bits) % 8 != 0) continue;
    auto size = size_of(m_type);
    if (!size.ok()) return false;
    *out = {(base_bits + bits) / 8, *size};
    return true;
  }
  return false;
}

Result<Btf::Field> Btf::field(const std::string& type, const std::string& field) const {
  for (uint32_t id = 1; id < types_.size(); ++id) {
    const Type& t = types_[id];
    if ((kind(t) != kStruct && kind(t) != kUnion) || type != name(t.name_off)) continue;
    Field f;
    if (find_member(id, field, 0, &f, 0)) return f;
  }
  return make_error(ENOENT, "kernel BTF: no field " + field + " in struct " + type);
}

Result<uint32_t> Btf::func_id(const std::string& fn) const {
  for (uint32_t id = 1; id < types_.size(); ++id)
    if (kind(types_[id]) == kFunc && fn == name(types_[id].name_off)) return id;
  return make_error(ENOENT, "kernel BTF: no function " + fn);
}

}  // namespace ckpt::proc
