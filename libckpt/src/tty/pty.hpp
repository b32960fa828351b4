// Pseudo-terminals whose master is in the job (a launcher that reads its
// children's output through a pty, as Open MPI's mpirun does; a terminal
// multiplexer such as tmux or screen). Saved: the slave's termios and window
// size, packet mode and its pending status, the output not yet read from the
// master, the input not yet read by the slave, and the session it is the
// controlling terminal of with its foreground group; restored as a new pty
// pair (its index may differ), the members holding its master and slave ends
// as before.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "util/fd.hpp"

namespace ckpt::tty {

// The indexes of the ptys whose master (/dev/ptmx) a member of the job holds.
std::set<int> job_pty_masters(const std::vector<pid_t>& job);
// The N of "/dev/pts/N", or -1.
int pts_index(const std::string& path);

// Input not yet read by the slave side, as its reader would see it. In
// canonical mode (ICANON without EXTPROC) each complete line is one read:
// ended by its terminator ('\n', VEOL, VEOL2: the last byte), or by VEOF
// (not stored: a read returns the line without it, an empty one end of
// file); a line being typed is not readable yet. Otherwise all is raw.
enum class Segment : uint32_t { kRaw = 0, kLine = 1, kEofLine = 2, kPartial = 3 };
struct InputSegment {
  Segment kind = Segment::kRaw;
  std::string bytes;
};

// What a pty holds that no program has read yet.
struct Queues {
  bool packet = false;
  uint8_t status = 0;               // packet mode: the status byte the master has not read
  std::string output;               // written by the slave side, not read by the master
  std::vector<InputSegment> input;  // written by the master side, not read by the slave
};

// Queues in a record's words and data (kPtyPacket.., segments after kPtyParams).
void store_queues(const Queues& q, image::FileRecord* f);
Result<Queues> load_queues(const image::FileRecord& f, const std::string& what);

// Fills `f` (kind kPtyMaster, or kPtyMasterQueued when it holds input or is
// in packet mode) from `master`, this tool's copy of the target's /dev/ptmx
// fd, whose fdinfo is `info`. What the pty holds is taken out and put back
// (the job is frozen), so the checkpoint has it and the program still finds
// it. A state that could not be put back the same way is refused by name,
// and the pty keeps what it held.
Status collect_master(int master, const std::string& info, const std::string& what,
                      image::FileRecord* f);
// Fills `f` (kind kPtySlave) from `slave`, the tool's copy of a /dev/pts/N fd.
Status collect_slave(int slave, int index, const std::string& what, image::FileRecord* f);

// The new pairs of a restore, by the checkpointed index.
struct Pairs {
  std::map<uint64_t, UniqueFd> masters;
  std::set<uint64_t> refilled;
};
// An fd for the master or slave record `f`: the pair is made at the first
// record of either side that names it.
Result<UniqueFd> restore_pty(const image::FileRecord& f, const std::string& what, Pairs* pairs);

inline bool is_master(image::FileKind k) {
  return k == image::FileKind::kPtyMaster || k == image::FileKind::kPtyMasterQueued;
}

// A job's pty that is the controlling terminal of a session (ctty.cpp).
struct Controlling {
  uint64_t index = 0;    // kPtyIndex
  pid_t session = 0;     // its leader's PID
  pid_t foreground = 0;  // the foreground process group (0: none)
};
// Every one named by the master records of `metas` (each pty once).
std::vector<Controlling> controlling_ttys(const std::vector<const image::ImageMeta*>& metas);

struct SessionMember {
  pid_t pid, pgid, sid;
};
// Refuses, by name, what a restore could not make again: a session whose
// leader is not in the job, a foreground group no member leads.
Status check_controlling(const Controlling& c, const std::vector<SessionMember>& members);

}  // namespace ckpt::tty
