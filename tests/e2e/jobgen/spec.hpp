// A generated job: its processes, the channels between them, the memory they
// write and the other kernel objects they hold, all drawn from one seed
// (draw.cpp). Every process of the job knows the whole spec, so each one
// can tell which descriptors it must create, keep, move or close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace jobgen {

// How two members talk. Every channel carries one message each way per step
// (a lockstep that bounds what is in flight, so no datagram is ever dropped
// and no writer blocks for good; lockstep.md in the driver's comments).
enum class Kind {
  kPipe,           // two pipes, made by the common ancestor before it forks
  kFifo,           // two named FIFOs in the work directory
  kUnixStream,     // socketpair(AF_UNIX, SOCK_STREAM)
  kUnixDgram,      // socketpair(AF_UNIX, SOCK_DGRAM)
  kUnixSeqpacket,  // socketpair(AF_UNIX, SOCK_SEQPACKET)
  kUnixNamed,      // a listener on a path, connected and accepted (stream or seqpacket)
  kUnixAbstract,   // a listener on an abstract name
  kTcp4,           // a loopback listener, connected and accepted
  kTcp6,           // the same on ::1
  kUdp,            // two bound UDP sockets on loopback, connected or addressed per datagram
  kEventfd,        // two semaphore eventfds
  kPty,            // a pty in raw mode: master on side a, slave on side b
};
const char* kind_name(Kind k);
bool is_datagram(Kind k);   // one message is one datagram (or one eventfd count)
bool is_inherited(Kind k);  // made by the common ancestor before it forks
bool has_listener(Kind k);  // side a accepts side b's connection

// One side's descriptors. Bidirectional kinds use one fd for both ways.
struct Side {
  int rd = -1, wr = -1;   // their numbers in the process
  int dup = -1;           // a dup of wr at this number, used on odd steps (-1: none)
  bool cloexec = false;   // FD_CLOEXEC on rd and wr
  bool nonblock = false;  // O_NONBLOCK on rd (reads wait in poll)
};

struct Channel {
  int id = 0;
  Kind kind = Kind::kPipe;
  int a = 0, b = 0;  // member indexes; for listeners, a listens
  int creator = 0;   // inherited kinds: the common ancestor that makes it
  size_t msg = 0;    // bytes per message
  Side sa, sb;
  int service = -1;        // the listener it is accepted from (has_listener)
  bool seqpacket = false;  // kUnixNamed/kUnixAbstract: SOCK_SEQPACKET instead of stream
  bool udp_connected = false;
  uint16_t port_a = 0, port_b = 0;  // kUdp: both bound; kTcp: port_b (if set) binds the client
};

// A listening socket that one or more channels are accepted from.
struct Service {
  int id = 0;
  Kind kind = Kind::kTcp4;
  int owner = 0;
  int fd = -1;         // the listener's number
  bool keep = true;    // still open after its connections were accepted
  bool reuse = false;  // SO_REUSEADDR
  bool seqpacket = false;
  uint16_t port = 0;
  std::vector<int> channels;
};

enum class Pattern { kBand, kSparse, kStream, kSweep, kPhase, kQuiet };
const char* pattern_name(Pattern p);

enum class Backing { kPrivate, kSharedAnon, kMemfd, kSysv, kShmFile };
const char* backing_name(Backing b);

// Memory written in a pattern. A shared region is cut into one slice per
// user, each written only by its user; the creator (the users' common
// ancestor) checks every slice once its children are gone.
struct Region {
  int id = 0;
  Backing backing = Backing::kPrivate;
  int creator = 0;
  std::vector<int> users;         // members (a thread of the creator: user -1)
  std::vector<Pattern> patterns;  // one per user
  size_t slice_pages = 0;
  int fd = -1;             // kMemfd/kShmFile: the creator keeps this fd (-1: closed after mapping)
  bool by_thread = false;  // private region written by the member's second thread
};

// A regular file opened before a fork: one open file description (one
// offset) that the creator and a writer below it share; the writer appends
// a record per step through it.
struct SharedFile {
  int id = 0;
  int creator = 0, writer = 0;
  int fd = -1;
  size_t record = 0;
};

// What a checkpoint must refuse (drawn rarely): the job goes on unharmed.
enum class Refusal { kNone, kInFlight, kOutsidePeer };

struct Member {
  int index = 0;
  int parent = -1;
  std::vector<int> children;
  int depth = 0;
  bool new_pgrp = false, new_session = false;
  int join_pgrp_of = -1;  // an earlier sibling whose process group it joins
  int zombie_exit = -1;   // a child that exits with this code and stays unreaped
  bool thread = false;    // a second thread writing a region in lockstep
  int epoll_fd = -1;      // an epoll set of its incoming descriptors
  int timerfd = -1, signalfd = -1;
  int rt_signal_step = -1;         // step at which it sigqueues its parent
  bool rt_handler_restart = true;  // SA_RESTART on the handler of its children's signals
  unsigned pace_us = 0;            // sleep per step
  // An interval timer (ITIMER_REAL) whose SIGALRM a handler counts, armed
  // once set-up is over (0: none): signals land at any instant, the
  // checkpoints' freezes included.
  unsigned tick_us = 0;
  Refusal refusal = Refusal::kNone;
  int refusal_step = 0;
  int refusal_fds[2] = {-1, -1};
};

// How the driver checkpoints this job (tests/e2e/jobgen.sh).
struct Plan {
  int full_delay_ms = 0;
  bool full_live = false;
  std::vector<int> incr_delay_ms;
  std::vector<bool> incr_live;
  bool compress = false;
  int kill_delay_ms = 0;
  bool kill_by_tool = false;    // the last checkpoint runs with --kill
  int restore_generation = -1;  // restore an older generation (-1: the newest)
  unsigned tracker_pick = 0;    // index into the trackers this kernel has
};

struct Job {
  uint64_t seed = 0;
  int steps = 0;
  std::vector<Member> members;
  std::vector<Channel> channels;
  std::vector<Service> services;
  std::vector<Region> regions;
  std::vector<SharedFile> files;
  int ctl_up[2] = {-1, -1};   // members -> root: set up
  int ctl_go[2] = {-1, -1};   // root -> members: start the steps
  int ctl_fin[2] = {-1, -1};  // root -> members: finish (the driver said so)
  Plan plan;
  bool expects_refusal() const;
};

Job draw(uint64_t seed);
std::string describe(const Job& job);   // a readable summary, for a failing seed
int lca(const Job& job, int x, int y);  // lowest common ancestor
bool in_subtree(const Job& job, int root, int x);

}  // namespace jobgen
