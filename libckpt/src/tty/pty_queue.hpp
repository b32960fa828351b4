// Taking what a pty holds out of it and putting it back (pty.hpp's Queues),
// at checkpoint on the job's own pty and at restore on the new one.
//
// Output (slave -> master) is put back by writing it through the slave with
// output processing off. Input (master -> slave) has been through the line
// discipline already (echoed, erase and kill applied, CR mapped): it is put
// back with TIOCSTI, which runs the line discipline synchronously, under
// settings that store each byte as it is and end each line where it ended.
// TIOCSTI on a terminal that is not the caller's own needs CAP_SYS_ADMIN.
// A packet-mode status byte is made again by the events that set its bits
// (flushes, a flow change, a stop and start).
#pragma once

#include <termios.h>

#include <ckpt/result.hpp>
#include <string>

#include "tty/pty.hpp"

namespace ckpt::tty {

// Whether this process may put input back (TIOCSTI on a pty of its own).
bool can_inject_input();

// Refuses, before anything is taken, what take() could not give back: output
// stopped by flow control, input while can_inject_input() is false.
Status check_takeable(int master, int slave, const std::string& what);
// Empties the pty into `q`: the pending packet status (packet mode is left
// off until put()), the output, then the input; with `whole_lines`, a line
// being typed in canonical mode too (reading it makes it readable, so only
// when it can be put back).
Status take(int master, int slave, const termios& t, bool whole_lines, Queues* q,
            const std::string& what);
// Whether put() can make `q` again under the settings `t`; the refusal names
// what it could not.
Status check_puttable(const termios& t, const Queues& q, const std::string& what);
// Puts `q` into the empty pty (packet mode off), whose settings are `t`, and
// leaves `t` in place.
Status put(int master, int slave, const termios& t, const Queues& q, const std::string& what);

}  // namespace ckpt::tty
