#include "migrate/warm_restore.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>

#include "dirty/layout.hpp"
#include "dirty/ledger.hpp"
#include "dirty/tracker.hpp"
#include "image/chain.hpp"
#include "image/format.hpp"
#include "migrate/protocol.hpp"
#include "proc/inject.hpp"
#include "proc/regs.hpp"
#include "proc/syscall_restart.hpp"
#include "restore/address_space.hpp"
#include "restore/file_locks.hpp"
#include "restore/files.hpp"
#include "restore/in_place.hpp"
#include "restore/spawn.hpp"
#include "restore/tasks.hpp"
#include "restore/uffd_fill.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"
#include "util/text.hpp"
#include "util/zeros.hpp"

namespace ckpt::migrate {

// Metadata first: the process is built from the layout and its memory written run by run.
struct WarmRestore::Early {
  uint64_t gen = 0;
  image::ImageMeta layout;
  UniqueFd pages;
  // pages.img mapped whole, as far as the layout's private memory could
  // fill it: one mapping whose huge pages (a tmpfs of huge pages) map whole.
  const uint8_t* content = nullptr;
  uint64_t content_cap = 0;
  ~Early() {
    if (content)
      ::munmap(const_cast<uint8_t*>(content - image::kPagesHeaderSize),
               content_cap + image::kPagesHeaderSize);
  }
  user_regs_struct base{};
  std::unique_ptr<proc::RemoteSyscall> rs;
  std::unique_ptr<restore::AddressSpaceBuilder> builder;
  // Anonymous memory is filled with UFFDIO_COPY (no zeroed page first)
  // until the finish closes it; everything else with process_vm_writev.
  std::unique_ptr<restore::UffdFill> fill;
  std::vector<image::PageRun> written;  // as the committed addr.img must list them
  uint64_t content_end = 0;             // content bytes written so far
};

WarmRestore::WarmRestore(std::string staging, bool new_pid)
    : staging_(std::move(staging)), new_pid_(new_pid) {}
WarmRestore::~WarmRestore() {
  abort();
}

Status WarmRestore::begin_layout(uint64_t gen, const std::string& tmp_dir) {
  if (pid_ != 0 || early_)
    return make_error(EINVAL, "a layout comes only before the first generation");
  auto e = std::make_unique<Early>();
  e->gen = gen;
  const std::string path = tmp_dir + "/layout.img";
  CKPT_ASSIGN(std::string bytes, read_file(path));
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  std::string err;
  if (bytes.size() < 8 ||
      !image::decode_meta(p + 8, bytes.size() - 8, get_u64(p), &e->layout, &err))
    return make_error(EBADMSG, path + ": " + (err.empty() ? "too short" : err));
  if (e->layout.generation != gen || e->layout.parent_generation != 0)
    return make_error(EBADMSG, path + ": not the layout of full generation " + std::to_string(gen));
  e->pages.reset(::open((tmp_dir + "/" + image::kPagesFile).c_str(), O_RDONLY | O_CLOEXEC));
  if (!e->pages.valid()) return sys_error("opening " + tmp_dir + "/pages.img");
  for (const image::VmaRecord& v : e->layout.vmas)
    if (restore::AddressSpaceBuilder::layout_may_get_content(v)) e->content_cap += v.size();
  void* m = ::mmap(nullptr, e->content_cap + image::kPagesHeaderSize, PROT_READ, MAP_SHARED,
                   e->pages.get(), 0);
  if (m == MAP_FAILED) return sys_error("mapping " + tmp_dir + "/pages.img");
  e->content = static_cast<const uint8_t*>(m) + image::kPagesHeaderSize;
  CKPT_ASSIGN(pid_, restore::spawn_stopped(e->layout, new_pid_));
  CKPT_ASSIGN(e->base, proc::get_regs(pid_));
  e->rs = std::make_unique<proc::RemoteSyscall>(pid_, e->base,
                                                reinterpret_cast<uint64_t>(ckpt_inject_insn));
  e->builder = std::make_unique<restore::AddressSpaceBuilder>(pid_, e->layout, *e->rs);
  early_ = std::move(e);
  CKPT_TRY(early_->builder->build_layout());
  Early& b = *early_;
  b.fill = std::make_unique<restore::UffdFill>(
      pid_, [&b](long nr, uint64_t a1) { return b.rs->call(nr, a1); },
      restore::UffdFill::eligible(b.layout.vmas, restore::UffdFill::thp_mode()));
  return {};
}

Status WarmRestore::write_landed(const std::vector<LandedRun>& runs) {
  if (!early_ || runs.empty()) return make_error(EINVAL, "content before a layout");
  Early& e = *early_;
  const auto& vmas = e.layout.vmas;
  // Content comes in file order, each run after the last and inside one
  // private mapping: nothing is written where the image could not put it
  // (a shared file mapping would change the file).
  uint64_t at = e.content_end;
  for (const LandedRun& r : runs) {
    const image::VmaRecord* v = image::vma_holding(vmas, r.vaddr, r.bytes);
    if (r.offset != at || r.bytes == 0 || r.bytes % image::kPageSize ||
        r.vaddr % image::kPageSize || r.bytes > image::kMaxRunPages * image::kPageSize || !v ||
        !restore::AddressSpaceBuilder::layout_may_get_content(*v) ||
        r.offset + r.bytes > e.content_cap ||
        (!e.written.empty() && r.vaddr < e.written.back().vaddr + e.written.back().bytes()))
      return make_error(EBADMSG, "content at " + hex(r.vaddr) + " does not fit the layout");
    at += r.bytes;
  }
  std::vector<iovec> local, remote;
  Status st;
  for (size_t i = 0; i < runs.size() && st.ok(); ++i) {
    const LandedRun& r = runs[i];
    const uint8_t* src = e.content + r.offset;
    // Hashed here, from what is written: the commit's addr.img must agree.
    image::PageRun pr;
    pr.vaddr = r.vaddr;
    pr.npages = uint32_t(r.bytes / image::kPageSize);
    pr.content_offset = r.offset;
    pr.content_hash = xxh3(src, r.bytes);
    e.written.push_back(pr);
    if (e.fill && e.fill->covers(r.vaddr, r.bytes)) {
      st = e.fill->copy(r.vaddr, src, r.bytes);
    } else {
      local.push_back({const_cast<uint8_t*>(src), r.bytes});
      remote.push_back({reinterpret_cast<void*>(r.vaddr), r.bytes});
    }
    if (!local.empty() && (local.size() == 1024 || i + 1 == runs.size())) {
      ssize_t want = 0;
      for (const iovec& x : local) want += ssize_t(x.iov_len);
      ssize_t n =
          ::process_vm_writev(pid_, local.data(), local.size(), remote.data(), remote.size(), 0);
      if (n != want)
        st = n < 0 ? sys_error("writing memory into the new process")
                   : make_error(EFAULT, "short write into the new process");
      local.clear();
      remote.clear();
    }
  }
  pages_written_ += (at - e.content_end) / image::kPageSize;
  e.content_end = at;
  return st;
}

namespace {

bool same_vma(const image::VmaRecord& a, const image::VmaRecord& b) {
  return a.start == b.start && a.end == b.end && a.prot == b.prot && a.flags == b.flags &&
         a.pgoff == b.pgoff && a.dev == b.dev && a.ino == b.ino && a.name == b.name &&
         a.advice == b.advice;
}

}  // namespace

// The committed generation must be what the layout and the runs said.
Status WarmRestore::finish_early(uint64_t gen) {
  Early& e = *early_;
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging_, gen));
  if (chain.links.size() != 1) return make_error(EINVAL, "warm restore must start with a full");
  const image::ImageMeta& meta = chain.newest();
  const auto& want = e.layout.vmas;
  // (mm fields, signals and files are set again by finish()).
  if (meta.vmas.size() != want.size() ||
      !std::equal(want.begin(), want.end(), meta.vmas.begin(), same_vma))
    return make_error(EBADMSG, "generation " + std::to_string(gen) +
                                   ": its layout is not the one announced first");
  size_t k = 0;
  std::vector<const image::PageRun*> zero_in_files;
  for (const image::PageRun& r : chain.links.front()->runs()) {
    if (r.zero()) {
      const image::VmaRecord* v = image::vma_holding(want, r.vaddr, r.bytes());
      if (!v)
        return make_error(EBADMSG, "generation " + std::to_string(gen) + ": pages at " +
                                       hex(r.vaddr) + " outside its mappings");
      if (v->is_file()) zero_in_files.push_back(&r);
      continue;
    }
    const image::PageRun* w = k < e.written.size() ? &e.written[k] : nullptr;
    if (!w || r.compressed() || w->vaddr != r.vaddr || w->npages != r.npages ||
        w->content_offset != r.content_offset || w->content_hash != r.content_hash)
      return make_error(EBADMSG, "generation " + std::to_string(gen) + ": the run at " +
                                     hex(r.vaddr) + " is not the content written");
    ++k;
  }
  if (k != e.written.size())
    return make_error(EBADMSG, "generation " + std::to_string(gen) + ": more content than runs");
  e.fill.reset();  // the pages not filled fault in zeroed from here on
  // Zero pages of private file mappings hide the file's bytes (anonymous
  // memory starts zeroed).
  for (const image::PageRun* r : zero_in_files) {
    iovec l{const_cast<uint8_t*>(zero_bytes()), r->bytes()};
    iovec rm{reinterpret_cast<void*>(r->vaddr), r->bytes()};
    if (::process_vm_writev(pid_, &l, 1, &rm, 1, 0) != ssize_t(r->bytes()))
      return sys_error("writing memory into the new process");
    pages_written_ += r->npages;
  }
  CKPT_TRY(e.builder->restore_protections());
  // The trampoline goes; the child waits at that call's exit for the next generation.
  CKPT_ASSIGN(long r, e.rs->call_and_load(e.base, SYS_munmap, e.builder->trampoline(),
                                          restore::AddressSpaceBuilder::kTrampolineLen));
  if (r != 0) return sys_error("removing the restore trampoline", int(-r));
  last_ = gen;
  built_early_ = true;
  early_.reset();
  return {};
}

void WarmRestore::abort() {
  early_.reset();
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int ws;
  while (::waitpid(pid_, &ws, __WALL) > 0 && !WIFEXITED(ws) && !WIFSIGNALED(ws)) {
  }
  pid_ = 0;
}

Status WarmRestore::add(uint64_t gen) {
  if (early_) {
    if (early_->gen != gen)
      return make_error(EINVAL, "a layout was announced for another generation");
    return finish_early(gen);
  }
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging_, gen));
  const image::ImageMeta& meta = chain.newest();
  // The helper stays single-threaded while it is brought up to date; the
  // other threads are created at the end (finish), as a restore does.
  const image::RestorePlan plan = image::plan_chain(chain);
  if (pid_ == 0) {
    if (chain.links.size() != 1) return make_error(EINVAL, "warm restore must start with a full");
    CKPT_ASSIGN(pid_, restore::spawn_stopped(meta, new_pid_));
    CKPT_ASSIGN(user_regs_struct base, proc::get_regs(pid_));
    proc::RemoteSyscall rs(pid_, base, reinterpret_cast<uint64_t>(ckpt_inject_insn));
    restore::AddressSpaceBuilder b(pid_, chain, plan, rs);
    restore::MemoryStats ms;
    CKPT_TRY(b.build({}, &ms));  // verifies every run before writing it
    pages_written_ += ms.pages_written;
    // The trampoline goes; the child waits at that call's exit for the next generation.
    CKPT_ASSIGN(long r, rs.call_and_load(base, SYS_munmap, b.trampoline(),
                                         restore::AddressSpaceBuilder::kTrampolineLen));
    if (r != 0) return sys_error("removing the restore trampoline", int(-r));
    last_ = gen;
    return {};
  }
  if (chain.links.size() < 2 || chain.links[1]->meta().generation != last_)
    return make_error(
        EINVAL, "generation " + std::to_string(gen) + " does not follow " + std::to_string(last_));
  // Only what this generation holds can differ from what the process has.
  CKPT_TRY(chain.links.front()->verify_all());
  std::vector<mem::Range> changed;
  for (const image::PageRun& r : chain.links.front()->runs())
    changed.push_back({r.vaddr, r.bytes()});
  for (const image::MemRange& c : meta.complete) changed.push_back({c.start, c.end - c.start});
  dirty::normalize(changed);
  restore::InPlaceStats st;
  restore::InPlace ip(pid_, chain, plan, &st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.fix_layout());
  CKPT_TRY(ip.write_memory(&changed, false));
  CKPT_TRY(ip.drop_new_pages(&changed));
  CKPT_TRY(ip.end(nullptr));
  pages_written_ += st.pages_written;
  last_ = gen;
  return {};
}

Result<RestoreStats> WarmRestore::finish(const restore::ReleaseHook& before_release) {
  if (pid_ == 0) return make_error(EINVAL, "nothing to restore");
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging_, last_));
  const image::ImageMeta& meta = chain.newest();
  CKPT_TRY(restore::check_files_unchanged(meta, false));
  const image::RestorePlan plan = image::plan_chain(chain);
  RestoreStats stats;
  stats.generation = meta.generation;
  stats.generations_read = chain.links.size();
  stats.vmas = meta.vmas.size();
  // Tracking restarts before the process runs, as after a restore; its side
  // state is written once it runs (when this returns).
  dirty::LedgerHold hints;
  if (auto tracker = dirty::make_tracker(meta.tracker); tracker && tracker->info().kernel) {
    dirty::TrackerState state;
    state.target_fd = meta.tracker_fd;
    state.chain_id = meta.chain_id;
    state.generation = meta.generation;
    CKPT_TRY(tracker->arm(pid_, meta.vmas, &state));
    stats.tracking = "armed";
  }
  restore::InPlaceStats st;
  restore::InPlace ip(pid_, chain, plan, &st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.set_mm());
  // The helper was set up from the first generation: dispositions and files
  // may have changed since.
  CKPT_TRY(ip.set_signals());
  CKPT_TRY(ip.set_files());
  // Locks last among the files: laying out the mappings opened and closed
  // files, which drops the process's POSIX locks on them.
  CKPT_TRY(restore::take_locks(pid_, ip.builder(), restore::locks_to_take(meta, {})));
  // Threads, rseq, limits, timers, seccomp, masks: as a plain restore does.
  restore::TaskRestorer tasks(pid_, meta, ip.builder());
  CKPT_TRY(tasks.create_threads(ip.rs()));
  CKPT_TRY(restore::set_owners(pid_, meta));
  for (size_t i = 1; i < meta.threads.size(); ++i) CKPT_TRY(tasks.restore_thread(i));
  CKPT_TRY(tasks.restore_leader());
  const image::ThreadRecord& t = meta.threads[0];
  CKPT_TRY(proc::set_xstate(pid_, t.xstate));
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = proc::resume_registers(captured);
  CKPT_TRY(ip.end(&final_regs));
  if (before_release) {
    CKPT_TRY(tasks.load_masks());
    before_release(pid_);
  }
  CKPT_TRY(tasks.release());
  stats.pid = pid_;
  stats.pages_written = pages_written_;
  pid_ = 0;  // it runs: no longer ours to kill
  return stats;
}

}  // namespace ckpt::migrate
