// The connection locks (sockets/tcp_lock's FIB rules) of each cr_noded
// session, journaled in DIR/.locks-PID as they are added and removed, so
// that a session killed in the middle of a round (SIGKILL, OOM) does not
// leave the connections of its node's processes blackholed: the kernel
// releases the processes the session froze (they were only traced), but a
// rule in the network namespace outlives it. The daemon removes a dead
// session's rules when it reaps it, and at start (a daemon killed with its
// sessions) those of every session that no longer exists.
#pragma once

#include <string>

#include "sockets/tcp_lock.hpp"

namespace ckpt::nodes {

// In a session: journal this process's locks in DIR/.locks-<pid>.
void journal_locks(const std::string& dir);
// In a destination session (an incoming move): the connections it locks
// belong to an address that may arrive here (cr_job moves it once the
// source says SENT). A move that ends before COMMIT cannot tell whether the
// address is on its way: its locks stay, the journal too, and the daemon
// removes them `grace` seconds later unless the address is here by then
// (cr_job failed to move it back: they must hold, and match nothing once it
// leaves). The same for a destination session that is killed.
void journal_incoming();
// Whether `e`'s address is one of this network namespace's.
bool address_here(const sockets::Endpoint& e);
// In a session that ends by itself: its journal goes (whatever locks it left
// are meant to stay: a destination that holds an address keeps its locks).
void close_journal();
// Whether session `pid` still exists (a zombie does not count).
bool session_alive(int pid);
// In the daemon: for every journal in DIR whose session no longer exists,
// the rules it added and did not remove are removed, then the journal
// (an incoming one: see journal_incoming). Returns how many rules went.
int sweep_dead_sessions(const std::string& dir, double grace);

}  // namespace ckpt::nodes
