// In-memory model of one checkpoint generation: everything the metadata file
// holds. The byte layout on disk is in docs/format.md; this is what code uses.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "image/credentials.hpp"

namespace ckpt::image {

constexpr uint64_t kPageSize = 4096;

// VmaRecord::flags bits.
enum VmaFlag : uint32_t {
  kVmaShared = 1u << 0,     // MAP_SHARED
  kVmaFile = 1u << 1,       // backed by the file at `path`
  kVmaGrowsDown = 1u << 2,  // the main [stack]
  kVmaHeap = 1u << 3,       // [heap] (brk area)
  kVmaVdso = 1u << 4,       // [vdso]: not saved, the restored process's own vdso is moved here
  kVmaVvar = 1u << 5,       // [vvar] / [vvar_vclock]: never read, moved with the vdso
  kVmaMayWrite = 1u << 6,   // file opened for writing allowed (shared writable mappings)
  kVmaSysv = 1u << 7,       // a SysV shm attachment (with kVmaShared): ino = shmid, and
                            // dev, file_size, mtime_ns pack the segment (ipc/sysv_shm.hpp)
  kVmaDelShared = 1u << 8,  // MAP_SHARED of a file deleted since (UCX's /dev/shm segments):
                            // saved as shared memory, the file made again unlinked; dev, ino,
                            // file_size are the file's, name ends in " (deleted)"
};

// VmaRecord::advice bits: the madvise() state of a mapping, as the kernel
// shows it in smaps' VmFlags, given back at restore (docs/format.md, Vma).
enum VmaAdvice : uint32_t {
  kAdvHugePage = 1u << 0,    // MADV_HUGEPAGE (hg)
  kAdvNoHugePage = 1u << 1,  // MADV_NOHUGEPAGE (nh)
  kAdvDontFork = 1u << 2,    // MADV_DONTFORK (dc)
  kAdvWipeOnFork = 1u << 3,  // MADV_WIPEONFORK (wf)
  kAdvDontDump = 1u << 4,    // MADV_DONTDUMP (dd)
  kAdvMergeable = 1u << 5,   // MADV_MERGEABLE (mg)
  kAdvSequential = 1u << 6,  // MADV_SEQUENTIAL (sr)
  kAdvRandom = 1u << 7,      // MADV_RANDOM (rr)
  kAdvKnown = (1u << 8) - 1,
};

// The kernel object behind a shared mapping, to match mappings across members.
// Shared anonymous memory, SysV segments and files on each tmpfs number their
// objects independently (a fresh kernel's first SysV segment has id 0, and
// small inode numbers repeat), so the kind and the device are part of the key.
struct SharedObject {
  uint32_t kind = 0;  // kVmaSysv, kVmaDelShared, or 0: shared anonymous memory
  uint64_t dev = 0;   // st_dev of a deleted file; 0 otherwise
  uint64_t ino = 0;   // inode, or the SysV segment id
  auto operator<=>(const SharedObject&) const = default;
};
// At restore: each object -> the path a member opens to map it.
using SharedPaths = std::map<SharedObject, std::string>;

struct VmaRecord {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t prot = 0;   // PROT_READ | PROT_WRITE | PROT_EXEC
  uint32_t flags = 0;  // VmaFlag bits
  uint64_t pgoff = 0;  // file offset in bytes (file mappings)
  uint64_t dev = 0;    // st_dev of the mapped file (makedev form)
  uint64_t ino = 0;
  uint64_t file_size = 0;
  int64_t mtime_ns = 0;
  std::string name;     // file path, or a pseudo name such as "[heap]", "[stack]", "[vdso]", ""
  uint32_t advice = 0;  // VmaAdvice bits

  uint64_t size() const { return end - start; }
  bool is_file() const { return flags & kVmaFile; }
  bool is_special() const { return flags & (kVmaVdso | kVmaVvar); }
  // MAP_SHARED|MAP_ANONYMOUS memory: `ino` names the kernel object (0 in
  // images written before jobs), which several mappings and processes share.
  bool is_shared_anon() const { return (flags & kVmaShared) && !is_file() && !is_special(); }
  // The object a shared mapping shows, where the image names one.
  std::optional<SharedObject> shared_object() const {
    if (!is_shared_anon()) return std::nullopt;
    if (flags & kVmaSysv) return SharedObject{kVmaSysv, 0, ino};
    if (flags & kVmaDelShared) return SharedObject{kVmaDelShared, dev, ino};
    if (ino == 0) return std::nullopt;
    return SharedObject{0, 0, ino};
  }
};

// The mapping of `vmas` (sorted by address, disjoint) that holds the run
// [addr, addr + len), or nullptr.
inline const VmaRecord* vma_holding(const std::vector<VmaRecord>& vmas, uint64_t addr,
                                    uint64_t len) {
  auto v = std::upper_bound(vmas.begin(), vmas.end(), addr,
                            [](uint64_t a, const VmaRecord& r) { return a < r.end; });
  if (v == vmas.end() || addr < v->start || addr + len > v->end) return nullptr;
  return &*v;
}

// The mm fields the kernel keeps outside the VMAs (prctl PR_SET_MM_MAP).
struct MmRecord {
  uint64_t start_code = 0, end_code = 0, start_data = 0, end_data = 0;
  uint64_t start_brk = 0, brk = 0, start_stack = 0;
  uint64_t arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
  std::vector<uint64_t> auxv;  // (type, value) pairs, AT_NULL terminated
  std::string exe_path;
};

// x86_64 `struct user_regs_struct`, kept as 27 raw 64-bit words in kernel order.
constexpr size_t kGpRegWords = 27;

// A queued signal exactly as the kernel reports it (PTRACE_PEEKSIGINFO): a
// 128-byte siginfo_t.
using SigInfo = std::array<uint8_t, 128>;

// One seccomp BPF filter (PTRACE_SECCOMP_GET_FILTER) and its install flags.
struct SeccompFilter {
  uint64_t flags = 0;                 // SECCOMP_FILTER_FLAG_* (PTRACE_GET_SECCOMP_METADATA)
  std::vector<uint8_t> instructions;  // struct sock_filter[], 8 bytes each
};

struct ThreadRecord {
  int32_t tid = 0;
  int32_t pending_signal = 0;  // a signal caught at the freeze stop; delivered at resume
  std::array<uint64_t, kGpRegWords> gpregs{};
  std::vector<uint8_t> xstate;  // NT_X86_XSTATE regset as the kernel returned it
  // Restartable sequences registration (rseq_len 0: none).
  uint64_t rseq_ptr = 0;
  uint32_t rseq_len = 0;
  uint32_t rseq_sig = 0;
  uint64_t sigmask = 0;  // blocked signals (bit N-1 for signal N)
  // When the thread was frozen in a call the kernel continues through
  // restart_syscall (a relative sleep, poll...): that call's number and
  // instruction pointer, so the next checkpoint, which may find the thread
  // inside restart_syscall, knows what it is really waiting in.
  uint64_t restart_nr = 0;
  uint64_t restart_rip = 0;
  // sigaltstack (ss_flags SS_DISABLE: none).
  uint64_t altstack_sp = 0;
  uint64_t altstack_size = 0;
  uint32_t altstack_flags = 2;   // SS_DISABLE
  uint64_t clear_child_tid = 0;  // set_tid_address / CLONE_CHILD_CLEARTID
  uint64_t robust_list = 0;      // set_robust_list head and length
  uint64_t robust_len = 0;
  std::vector<SigInfo> pending;        // signals queued for this thread only
  std::vector<SeccompFilter> seccomp;  // oldest first (the order to install them)
};

// A signal disposition as the kernel stores it (struct kernel_sigaction).
struct SignalAction {
  uint32_t signo = 0;
  uint64_t handler = 0;  // SIG_IGN (1) or an address in the process
  uint64_t flags = 0;    // SA_*
  uint64_t restorer = 0;
  uint64_t mask = 0;
};

enum class FileKind : uint32_t {
  kRegular = 1,           // reopened by path with flags, at offset
  kInheritStdio = 2,      // a terminal or pipe on fd 0-2: connected to cr_restart's same fd
  kCharDevice = 3,        // /dev/null, /dev/zero, /dev/urandom...: reopened by path
  kDeleted = 4,           // a regular file deleted while open: recreated from `data`, then unlinked
  kPipe = 5,              // one end of a pipe (flags say which); ends pair by `ino`
  kFifo = 6,              // a named FIFO: reopened by path
  kEventfd = 7,           // params: kEventfd*
  kTimerfd = 8,           // params: kTimerfd*
  kSignalfd = 9,          // params: kSignalfdMask
  kEpoll = 10,            // params: (tfd, events, data) triples, the interest list
  kMemfd = 11,            // a memfd_create(2) file: recreated from `data`, params kDeleted* + seals
  kTcp = 12,              // a TCP socket (unbound, bound, listening or established): params kTcp*,
                          // `data` = receive queue then send queue (established only)
  kPtyMaster = 13,        // /dev/ptmx of a pty whose slave is in the job: params kPty*, `data` =
                          // output not yet read from it
  kPtySlave = 14,         // /dev/pts/N of such a pty: params kPty*
  kUnix = 15,             // a UNIX socket whose peer (if any) is in the job: params kUnix* and,
                          // per queued message, (length, sender name length); `data` = name, peer
                          // name, then each message's sender name and bytes (sockets/unix.hpp)
  kUdp = 16,              // a UDP socket (IPv4 or IPv6): params kUdp* and, per queued datagram,
                          // kUdpDgramWords words; `data` = the datagrams' bytes (sockets/udp.hpp)
  kPtyMasterQueued = 17,  // kPtyMaster whose pty holds what earlier readers would drop: input
                          // not read by the slave, or packet mode; `data` = output, then input
  kInotify = 18,          // an inotify instance: params (wd, mask, path length) per watch in wd
                          // order; `data` = the watched paths one after another (notify/)
};

// FileRecord::params, by kind.
enum : size_t {
  kPipeCapacity = 0,  // kPipe, kFifo: F_GETPIPE_SZ
  kPipeParams = 1,
  kEventfdCount = 0,      // kEventfd: the counter
  kEventfdSemaphore = 1,  // 1: EFD_SEMAPHORE
  kEventfdParams = 2,
  kTimerfdClock = 0,     // clockid
  kTimerfdSetFlags = 1,  // TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET of the last settime
  kTimerfdValueNs = 2,   // time left to the next expiry (0: disarmed)
  kTimerfdIntervalNs = 3,
  kTimerfdTicks = 4,       // expirations not read yet
  kTimerfdDeadlineNs = 5,  // the next expiry on the timer's own clock (absolute)
  kTimerfdParams = 6,
  kSignalfdMask = 0,  // kSignalfd: the signals it reads (bit N-1 = signal N)
  kSignalfdParams = 1,
  kDeletedMode = 0,  // kDeleted, kMemfd: permission bits
  kDeletedUid = 1,
  kDeletedGid = 2,
  kDeletedParams = 3,
  kMemfdSeals = 3,  // kMemfd: F_GET_SEALS
  kMemfdParams = 4,
  // kTcp. Addresses: the 16 bytes of an in6_addr (IPv4: the in_addr, then
  // zeros) as two little-endian words; ports in host order.
  kTcpFamily = 0,  // AF_INET or AF_INET6
  kTcpState = 1,   // TCP_ESTABLISHED, TCP_LISTEN or TCP_CLOSE (unconnected)
  kTcpLocalPort = 2,
  kTcpLocalAddr = 3,  // and 4
  kTcpPeerPort = 5,
  kTcpPeerAddr = 6,   // and 7
  kTcpBacklog = 8,    // listening: the listen(2) backlog
  kTcpOptions = 9,    // kTcpOpt* bits
  kTcpKeepIdle = 10,  // TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT
  kTcpKeepIntvl = 11,
  kTcpKeepCnt = 12,
  kTcpLinger = 13,      // SO_LINGER seconds + 1 when on, 0 when off
  kTcpRecvQueue = 14,   // established: bytes of the receive queue in `data`
  kTcpSendQueue = 15,   // bytes of the send queue after them
  kTcpSendUnsent = 16,  // of which not yet sent
  kTcpSendSeq = 17,     // write_seq: the sequence number after the send queue
  kTcpRecvSeq = 18,     // rcv_nxt: after the receive queue
  kTcpMss = 19,
  kTcpSndWscale = 20,  // window scales, when negotiated (kTcpOptWscale)
  kTcpRcvWscale = 21,
  kTcpTimestamp = 22,  // TCP_TIMESTAMP: the socket's timestamp clock
  kTcpWindow = 23,     // struct tcp_repair_window: snd_wl1, snd_wnd, max_window, rcv_wnd,
                       // rcv_wup (five words)
  kTcpParams = 28,
  // kPtyMaster, kPtySlave: the slave's termios and the window size.
  kPtyIndex = 0,  // N of /dev/pts/N at checkpoint time
  kPtyIflag = 1,
  kPtyOflag = 2,
  kPtyCflag = 3,
  kPtyLflag = 4,
  kPtyLine = 5,
  kPtyCc = 6,             // c_cc[32], four words
  kPtyWinsize = 10,       // rows | cols << 16 | xpixel << 32 | ypixel << 48
  kPtyLocked = 11,        // 1: the slave is locked (TIOCSPTLCK)
  kPtyParamsV1 = 12,      // records written before the words below end here
  kPtySession = 12,       // the session it is the controlling terminal of (0: none)
  kPtyForeground = 13,    // that session's foreground process group (TIOCGPGRP)
  kPtyPacket = 14,        // 1: packet mode (TIOCPKT) on the master
  kPtyPacketStatus = 15,  // packet mode: the status byte not yet read by the master
  kPtyOutputLen = 16,     // bytes of `data` that are output not read by the master
  kPtyParams = 17,        // then one word per input segment: length | kind << 32 (tty/pty.hpp)
  // kUnix (sockets/unix.hpp).
  kUnixType = 0,      // SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET
  kUnixState = 1,     // kUnixListening, kUnixConnected, kUnixUnconnected, kUnixPeerClosed
  kUnixPeer = 2,      // the peer's inode (connected)
  kUnixBacklog = 3,   // listening: the listen(2) backlog
  kUnixShutdown = 4,  // its own shutdown bits (1 receive, 2 send)
  kUnixOptions = 5,   // kUnixOpt* bits
  kUnixPeekOff = 6,   // SO_PEEK_OFF + 1 (0: off)
  kUnixSndBuf = 7,    // SO_SNDBUF, SO_RCVBUF as getsockopt reports them
  kUnixRcvBuf = 8,
  kUnixNameLen = 9,       // bytes of its name at the start of `data` (abstract: leading NUL)
  kUnixPeerNameLen = 10,  // bytes of its peer's name after it
  kUnixFileMode = 11,     // a path name: the socket file's mode (0: no file), owner and group
  kUnixFileUid = 12,
  kUnixFileGid = 13,
  kUnixParams = 14,
  // kUdp (sockets/udp.hpp). Addresses as kTcp's.
  kUdpFamily = 0,  // AF_INET or AF_INET6
  kUdpLocalPort = 1,
  kUdpLocalAddr = 2,  // and 3
  kUdpPeerPort = 4,   // connected: the peer (0: not connected)
  kUdpPeerAddr = 5,   // and 6
  kUdpOptions = 7,    // kUdpOpt* bits
  kUdpSndBuf = 8,     // SO_SNDBUF, SO_RCVBUF as getsockopt reports them
  kUdpRcvBuf = 9,
  kUdpTos = 10,         // IP_TOS or IPV6_TCLASS
  kUdpTtl = 11,         // IP_TTL or IPV6_UNICAST_HOPS (0: the default)
  kUdpPeekOff = 12,     // SO_PEEK_OFF + 1 (0: off)
  kUdpRcvTimeoUs = 13,  // SO_RCVTIMEO, SO_SNDTIMEO in microseconds (0: none)
  kUdpSndTimeoUs = 14,
  kUdpParams = 15,
  // Then per queued datagram, oldest first: its length, the sender's port
  // and address (two words), the address it was sent to (two words: the
  // receiver's own address, as IP_PKTINFO/IPV6_PKTINFO said), and the
  // sender's family.
  kUdpDgramLen = 0,
  kUdpDgramFromPort = 1,
  kUdpDgramFromAddr = 2,
  kUdpDgramToAddr = 4,
  kUdpDgramFamily = 6,
  kUdpDgramWords = 7,
};

// kUnixState values.
enum : uint64_t {
  kUnixListening = 1,
  kUnixConnected = 2,
  kUnixUnconnected = 3,
  kUnixPeerClosed = 4
};
// kUnixOptions bits.
enum : uint64_t { kUnixOptPassCred = 1 << 0, kUnixOptPassSec = 1 << 1 };

// kUdpOptions bits.
enum : uint64_t {
  kUdpOptReuseAddr = 1 << 0,
  kUdpOptReusePort = 1 << 1,
  kUdpOptBroadcast = 1 << 2,
  kUdpOptV6Only = 1 << 3,
  kUdpOptPktInfo = 1 << 4,  // IP_PKTINFO or IPV6_RECVPKTINFO
  kUdpOptRecvErr = 1 << 5,  // IP_RECVERR or IPV6_RECVERR
};

// kTcpOptions bits.
enum : uint64_t {
  kTcpOptReuseAddr = 1 << 0,
  kTcpOptReusePort = 1 << 1,
  kTcpOptKeepAlive = 1 << 2,
  kTcpOptNoDelay = 1 << 3,
  kTcpOptV6Only = 1 << 4,
  kTcpOptCork = 1 << 5,
  kTcpOptOutside = 1 << 6,     // established, its peer not in the job (--tcp-established)
  kTcpOptTimestamps = 1 << 8,  // negotiated on the connection (TCPI_OPT_*)
  kTcpOptSack = 1 << 9,
  kTcpOptWscale = 1 << 10,
};

// A lock an open file holds, as /proc/PID/fdinfo/N's "lock:" lines show it
// (docs/state.md, "File locks").
enum class LockKind : uint32_t {
  kFlock = 1,  // flock(2): belongs to the open file description
  kPosix = 2,  // fcntl F_SETLK: belongs to the process (its fd table)
  kOfd = 3,    // fcntl F_OFD_SETLK: belongs to the open file description
};
constexpr uint64_t kLockToEof = ~0ull;  // FileLock::end of a lock that runs to end of file

struct FileLock {
  LockKind kind = LockKind::kFlock;
  uint32_t type = 0;          // F_RDLCK or F_WRLCK
  uint64_t start = 0;         // first byte (flock: 0)
  uint64_t end = kLockToEof;  // last byte, inclusive
  int32_t pid = 0;            // the holder /proc named (OFD locks: -1)
};

// Who gets the signals of signal-driven I/O (O_ASYNC) and which signal:
// F_GETOWN_EX and F_GETSIG of the open file description.
struct FileOwner {
  int32_t type = 0;   // F_OWNER_TID (0), F_OWNER_PID (1) or F_OWNER_PGRP (2)
  int32_t pid = 0;    // 0: no owner
  int32_t signo = 0;  // 0: SIGIO
  bool set() const { return pid != 0 || signo != 0; }
};

struct FileRecord {
  int32_t fd = -1;
  FileKind kind = FileKind::kRegular;
  uint32_t flags = 0;     // open(2) flags from fdinfo
  uint32_t fd_flags = 0;  // FD_CLOEXEC
  uint64_t offset = 0;
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  std::string path;  // link target; kDeleted: the name it had, without " (deleted)"
  // Appended fields (format.md, File record):
  int32_t dup_of = -1;           // an earlier fd sharing this open file description (dup)
  std::vector<uint64_t> params;  // kind-specific numbers (see the enum above)
  std::vector<uint8_t> data;     // kDeleted/kMemfd: the file's content; kPipe/kFifo: unread bytes
                                 // (on the first fd of a file only)
  // The second appended block: locks held through this fd, and its owner.
  std::vector<FileLock> locks;
  FileOwner owner;

  bool has_second() const { return !locks.empty() || owner.set(); }
  bool has_appended() const {
    return dup_of != -1 || !params.empty() || !data.empty() || has_second();
  }
};

struct ProcessRecord {
  int32_t pid = 0;
  uint32_t umask = 022;
  std::string comm;
  std::string cwd;
  std::vector<SignalAction> sigactions;  // every disposition that is not SIG_DFL
};

// An interval timer: setitimer(2) or a POSIX timer's setting, in ns.
struct TimerSetting {
  uint64_t interval_ns = 0;
  uint64_t value_ns = 0;  // time to the next expiry; 0: disarmed
};

// A timer_create(2) timer.
struct PosixTimer {
  int32_t id = 0;
  int32_t clock = 0;
  int32_t notify = 0;  // SIGEV_SIGNAL, SIGEV_NONE, SIGEV_THREAD_ID
  int32_t signo = 0;
  uint64_t value = 0;      // sigev_value
  int32_t notify_tid = 0;  // SIGEV_THREAD_ID: the thread
  TimerSetting setting;
};

// Process-wide state beyond memory, threads and files.
struct ProcessState {
  std::array<uint64_t, 32> rlimits{};  // (soft, hard) for RLIMIT 0..15; all zero: not saved
  bool has_rlimits = false;
  uint32_t personality = 0;
  int32_t dumpable = 1;
  int32_t pdeathsig = 0;
  bool no_new_privs = false;
  std::array<TimerSetting, 3> itimers{};  // ITIMER_REAL, _VIRTUAL, _PROF
  std::vector<SigInfo> pending;           // signals queued for the whole process
  std::vector<PosixTimer> timers;
};

struct VdsoRecord {
  uint64_t vdso_size = 0;
  uint64_t vdso_hash = 0;  // xxh3 of the vdso text: restore refuses a different kernel's vdso
};

// A span of addresses [start, end).
struct MemRange {
  uint64_t start = 0, end = 0;
};

// How a generation is bound to its chain (record 22, format version 2;
// image/chain_link). Absent (present = false) in version-1 images.
struct ChainLink {
  bool present = false;
  uint64_t generation = 0;
  std::array<uint8_t, 16> chain_id{};
  uint64_t parent_generation = 0;
  uint64_t parent_digest = 0;  // xxh3 of the parent's whole meta.img; 0 for a full
  uint64_t addr_digest = 0;    // xxh3 of this generation's whole addr.img
  // Appended field: whether the record binds the generation's job.img (absent
  // in images written before it), and the digest: xxh3 of the whole job.img,
  // 0 for a generation that has none.
  bool binds_job = false;
  uint64_t job_digest = 0;
};

// A file that may vanish with the job, which the process holds open or maps:
// on tmpfs (/dev/shm segments), or in a temporary directory on any file
// system (/tmp, /var/tmp, the job's TMPDIR: an MPI launcher's session
// directory, a compiler's temporary files). The node's end, a reboot or the
// launcher's cleanup removes them; their content is part of the job's state
// (record 26, docs/state.md "Files that vanish with the job"). Directories
// are the file's parents, listed before it: below the tmpfs mount, or below
// the temporary directory, which comes first with kScratchBase.
// ScratchFile::flags bits.
enum ScratchFlag : uint32_t {
  // S_IFREG held by several members: another member's record of the same
  // generation has the content; this one has none.
  kScratchContentElsewhere = 1u << 0,
  // S_IFDIR: a temporary directory the entries after it are below. It must
  // exist at restore; it is never made or changed there.
  kScratchBase = 1u << 1,
  // S_IFREG in a temporary directory on disk, larger than what was left of
  // the checkpoint's budget: not saved (`file_size` says how large), so
  // reopened by path; a restore that does not find it says why.
  kScratchNotSaved = 1u << 2,
  // S_IFREG in a temporary directory on disk that no member holds, owned by
  // the process's user and changed since it started (a compiler's temporary
  // file between two of its steps: its name is in the driver's memory only),
  // or one the process holds only through O_APPEND descriptors and does not
  // map shared (a log others append to too): made again at restore only
  // where it is missing, never overwritten.
  kScratchIfMissing = 1u << 3,
};

struct ScratchFile {
  std::string path;
  uint32_t type = 0;  // S_IFREG, S_IFIFO or S_IFDIR
  uint32_t mode = 0;  // permission bits
  uint32_t uid = 0, gid = 0;
  std::vector<uint8_t> data;  // S_IFREG: the whole content
  uint32_t flags = 0;         // ScratchFlag (appended field; absent: 0)
  uint64_t file_size = 0;     // kScratchNotSaved: its size (appended field; absent: 0)
};

struct ImageMeta {
  uint64_t generation = 0;
  uint64_t parent_generation = 0;  // 0: a full checkpoint
  std::array<uint8_t, 16> chain_id{};
  int64_t created_unix_ns = 0;
  std::string kernel_release;  // uname -r at checkpoint time
  ProcessRecord process;
  ProcessState state;
  MmRecord mm;
  VdsoRecord vdso;
  std::vector<VmaRecord> vmas;
  std::vector<ThreadRecord> threads;
  std::vector<FileRecord> files;
  // Incrementals: ranges this generation describes entirely (new or
  // untracked mappings saved whole): pages it holds no run for are empty
  // there. A full checkpoint describes everything.
  std::vector<MemRange> complete;
  // The dirty-page tracker of the chain, and what it keeps in the process
  // between checkpoints (pagemap-scan: its userfaultfd's number there).
  std::string tracker;
  int32_t tracker_fd = -1;
  // Per thread, in `threads` order (record 23); empty: an image written
  // before credentials were saved.
  std::vector<TaskCredentials> credentials;
  // Set by the writer at commit (the caller gives parent_digest); read back
  // from record 22.
  ChainLink link;
  std::vector<ScratchFile> scratch;  // record 26
};

// PageRun::flags bits.
enum RunFlag : uint32_t {
  kRunZero = 1u << 0,  // every page of the run is zero: no content bytes
  // The content is one zstd frame padded to whole pages (image/page_codec);
  // bits 16-31 hold how many pages it takes in the page file.
  kRunZstd = 1u << 1,
};
constexpr uint32_t kRunStoredShift = 16;

// One entry of the address file: `npages` pages from `vaddr`, whose content
// is at `content_offset` in the page file (unless kRunZero).
struct PageRun {
  uint64_t vaddr = 0;
  uint32_t npages = 0;
  uint32_t flags = 0;
  uint64_t content_offset = 0;
  uint64_t content_hash = 0;  // xxh3-64 of the run's content bytes (0 for zero runs)

  uint64_t bytes() const { return uint64_t(npages) * kPageSize; }
  bool zero() const { return flags & kRunZero; }
  bool compressed() const { return flags & kRunZstd; }
  // Pages the run takes in the page file (0 for zero runs).
  uint32_t stored_pages() const {
    return zero() ? 0 : compressed() ? flags >> kRunStoredShift : npages;
  }
  uint64_t stored_bytes() const { return uint64_t(stored_pages()) * kPageSize; }
};

// The content hash of one page of the process's state at a generation (the
// hash tracker's memory: a page whose hash changed was written).
struct PageHash {
  uint64_t vaddr = 0;
  uint64_t hash = 0;
};

}  // namespace ckpt::image
