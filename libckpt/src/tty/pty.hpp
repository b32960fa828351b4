// Pseudo-terminals whose both sides are in the job (a launcher that reads
// its children's output through a pty, as Open MPI's mpirun does). Saved:
// the slave's termios and window size and the output not yet read from the
// master; restored as a new pty pair (its index may differ), the members
// holding its master and slave ends as before.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
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

// Fills `f` (kind kPtyMaster) from `master`, this tool's copy of the
// target's /dev/ptmx fd, whose fdinfo is `info`. Output waiting in the
// master is read and written back through the slave, unchanged (the job is
// frozen), so the checkpoint holds it and the program still finds it.
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

}  // namespace ckpt::tty
