#include "dump/vma_flags.hpp"

#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dirty/self_test_record.hpp"
#include "image/model.hpp"
#include "proc/btf.hpp"
#include "util/caps.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

namespace {

// Each advice the image keeps: the madvise() that sets it and the VMA flag
// that shows it (include/linux/mm.h; self_test() checks every one before use).
struct AdviceFlag {
  int madvise;
  uint64_t vm_flag;
  uint32_t advice;  // image::kAdv*
};
constexpr AdviceFlag kAdviceFlags[] = {
    {MADV_SEQUENTIAL, 1ull << 15, image::kAdvSequential},
    {MADV_RANDOM, 1ull << 16, image::kAdvRandom},
    {MADV_DONTFORK, 1ull << 17, image::kAdvDontFork},
    {MADV_WIPEONFORK, 1ull << 25, image::kAdvWipeOnFork},
    {MADV_DONTDUMP, 1ull << 26, image::kAdvDontDump},
    {MADV_HUGEPAGE, 1ull << 29, image::kAdvHugePage},
    {MADV_NOHUGEPAGE, 1ull << 30, image::kAdvNoHugePage},
    {MADV_MERGEABLE, 1ull << 31, image::kAdvMergeable},
};
constexpr uint64_t all_advice_flags() {
  uint64_t all = 0;
  for (const AdviceFlag& a : kAdviceFlags) all |= a.vm_flag;
  return all;
}

long bpf(int cmd, bpf_attr* attr) {
  return ::syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

// Where the program reads: vm_area_struct's vm_start and vm_flags, and the
// BTF id of the task_vma iterator it attaches to.
struct Layout {
  uint32_t vm_start = 0, vm_flags = 0, iter_func = 0;
};

Result<Layout> layout_from_btf() {
  CKPT_ASSIGN(std::string raw, read_file("/sys/kernel/btf/vmlinux"));
  CKPT_ASSIGN(proc::Btf btf, proc::Btf::parse(std::vector<uint8_t>(raw.begin(), raw.end())));
  CKPT_ASSIGN(auto start, btf.field("vm_area_struct", "vm_start"));
  CKPT_ASSIGN(auto flags, btf.field("vm_area_struct", "vm_flags"));
  CKPT_ASSIGN(uint32_t fn, btf.func_id("bpf_iter_task_vma"));
  // Before Linux 6.1 a task iterator takes no PID and silently walks every
  // process: its link parameters then have no "task" member.
  if (!btf.field("bpf_iter_link_info", "task").ok())
    return make_error(ENOTSUP, "task iterators bound to one process need Linux 6.1");
  if (start.size != 8 || flags.size != 8)
    return make_error(ENOTSUP, "kernel BTF: unexpected vm_area_struct field sizes");
  return Layout{start.offset, flags.offset, fn};
}

// Parsing the kernel's BTF (5 MB) takes 10-25 ms: once per boot.
Result<Layout> layout() {
  if (auto rec = dirty::boot_record("vma-flags-layout")) {
    Layout l;
    if (std::sscanf(rec->c_str(), "%u %u %u", &l.vm_start, &l.vm_flags, &l.iter_func) == 3)
      return l;
  }
  CKPT_ASSIGN(Layout l, layout_from_btf());
  dirty::write_boot_record("vma-flags-layout", std::to_string(l.vm_start) + " " +
                                                   std::to_string(l.vm_flags) + " " +
                                                   std::to_string(l.iter_func) + "\n");
  return l;
}

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// For each VMA: bpf_seq_write({vma->vm_start, vma->vm_flags}). The context
// is struct bpf_iter__task_vma {meta; task; vma;}, meta->seq at offset 0.
std::vector<bpf_insn> program(const Layout& l) {
  const uint8_t ldx = BPF_LDX | BPF_MEM | BPF_DW, stx = BPF_STX | BPF_MEM | BPF_DW;
  return {
      insn(ldx, 6, 1, 16, 0),                          // r6 = ctx->vma
      insn(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 10, 0),    // no VMA: done
      insn(ldx, 7, 1, 0, 0),                           // r7 = ctx->meta
      insn(ldx, 2, 6, int16_t(l.vm_start), 0),         // r2 = vma->vm_start
      insn(stx, 10, 2, -16, 0),                        // rec[0]
      insn(ldx, 2, 6, int16_t(l.vm_flags), 0),         // r2 = vma->vm_flags
      insn(stx, 10, 2, -8, 0),                         // rec[1]
      insn(ldx, 1, 7, 0, 0),                           // r1 = meta->seq
      insn(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),  // r2 = rec
      insn(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -16),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 16),  // r3 = sizeof rec
      insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_seq_write),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),  // return 0
      insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
}

Result<UniqueFd> load_program(const Layout& l) {
  if (l.vm_start > 0x7fff || l.vm_flags > 0x7fff)
    return make_error(ENOTSUP, "vm_area_struct fields beyond a BPF load offset");
  const std::vector<bpf_insn> code = program(l);
  static const char kLicense[] = "GPL";  // bpf_seq_write is GPL-only
  bpf_attr a{};
  a.prog_type = BPF_PROG_TYPE_TRACING;
  a.expected_attach_type = BPF_TRACE_ITER;
  a.attach_btf_id = l.iter_func;
  a.insns = reinterpret_cast<uint64_t>(code.data());
  a.insn_cnt = uint32_t(code.size());
  a.license = reinterpret_cast<uint64_t>(kLicense);
  std::strncpy(a.prog_name, "ckpt_vma_flags", sizeof a.prog_name - 1);
  int fd = int(bpf(BPF_PROG_LOAD, &a));
  if (fd < 0) return sys_error("loading the VMA-flags BPF program");
  return UniqueFd(fd);
}

Result<std::vector<VmaFlags>> iterate(int prog, pid_t pid) {
  bpf_iter_link_info info{};
  info.task.pid = uint32_t(pid);
  bpf_attr a{};
  a.link_create.prog_fd = uint32_t(prog);
  a.link_create.attach_type = BPF_TRACE_ITER;
  a.link_create.iter_info = reinterpret_cast<uint64_t>(&info);
  a.link_create.iter_info_len = sizeof info;
  UniqueFd link(int(bpf(BPF_LINK_CREATE, &a)));
  if (!link.valid()) return sys_error("attaching the VMA-flags iterator to " + std::to_string(pid));
  bpf_attr c{};
  c.iter_create.link_fd = uint32_t(link.get());
  UniqueFd it(int(bpf(BPF_ITER_CREATE, &c)));
  if (!it.valid()) return sys_error("starting the VMA-flags iterator");
  std::vector<VmaFlags> out;
  std::vector<uint8_t> buf(64 << 10);
  size_t have = 0;
  for (;;) {
    ssize_t n = ::read(it.get(), buf.data() + have, buf.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("reading the VMA-flags iterator");
    if (n == 0) break;
    have += size_t(n);
    size_t whole = have / sizeof(VmaFlags) * sizeof(VmaFlags);
    for (size_t at = 0; at < whole; at += sizeof(VmaFlags)) {
      VmaFlags v;
      std::memcpy(&v, buf.data() + at, sizeof v);
      out.push_back(v);
    }
    std::memmove(buf.data(), buf.data() + whole, have - whole);
    have -= whole;
  }
  return out;
}

// The flag bits above, as this kernel sets them: one piece of our own
// memory per advice, read back through the program.
Status self_test(int prog) {
  constexpr size_t kPage = 4096;
  constexpr size_t kN = sizeof kAdviceFlags / sizeof *kAdviceFlags;
  // Pieces with a page between them that keeps no advice, so none merge.
  const size_t len = 2 * kN * kPage;
  auto* mem = static_cast<uint8_t*>(
      ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return sys_error("self-test mmap");
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { ::munmap(p, n); }
  } unmap{mem, len};
  bool applied[kN];
  for (size_t i = 0; i < kN; ++i)  // THP or KSM may be missing: EINVAL
    applied[i] = ::madvise(mem + 2 * i * kPage, kPage, kAdviceFlags[i].madvise) == 0;
  CKPT_ASSIGN(auto vmas, iterate(prog, ::getpid()));
  auto flags_at = [&](const uint8_t* p) -> std::optional<uint64_t> {
    for (const VmaFlags& v : vmas)
      if (v.start == reinterpret_cast<uint64_t>(p)) return v.flags;
    return std::nullopt;
  };
  for (size_t i = 0; i < kN; ++i) {
    if (!applied[i]) continue;
    auto f = flags_at(mem + 2 * i * kPage);
    if (!f || (*f & all_advice_flags()) != kAdviceFlags[i].vm_flag)
      return make_error(ENOTSUP, "self-test: madvise " + std::to_string(kAdviceFlags[i].madvise) +
                                     " does not show as the expected VMA flag");
  }
  auto plain = flags_at(mem + kPage);
  if (!plain || (*plain & all_advice_flags()) != 0)
    return make_error(ENOTSUP, "self-test: a VMA without advice shows advice flags");
  return {};
}

// Asked before the kernel's BTF is read. CAP_BPF and CAP_PERFMON (Linux
// 5.8) by number: older headers lack the names.
bool may_load_bpf() {
  constexpr int kCapPerfmon = 38, kCapBpf = 39;
  return ::geteuid() == 0 || (has_effective_cap(kCapBpf) && has_effective_cap(kCapPerfmon));
}

struct Program {
  UniqueFd fd;
  std::string why_not;  // set: not available
};

// Loaded and tested once per tool run (a failure too: it would fail again).
const Program& the_program() {
  static Program p;
  static std::once_flag once;
  std::call_once(once, [] {
    if (!may_load_bpf()) {
      p.why_not = "loading BPF programs needs root, or CAP_BPF and CAP_PERFMON";
      return;
    }
    auto l = layout();
    if (!l.ok()) {
      p.why_not = l.error().message;
      return;
    }
    auto fd = load_program(*l);
    if (!fd.ok()) {
      p.why_not = fd.error().message;
      return;
    }
    if (Status st = self_test(fd->get()); !st.ok()) {
      p.why_not = st.error().message;
      return;
    }
    p.fd = std::move(*fd);
  });
  return p;
}

}  // namespace

bool vma_flags_available(std::string* why) {
  const Program& p = the_program();
  if (why) *why = p.why_not;
  return p.fd.valid();
}

std::optional<std::vector<VmaFlags>> read_vma_flags(pid_t pid, std::string* why) {
  const Program& p = the_program();
  if (!p.fd.valid()) {
    if (why) *why = p.why_not;
    return std::nullopt;
  }
  auto v = iterate(p.fd.get(), pid);
  if (!v.ok()) {
    if (why) *why = v.error().message;
    return std::nullopt;
  }
  return std::move(*v);
}

uint32_t advice_of_flags(uint64_t f) {
  uint32_t a = 0;
  for (const AdviceFlag& x : kAdviceFlags)
    if (f & x.vm_flag) a |= x.advice;
  return a;
}

}  // namespace ckpt::dump
