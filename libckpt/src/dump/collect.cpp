#include "dump/collect.hpp"
#include "dump/unsupported.hpp"
#include "ipc/sysv_shm.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "proc/regs.hpp"
#include "proc/signals.hpp"
#include "proc/task_state.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

using image::VmaRecord;

namespace {
bool is_shared_anon_mapping(const proc::MapEntry& m) {
  // MAP_SHARED|MAP_ANONYMOUS shows as "/dev/zero (deleted)".
  return m.inode != 0 && m.shared && m.path.rfind("/dev/zero", 0) == 0;
}
// A memfd shows as "/memfd:NAME (deleted)": it is restored the same way,
// with memfd_create instead of a file under its old name.
bool is_deleted_shared_mapping(const proc::MapEntry& m) {
  return m.inode != 0 && m.shared && m.path.ends_with(" (deleted)") && m.path[0] == '/';
}

// A memfd sealed against writing has only read-only shared mappings, which
// the restore cannot fill: refused by name.
Status check_memfd_seals(const proc::MapEntry& m, const std::string& map_file,
                         const std::string& where) {
  if (!m.path.starts_with("/memfd:")) return {};
  UniqueFd fd(::open(map_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return sys_error(where);
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
    return make_error(ENOTSUP,
                      where + ": memfd sealed against writing (F_SEAL_WRITE): not supported yet");
  return {};
}
}  // namespace

std::optional<image::SharedObject> shared_object_of(const proc::MapEntry& m) {
  if (is_shared_anon_mapping(m)) return image::SharedObject{0, 0, m.inode};
  if (ipc::is_sysv_mapping(m)) return image::SharedObject{image::kVmaSysv, 0, m.inode};
  if (is_deleted_shared_mapping(m))
    return image::SharedObject{image::kVmaDelShared, makedev(m.dev_major, m.dev_minor), m.inode};
  return std::nullopt;
}

// Children are the job's business (proc/tree: a child outside the job is refused there).
Status collect_process(pid_t pid, image::ProcessRecord* out) {
  out->pid = pid;
  CKPT_ASSIGN(std::string comm, read_file(proc_path(pid, "comm")));
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  out->comm = comm;
  CKPT_ASSIGN(out->cwd, read_link(proc_path(pid, "cwd")));
  CKPT_ASSIGN(std::string status, read_file(proc_path(pid, "status")));
  size_t at = status.find("Umask:");
  if (at != std::string::npos)
    out->umask = uint32_t(std::strtoul(status.c_str() + at + 6, nullptr, 8));
  return {};
}

Result<std::vector<VmaRecord>> collect_vmas(pid_t pid, const std::vector<proc::MapEntry>& maps) {
  std::vector<VmaRecord> out;
  for (const proc::MapEntry& m : maps) {
    VmaRecord v;
    v.start = m.start;
    v.end = m.end;
    v.prot = (m.r ? PROT_READ : 0) | (m.w ? PROT_WRITE : 0) | (m.x ? PROT_EXEC : 0);
    v.flags = m.shared ? uint32_t(image::kVmaShared) : 0u;
    v.name = m.path;
    const std::string where = "mapping " + hex(m.start) + "-" + hex(m.end) + " " + m.path;
    if (m.path == "[vsyscall]") continue;  // a fixed kernel page, not part of the mm
    if (is_secretmem(m.path)) return make_error(ENOTSUP, where + ": " + kSecretmemRefusal);
    if (m.path == "[vvar]" || m.path == "[vvar_vclock]") {
      v.flags |= image::kVmaVvar;
    } else if (m.path == "[vdso]") {
      v.flags |= image::kVmaVdso;
    } else if (m.path == "[heap]") {
      v.flags |= image::kVmaHeap;
    } else if (m.path == "[stack]") {
      v.flags |= image::kVmaGrowsDown;
    } else if (is_shared_anon_mapping(m)) {
      // Its inode names the object, which several mappings (and processes) may share.
      v.ino = m.inode;
      v.pgoff = m.offset;
    } else if (ipc::is_sysv_mapping(m)) {
      CKPT_TRY(ipc::collect_sysv(m, where, &v));
    } else if (is_deleted_shared_mapping(m)) {
      // A shared mapping of a deleted file: memory shared like MAP_SHARED
      // anonymous memory (content once per job), its file made again at restore.
      std::string mf = proc_path(pid, "map_files/") + hex(m.start, false) + "-" + hex(m.end, false);
      struct stat st;
      if (::stat(mf.c_str(), &st) != 0) return sys_error(where);
      if (!S_ISREG(st.st_mode)) return make_error(ENOTSUP, where + ": unsupported mapping");
      CKPT_TRY(check_memfd_seals(m, mf, where));
      v.flags |= image::kVmaDelShared;
      v.pgoff = m.offset;
      v.dev = st.st_dev;
      v.ino = st.st_ino;
      v.file_size = uint64_t(st.st_size);
      v.mtime_ns = int64_t(((st.st_mode & 07777) | (uint64_t(st.st_uid) << 32)));
    } else if (m.inode != 0) {
      if (m.path.ends_with(" (deleted)"))
        return make_error(ENOTSUP, where + ": mapped file was deleted: not supported yet");
      if (m.path.empty() || m.path[0] != '/')
        return make_error(ENOTSUP, where + ": unsupported mapping");
      std::string mf = proc_path(pid, "map_files/") + hex(m.start, false) + "-" + hex(m.end, false);
      struct stat st;
      if (::stat(mf.c_str(), &st) != 0 && ::stat(m.path.c_str(), &st) != 0) return sys_error(where);
      if (!S_ISREG(st.st_mode))
        return make_error(ENOTSUP, where + ": device mappings are not supported");
      v.flags |= image::kVmaFile;
      v.pgoff = m.offset;
      v.dev = st.st_dev;
      v.ino = st.st_ino;
      v.file_size = uint64_t(st.st_size);
      v.mtime_ns = mtime_ns(st);
    } else if (!m.path.empty() && m.path[0] != '[') {
      return make_error(ENOTSUP, where + ": unsupported mapping");
    }
    out.push_back(std::move(v));
  }
  return out;
}

Status collect_mm(pid_t pid, const std::vector<VmaRecord>& vmas, image::MmRecord* out) {
  CKPT_ASSIGN(proc::StatMm s, proc::read_stat_mm(pid));
  out->start_code = s.start_code;
  out->end_code = s.end_code;
  out->start_data = s.start_data;
  out->end_data = s.end_data;
  out->start_brk = s.start_brk;
  out->brk = s.start_brk;
  // The break itself is not exported; the end of [heap] is the page-aligned
  // break, which is all the kernel's brk() compares against.
  for (const VmaRecord& v : vmas)
    if (v.flags & image::kVmaHeap) out->brk = v.end;
  out->start_stack = s.start_stack;
  out->arg_start = s.arg_start;
  out->arg_end = s.arg_end;
  out->env_start = s.env_start;
  out->env_end = s.env_end;
  CKPT_ASSIGN(std::string auxv, read_file(proc_path(pid, "auxv")));
  out->auxv.resize(auxv.size() / 8);
  std::memcpy(out->auxv.data(), auxv.data(), out->auxv.size() * 8);
  CKPT_ASSIGN(out->exe_path, read_link(proc_path(pid, "exe")));
  if (out->exe_path.ends_with(" (deleted)"))
    return make_error(ENOTSUP,
                      "executable " + out->exe_path + ": deleted since start: not supported");
  return {};
}

Status collect_vdso(pid_t pid, const std::vector<VmaRecord>& vmas, image::VdsoRecord* out) {
  for (const VmaRecord& v : vmas) {
    if (!(v.flags & image::kVmaVdso)) continue;
    std::vector<uint8_t> text(v.size());
    iovec local{text.data(), text.size()};
    iovec remote{reinterpret_cast<void*>(v.start), text.size()};
    if (::process_vm_readv(pid, &local, 1, &remote, 1, 0) != ssize_t(text.size()))
      return sys_error("reading [vdso]");
    out->vdso_size = v.size();
    out->vdso_hash = xxh3(text.data(), text.size());
  }
  return {};
}

Status collect_threads(const proc::FrozenProcess& fp, const image::ImageMeta* previous,
                       std::vector<image::ThreadRecord>* out) {
  for (const proc::FrozenThread& t : fp.threads()) {
    image::ThreadRecord rec;
    rec.tid = t.tid;
    rec.pending_signal = t.pending_signal;
    CKPT_ASSIGN(user_regs_struct regs, proc::get_regs(t.tid));
    constexpr unsigned long long kRestartBlock = -516ull;  // -ERESTART_RESTARTBLOCK
    if (regs.orig_rax == SYS_restart_syscall && previous) {
      // Resumed after an earlier checkpoint through restart_syscall: record
      // the call it continues, which a new process can re-execute.
      for (const image::ThreadRecord& p : previous->threads)
        if (p.tid == t.tid && p.restart_nr && p.restart_rip == regs.rip)
          regs.orig_rax = p.restart_nr;
    }
    if (regs.rax == kRestartBlock && regs.orig_rax != SYS_restart_syscall) {
      rec.restart_nr = regs.orig_rax;
      rec.restart_rip = regs.rip;
    }
    static_assert(sizeof(regs) == sizeof(rec.gpregs));
    std::memcpy(rec.gpregs.data(), &regs, sizeof regs);
    CKPT_ASSIGN(rec.xstate, proc::get_xstate(t.tid));
    CKPT_ASSIGN(proc::RseqConfig rseq, proc::get_rseq(t.tid));
    rec.rseq_ptr = rseq.ptr;
    rec.rseq_len = rseq.len;
    rec.rseq_sig = rseq.sig;
    CKPT_ASSIGN(proc::SignalMasks masks, proc::read_signal_masks(fp.pid(), t.tid));
    rec.sigmask = masks.blocked;
    out->push_back(std::move(rec));
  }
  return {};
}

Result<proc::SignalMasks> collect_signals(const proc::FrozenProcess& fp,
                                          const image::ThreadRecord& leader,
                                          image::ProcessRecord* out) {
  CKPT_ASSIGN(proc::SignalMasks masks, proc::read_signal_masks(fp.pid(), leader.tid));
  out->sigactions = proc::ignored_sigactions(masks);
  return masks;
}

}  // namespace ckpt::dump
