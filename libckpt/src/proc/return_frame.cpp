#include "proc/return_frame.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "proc/inject.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

namespace {

// The kernel's x86-64 signal frame (arch/x86/include/asm/sigframe.h): what
// rt_sigreturn reads at the stack pointer minus 8.
struct KernelSigcontext {
  uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip,
      eflags;
  uint16_t cs, gs, fs, ss;
  uint64_t err, trapno, oldmask, cr2, fpstate;
  uint64_t reserved[8];
};
struct KernelUcontext {
  uint64_t flags, link;
  uint64_t ss_sp;
  int32_t ss_flags, pad;
  uint64_t ss_size;
  KernelSigcontext mc;
  uint64_t sigmask;
};
struct RtSigframe {
  uint64_t pretcode;  // where a handler's "ret" goes: the sigreturn sequence
  KernelUcontext uc;
  uint8_t info[128];
};
static_assert(sizeof(KernelSigcontext) == 256 && sizeof(KernelUcontext) == 304 &&
              sizeof(RtSigframe) == 440);

constexpr uint64_t kUcFpXstate = 1, kUcSigcontextSs = 2, kUcStrictRestoreSs = 4;
constexpr uint32_t kFpXstateMagic1 = 0x46505853, kFpXstateMagic2 = 0x46505845;
constexpr size_t kSwBytesOffset = 464;  // fxsave's software-reserved bytes
constexpr uint64_t kRedZone = 128;
// Room a signal handler would need below the calls' stack pointer (a signal
// caught after the mask is given back, just before the last registers are).
constexpr uint64_t kHandlerMargin = 8192;

// Whether the code after a "syscall" at `p` only clears registers, pops
// (counted in `pops`) and returns: nothing that writes memory or jumps.
bool plain_return(const uint8_t* p, size_t n, unsigned* pops) {
  *pops = 0;
  size_t i = 0;
  for (int insn = 0; insn < 24 && i < n; ++insn) {
    uint8_t rex = 0;
    if ((p[i] & 0xf0) == 0x40) rex = p[i++];
    if (i >= n) return false;
    uint8_t b = p[i];
    if (b == 0xc3 && rex == 0) return true;
    if (b >= 0x58 && b <= 0x5f && (rex & ~1u & 0x0f) == 0) {
      if (b == 0x5c && !(rex & 1)) return false;  // pop %rsp
      ++*pops;
      ++i;
      continue;
    }
    if ((b == 0x31 || b == 0x33) && i + 1 < n) {  // xor r, r (same register)
      uint8_t m = p[i + 1];
      bool same = (m >> 6) == 3 && ((m >> 3) & 7) == (m & 7) && ((rex >> 2) & 1) == (rex & 1);
      if (!same) return false;
      i += 2;
      continue;
    }
    return false;
  }
  return false;
}

Result<std::vector<uint8_t>> read_mapping(pid_t pid, const MapEntry& m) {
  std::vector<uint8_t> text(m.end - m.start);
  CKPT_TRY(read_remote(pid, m.start, text.data(), text.size()));
  return text;
}

// "mov $15, %rax; syscall" (glibc, musl, Go) or "mov $15, %eax; syscall".
uint64_t find_sigreturn(const std::vector<uint8_t>& t, uint64_t base) {
  static const uint8_t kLong[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  static const uint8_t kShort[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  for (size_t i = 0; i + sizeof kLong <= t.size(); ++i) {
    if (t[i] == 0x48 && std::memcmp(&t[i], kLong, sizeof kLong) == 0) return base + i;
    if (t[i] == 0xb8 && std::memcmp(&t[i], kShort, sizeof kShort) == 0) return base + i;
  }
  return 0;
}

// find_sigreturn over a mapping, read 64 KiB at a time and stopped at the
// first hit: the sequence sits early in the C library's text (glibc: about
// 90 KiB in, of 1.4 MiB), and every read is time the target stays frozen.
Result<uint64_t> find_sigreturn_in(pid_t pid, const MapEntry& m) {
  constexpr uint64_t kChunk = 64 << 10, kOverlap = 8;  // a sequence across two chunks
  std::vector<uint8_t> t;
  for (uint64_t at = m.start; at < m.end; at += kChunk) {
    const uint64_t from = at == m.start ? at : at - kOverlap;
    const uint64_t end = std::min(m.end, at + kChunk);
    t.resize(end - from);
    CKPT_TRY(read_remote(pid, from, t.data(), t.size()));
    if (uint64_t hit = find_sigreturn(t, from)) return hit;
  }
  return uint64_t(0);
}

}  // namespace

namespace {

// The code bytes a site relies on: the syscall and what follows it up to
// its "ret", and the sigreturn sequence.
struct SiteBytes {
  uint8_t call[64];
  uint8_t sigreturn[9];
  bool operator==(const SiteBytes&) const = default;
};

const MapEntry* mapping_of(const std::vector<MapEntry>& maps, uint64_t addr) {
  for (const MapEntry& m : maps)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

bool same_mapping(const MapEntry* a, const MapEntry& b) {
  return a && a->x && a->start == b.start && a->end == b.end && a->offset == b.offset &&
         a->inode == b.inode && a->path == b.path;
}

Result<SiteBytes> site_bytes(pid_t pid, const InjectSite& site, const MapEntry& call_map,
                             const MapEntry& sig_map) {
  SiteBytes b{};
  iovec l[2] = {{b.call, std::min<size_t>(sizeof b.call, call_map.end - site.syscall_insn)},
                {b.sigreturn, std::min<size_t>(sizeof b.sigreturn, sig_map.end - site.sigreturn)}};
  iovec r[2] = {{reinterpret_cast<void*>(site.syscall_insn), l[0].iov_len},
                {reinterpret_cast<void*>(site.sigreturn), l[1].iov_len}};
  if (::process_vm_readv(pid, l, 2, r, 2, 0) != ssize_t(l[0].iov_len + l[1].iov_len))
    return sys_error("reading the injection site");
  return b;
}

// The last site found per process, with what it was found in. Searching
// reads the vdso and up to a C library's text (0.3-0.5 ms, in every freeze
// that injects); a site whose mappings are the same and whose code bytes
// read the same is the same site.
struct KnownSite {
  pid_t pid = 0;
  InjectSite site;
  MapEntry call_map, sig_map;
  SiteBytes bytes;
};
std::mutex known_mu;
std::vector<KnownSite> known;  // the last few processes

Result<InjectSite> search_inject_site(pid_t pid, const std::vector<MapEntry>& maps);

}  // namespace

Result<InjectSite> find_inject_site(pid_t pid) {
  CKPT_ASSIGN(auto maps, read_maps(pid));
  {
    std::lock_guard<std::mutex> hold(known_mu);
    for (const KnownSite& k : known) {
      if (k.pid != pid || !same_mapping(mapping_of(maps, k.site.syscall_insn), k.call_map) ||
          !same_mapping(mapping_of(maps, k.site.sigreturn), k.sig_map))
        continue;
      auto now = site_bytes(pid, k.site, k.call_map, k.sig_map);
      if (now.ok() && *now == k.bytes) return k.site;
    }
  }
  CKPT_ASSIGN(InjectSite site, search_inject_site(pid, maps));
  const MapEntry* call_map = mapping_of(maps, site.syscall_insn);
  const MapEntry* sig_map = site.sigreturn ? mapping_of(maps, site.sigreturn) : nullptr;
  if (call_map && sig_map) {
    auto bytes = site_bytes(pid, site, *call_map, *sig_map);
    if (bytes.ok()) {
      std::lock_guard<std::mutex> hold(known_mu);
      std::erase_if(known, [&](const KnownSite& k) { return k.pid == pid; });
      if (known.size() >= 16) known.erase(known.begin());
      known.push_back({pid, site, *call_map, *sig_map, *bytes});
    }
  }
  return site;
}

namespace {

Result<InjectSite> search_inject_site(pid_t pid, const std::vector<MapEntry>& maps) {
  InjectSite site;
  for (const MapEntry& m : maps) {
    if (m.path != "[vdso]") continue;
    CKPT_ASSIGN(auto text, read_mapping(pid, m));
    for (size_t i = 0; i + 2 < text.size() && !site.syscall_insn; ++i)
      if (text[i] == 0x0f && text[i + 1] == 0x05 &&
          plain_return(&text[i + 2], text.size() - i - 2, &site.pops))
        site.syscall_insn = m.start + i;
    site.sigreturn = find_sigreturn(text, m.start);
  }
  if (!site.syscall_insn) {
    // No syscall whose continuation is known: plain injection (no frame).
    CKPT_ASSIGN(site.syscall_insn, find_syscall_insn(pid));
    site.sigreturn = 0;
    return site;
  }
  // The C library first (every dynamically linked program has one), then
  // the executable, then any other code; at most 256 MiB of text is read.
  char exe[4096];
  ssize_t n = ::readlink(proc_path(pid, "exe").c_str(), exe, sizeof exe - 1);
  std::string exe_path = n > 0 ? std::string(exe, size_t(n)) : "";
  auto rank = [&](const MapEntry& m) {
    if (m.path.find("/libc.so") != std::string::npos ||
        m.path.find("/libc-") != std::string::npos || m.path.find("ld-musl") != std::string::npos)
      return 0;
    return m.path == exe_path ? 1 : 2;
  };
  uint64_t budget = 256ull << 20;
  for (int want = 0; want < 3 && !site.sigreturn; ++want)
    for (const MapEntry& m : maps) {
      if (!m.x || m.path.empty() || m.path[0] != '/' || rank(m) != want) continue;
      if (m.end - m.start > budget) break;
      budget -= m.end - m.start;
      auto hit = find_sigreturn_in(pid, m);
      if (!hit.ok()) continue;
      if ((site.sigreturn = *hit)) break;
    }
  return site;
}

}  // namespace

Result<ReturnFrame> write_return_frame(pid_t tid, const InjectSite& site,
                                       const user_regs_struct& resume, uint64_t mask) {
  CKPT_ASSIGN(std::vector<uint8_t> fp, get_xstate(tid));
  if (fp.size() < 576) return make_error(ENOTSUP, "no XSAVE state for the signal frame");
  // ptrace gives XCR0 where a signal frame has its software bytes.
  uint64_t xcr0;
  std::memcpy(&xcr0, &fp[kSwBytesOffset], 8);
  const uint32_t xsize = uint32_t(fp.size());
  uint32_t sw[12] = {kFpXstateMagic1, xsize + 4, uint32_t(xcr0), uint32_t(xcr0 >> 32), xsize};
  std::memcpy(&fp[kSwBytesOffset], sw, sizeof sw);
  fp.resize(fp.size() + 4);
  std::memcpy(&fp[xsize], &kFpXstateMagic2, 4);

  const uint64_t top = resume.rsp - kRedZone;
  const uint64_t fp_addr = (top - fp.size()) & ~63ull;  // XRSTOR needs 64-byte alignment
  const uint64_t frame_addr = (fp_addr - sizeof(RtSigframe)) & ~15ull;
  const uint64_t call_rsp = frame_addr - 8 * site.pops;

  RtSigframe f{};
  f.pretcode = site.sigreturn;
  f.uc.flags = kUcFpXstate | kUcSigcontextSs | kUcStrictRestoreSs;
  // An invalid mode: the kernel's restore_altstack() then leaves the
  // thread's alternate stack as it is (its error is ignored).
  f.uc.ss_flags = 3;
  KernelSigcontext& c = f.uc.mc;
  c.r8 = resume.r8, c.r9 = resume.r9, c.r10 = resume.r10, c.r11 = resume.r11;
  c.r12 = resume.r12, c.r13 = resume.r13, c.r14 = resume.r14, c.r15 = resume.r15;
  c.rdi = resume.rdi, c.rsi = resume.rsi, c.rbp = resume.rbp, c.rbx = resume.rbx;
  c.rdx = resume.rdx, c.rax = resume.rax, c.rcx = resume.rcx, c.rsp = resume.rsp;
  c.rip = resume.rip, c.eflags = resume.eflags;
  c.cs = uint16_t(resume.cs), c.ss = uint16_t(resume.ss);
  c.fpstate = fp_addr;
  f.uc.sigmask = mask;

  // One write from the pop slots up to the end of the FPU state.
  std::vector<uint8_t> buf(fp_addr + fp.size() - call_rsp, 0);
  std::memcpy(&buf[frame_addr - call_rsp], &f, sizeof f);
  std::memcpy(&buf[fp_addr - call_rsp], fp.data(), fp.size());
  uint8_t probe;
  if (!read_remote(tid, call_rsp - kHandlerMargin, &probe, 1).ok())
    return make_error(ENOSPC, "no room below the stack pointer of thread " + std::to_string(tid));
  CKPT_TRY(write_remote(tid, call_rsp, buf.data(), buf.size()));

  ReturnFrame out;
  out.parked = resume;
  out.parked.rip = site.sigreturn;
  out.parked.rsp = frame_addr + 8;  // as after a handler's "ret"
  out.parked.orig_rax = ~0ull;      // not in a system call: no restart by the kernel
  out.call_rsp = call_rsp;
  out.scratch = (call_rsp - 2 * kStackScratchSize) & ~15ull;
  return out;
}

}  // namespace ckpt::proc
