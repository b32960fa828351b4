// Which checkpoint generation last reset a process's write tracking, kept
// outside the process (pagemap-scan's tracking state is in the target's page
// tables, shared by whoever collects it).
//
// A collect resets tracking. If that generation is then not committed (the
// tool was killed), or another chain of the same process collects or arms
// in between, the next incremental of the first chain would trust a dirty
// set that misses writes. The ledger names the generation each reset
// belongs to; a collect whose parent is not the one named saves everything.
// (kmod has the same guarantee from the module's rotating token.)
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/result.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "dirty/tracker.hpp"

namespace ckpt::dirty {

struct LedgerEntry {
  std::array<uint8_t, 16> chain_id{};
  uint64_t generation = 0;
  // claim_collect()'s token: which tool run claimed `generation` (0: written
  // by a collect or an arm). A parent is matched on chain and generation.
  uint64_t claim = 0;
  bool operator==(const LedgerEntry&) const = default;
  bool same_generation(const LedgerEntry& o) const {
    return chain_id == o.chain_id && generation == o.generation;
  }
};

// The last entry recorded for the process (identified by PID and start time,
// so a reused PID finds nothing).
std::optional<LedgerEntry> read_ledger(pid_t pid);
// Records `e` atomically (write, rename); also drops entries of processes
// that are gone (later, while a LedgerHold lives).
Status write_ledger(pid_t pid, const LedgerEntry& e);
std::string describe(const LedgerEntry& e);
// The path of a file kept next to the process's entry, named by `suffix`
// (dirty/adaptive keeps its state there); dropped with the entry once the
// process is gone. nullopt: no such process (or, `create_dir`, no directory).
std::optional<std::string> ledger_side_file(pid_t pid, const std::string& suffix, bool create_dir);
// A tracker's state in its side file: a header line naming the chain and the
// generation it was written for, then the tracker's own lines.
// read_side_state: those lines if the file continues `s` (written for
// s.prev_generation of s.chain_id), else nullopt (start afresh).
// write_side_state: written whole, then renamed (a reader sees the old state
// or the new one), for s.generation; best effort.
std::optional<std::string> read_side_state(pid_t pid, const std::string& suffix,
                                           const TrackerState& s);
// The lines of this process's side file whatever chain wrote them (for
// hints that no correctness depends on).
std::optional<std::string> read_side_state_any_chain(pid_t pid, const std::string& suffix);
void write_side_state(pid_t pid, const std::string& suffix, const TrackerState& s,
                      const std::string& lines);
// While one lives, what the ledger can put off waits in this process: side
// states written (read from memory meanwhile) and the removal of dead
// processes' records. write(), or its end, does it. A tool holds the ledger
// while its target is frozen: a rename waited 25-35 ms for the file system's
// journal here while a page file was being written (docs/performance.md),
// and neither is needed for correctness (the ledger's own records are
// written at once).
class LedgerHold {
 public:
  LedgerHold();
  ~LedgerHold();
  LedgerHold(const LedgerHold&) = delete;
  LedgerHold& operator=(const LedgerHold&) = delete;
  void write();
};
// The caller's private runtime directory of libckpt (root: /run/libckpt),
// `leaf` below it, created if missing; nullopt when it cannot be made
// private (make_private_dirs).
std::optional<std::string> runtime_dir(const std::string& leaf);
// This boot's id (/proc/sys/kernel/random/boot_id, without its newline):
// what tells a record of this boot from one that survived a reboot.
std::optional<std::string> boot_id();

// For a tracker: an arm restarts tracking for `s.generation` (best effort:
// without the record the next collect saves everything).
void record_arm(pid_t pid, const TrackerState& s);
// Before a collect resets tracking: when the last reset was the parent
// generation's, records this generation (before the reset, so a collect that
// is never committed is found out by the next one) and returns "". Otherwise
// returns why the dirty set cannot be trusted. An error: the record could not
// be written; nothing may be reset then.
// `claim`: the token of this tool's claim_collect() for the same generation
// (0: none); the record must still be exactly that claim, and nothing is
// written then.
Result<std::string> begin_collect(pid_t pid, const TrackerState& s, uint64_t claim = 0);
// While the process still runs, before the freeze of the collect to come:
// when the last reset was the parent generation's, records this generation
// already, with a token of this tool run's own, and returns the token (0:
// nothing claimed). The record is then written before the freeze (a rename
// there waited for the file system's journal: LedgerHold), and it guards
// what the tool does meanwhile (adaptive.hpp, pages protected to verify
// fresh blocks): any other collect (another chain, this chain's next
// incremental after this tool was killed, or another tool run claiming the
// same generation at the same moment) finds a record that is not its own
// and saves everything; every collect writes its record before it resets
// tracking, so a claim cannot outlive a reset by anyone else. A claim
// followed by no collect (an error) costs the next incremental the same.
uint64_t claim_collect(pid_t pid, const TrackerState& s);

}  // namespace ckpt::dirty
