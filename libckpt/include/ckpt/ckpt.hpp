// libckpt C++ API: checkpoint a running process by PID and restore it.
// Every call returns a Result: a value, or an Error with an errno-style code
// and a one-line cause. No global state; nothing here exits the caller.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <ckpt/tracker.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ckpt {

// Called now and then during long work with bytes done and bytes total.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// Told, on the calling thread or a thread of the call, of what a call is
// doing that a user may want in a log, one line (no newline) at a time: a
// `note` is worth showing (a wait: "waiting for the TIME-WAIT of old
// connections"), a `trace` is detail (each phase's time: "phase final copy
// 12.3 ms"). The library never prints; unset: nothing is told.
enum class LogKind { note, trace };
using LogFn = std::function<void(LogKind kind, const std::string& line)>;

// How the tool's page copy may use the machine during a freeze. The
// defaults are what docs/performance.md measures best; the other settings
// exist for measurements (bench/bench_freeze) and unusual machines.
struct CaptureTuning {
  // The writer thread drains copied pages to disk while the job is still
  // frozen (`drain`), or waits for its release unless the buffers run out
  // (`hold`). automatic: hold when no second CPU is free, or when the copy
  // fits in buffers already faulted in.
  enum class Writer { automatic, hold, drain } writer = Writer::automatic;
  // Threads reading a frozen process's memory: 0 automatic (two when a CPU
  // is free for the second), 1 or 2.
  unsigned readers = 0;
  // The buffers stay with this process for its next checkpoint (released by
  // release_buffers()); false unmaps them at the end of each checkpoint.
  bool keep_buffers = true;
};

struct CheckpointOptions {
  std::string dir;               // checkpoint directory (created if missing)
  pid_t pid = 0;                 // the target (with `tree`: the root of the job)
  bool tree = false;             // the target and all its descendants, as one job
  bool kill_after = false;       // end the target after a successful checkpoint
  bool direct_io = false;        // write page content with O_DIRECT (bypass the page cache)
  std::string tracker = "auto";  // "auto" or a name from tracker_kinds() (ckpt/tracker.hpp)
  bool force = false;  // full: move another process's chain in dir aside instead of refusing
  // Memory the tool may use to copy the job's pages before releasing it
  // (-1: half of MemAvailable). Pages beyond it go to disk while frozen.
  int64_t capture_bytes = -1;
  // Pre-copy the memory while the job runs and freeze it only for what it
  // wrote since (needs a kernel dirty tracker; with "hash" the freeze is the
  // in-memory copy). The result is an ordinary generation.
  bool live = false;
  // Skip every fsync of the commit (files, directories). The generation still
  // appears only by the rename, after its files are complete: a killed tool
  // never leaves a half one visible. An OS crash or power loss before the
  // kernel wrote it back may lose it or leave it incomplete on disk (the
  // restore's checks refuse it; an older generation is still restorable).
  // A full with no_sync keeps the chain it supersedes (docs/format.md, commit protocol).
  bool no_sync = false;
  // Save TCP connections whose peer is not in the job in repair mode (else
  // refused). Their packets are held back (a FIB rule per connection in
  // this network namespace) while the job is frozen, and with kill_after
  // until the restore rebuilds them (docs/nodes.md).
  bool tcp_established = false;
  // Files a member holds that may vanish with the job (on tmpfs or in a
  // temporary directory, docs/state.md: saved with each generation): at most
  // this many bytes per process. Beyond that a file on tmpfs it holds
  // refuses the checkpoint naming the file; others are reopened by path.
  uint64_t scratch_max_bytes = uint64_t(512) << 20;
  // zstd level (1-19) for page content, 0: stored plain. Each 1 MiB run is
  // compressed on its own, after the copy (off the freeze), on up to 4
  // threads; restore checks and decompresses run by run (docs/format.md).
  int compress_level = 0;
  // How the chain's tracker works (pagemap-scan's adaptive blocks, huge
  // pages: ckpt/tracker.hpp). Every generation of a chain may set its own.
  TrackingOptions tracking;
  CaptureTuning capture;
  ProgressFn progress;
  LogFn log;
};

struct CheckpointStats {
  uint64_t generation = 0;
  uint64_t processes = 0;     // members of the job checkpointed (zombies included)
  double frozen_seconds = 0;  // the target was stopped this long
  double memory_seconds = 0;  // reading memory and writing pages
  double total_seconds = 0;
  uint64_t vmas = 0;
  uint64_t pages_scanned = 0;      // pages of the mappings considered
  uint64_t pages_skipped = 0;      // never populated or identical to their file
  uint64_t pages_written = 0;      // pages with content bytes
  uint64_t pages_zero = 0;         // populated but all zero: stored as a flag
  uint64_t pages_unchanged = 0;    // read, but as the parent generation has them: not stored
  uint64_t bytes_written = 0;      // all three files
  uint64_t parent_generation = 0;  // 0: a full checkpoint
  std::string tracker = "none";
  std::string tracker_reset;        // non-empty: tracking was lost, everything saved (why)
  std::string moved_aside;          // full with force: where another process's chain was moved
  uint64_t capture_peak_bytes = 0;  // most tool memory holding copied pages at once
  uint64_t live_rounds = 0;         // live: pre-copy rounds run while the job ran
  uint64_t precopy_bytes = 0;       // live: bytes those rounds copied
  double precopy_frozen_max_seconds = 0;  // live: the longest stop of a pre-copy round
  std::string live_stop;                  // live: why the final round came when it did
  // live, a job: who left or joined it during the pre-copy ("PID 12 (cg.A.x)
  // left"); the checkpoint holds the members of the final freeze. Empty: none.
  std::string members_changed;
};

// Writes a full checkpoint of `pid` as a new generation in opts.dir. The
// target keeps running (unless kill_after); on any error it is released
// untouched and no new generation is visible.
Result<CheckpointStats> checkpoint_full(const CheckpointOptions& opts);

// Writes an incremental checkpoint on top of the newest generation in
// opts.dir: only pages written since then, plus the complete metadata. Fails
// clearly when opts.dir holds no checkpoint of this process.
Result<CheckpointStats> checkpoint_incremental(const CheckpointOptions& opts);

// The memory a checkpoint copied pages into stays with this process for the
// next checkpoint (faulting it in afresh is most of what a copy costs on a
// VM); the kernel may reclaim it meanwhile (MADV_FREE). This unmaps it now,
// e.g. in a launcher that will not checkpoint again for a long while.
// CaptureTuning::keep_buffers = false keeps none in the first place. Safe
// to call from any thread, also while another checkpoint runs (it then
// keeps the buffers it uses until it ends).
void release_buffers();

struct RestoreOptions {
  std::string dir;
  uint64_t generation = 0;  // 0: the newest committed generation
  bool new_pid = false;     // restore under a new PID when the original is taken
  bool force = false;       // restore even if files changed on disk since the checkpoint
  ProgressFn progress;
  LogFn log;
};

struct RestoreStats {
  pid_t pid = 0;           // the restored process (a job's root), a child of the caller
  uint64_t processes = 0;  // processes restored (a job's members, zombies included)
  uint64_t generation = 0;
  double seconds = 0;
  uint64_t vmas = 0;
  uint64_t pages_read = 0;     // pages whose content was read from the image
  uint64_t pages_written = 0;  // pages written into the process
  uint64_t pages_zero = 0;
  uint64_t pages_skipped = 0;     // superseded by a newer generation, or no longer mapped
  uint64_t generations_read = 0;  // the chain: the generation and its ancestors
  std::string tracking;           // "armed": later incrementals continue this chain
  uint64_t bytes_read = 0;
};

// Recreates the checkpointed process as a child of the caller and lets it run.
// Every checksum is verified before the process runs. The caller reaps it.
Result<RestoreStats> restore_process(const RestoreOptions& opts);

struct CompactStats {
  uint64_t generation = 0;  // the synthetic full
  uint64_t generations_folded = 0;
  uint64_t pages_written = 0;
  uint64_t pages_skipped = 0;  // superseded or no longer mapped
  uint64_t bytes_written = 0;
  double seconds = 0;
};

// A checkpoint directory as the tools take it (`--dir`): either a chain
// itself (the generations gen-NNNNNN of one full and its incrementals, what
// cr_full writes), or a directory of chains, DIR/chain-NNNNNN, as cr_run
// writes them. Returns the chain to read: DIR itself when it holds
// generations (or neither generations nor chains: the caller then reports
// that there is no checkpoint); DIR/chain-N for `chain` N (ENOENT if DIR has
// no such chain, EINVAL if DIR is a chain itself); else the newest chain that
// holds a committed generation. restore_process, pause_process,
// compact_chain and the C API resolve their directory with chain 0.
Result<std::string> resolve_checkpoint_dir(const std::string& dir, uint64_t chain = 0);
// The chains of a directory of chains, ascending (empty for a chain itself).
std::vector<uint64_t> run_chains(const std::string& dir);
// DIR/chain-NNNNNN (six digits at least).
std::string run_chain_dir(const std::string& dir, uint64_t chain);

// Folds the newest chain in `dir` into one new full generation (offline; no
// process is touched), then deletes the chain it replaces. Atomic: until the
// new generation is committed the old chain is untouched and restorable.
Result<CompactStats> compact_chain(const std::string& dir);

struct UntrackStats {
  std::string tracker;     // of the chain
  uint64_t processes = 0;  // members of the newest generation found running
  uint64_t released = 0;   // of those, the ones that still held the tracker
};

// Ends the dirty-page tracking that the chain in `dir` keeps in its running
// process (or job, frozen together meanwhile) and removes what it left there
// (the userfaultfd, the module's registration), so that the process is as
// before its first checkpoint and another tool may take it over. The chain
// stays restorable; its next incremental saves everything.
Result<UntrackStats> untrack(const std::string& dir);

}  // namespace ckpt
