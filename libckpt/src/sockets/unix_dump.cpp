// Saving a UNIX socket of a frozen member (unix.hpp). The socket's peer,
// state and shutdown bits are only visible through sock_diag; its queue is
// read with MSG_PEEK from an offset (SO_PEEK_OFF), which is put back as the
// program had it, so a job that keeps running sees nothing.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "sockets/peek.hpp"
#include "sockets/sock_diag.hpp"
#include "sockets/unix.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

constexpr size_t kMaxMessage = 1u << 20;  // above any UNIX socket's send buffer limit

struct Diag {
  int type = 0, state = 0;
  uint64_t peer = 0;
  uint32_t rqueue = 0;  // listening: connections not yet accepted
  uint32_t wqueue = 0;  // listening: its backlog
  int shutdown = 0;
};

// One socket's sock_diag record (by inode, in this tool's netns).
Status query_diag(uint64_t ino, const std::string& what, Diag* out) {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return sys_error(what + ": opening NETLINK_SOCK_DIAG");
  struct {
    nlmsghdr h;
    unix_diag_req r;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.r.sdiag_family = AF_UNIX;
  req.r.udiag_states = ~0u;
  req.r.udiag_ino = uint32_t(ino);
  req.r.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN | UDIAG_SHOW_NAME;
  req.r.udiag_cookie[0] = req.r.udiag_cookie[1] = ~0u;  // INET_DIAG_NOCOOKIE
  alignas(nlmsghdr) char buf[8192];
  const nlmsghdr* h = sock_diag_ask(nl.get(), &req, sizeof req, buf, sizeof buf);
  if (!h) return sys_error(what + ": querying sock_diag");
  if (h->nlmsg_type == NLMSG_ERROR) {
    int err = -reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
    return make_error(err ? err : EPROTO,
                      what +
                          ": sock_diag does not know the socket (UNIX socket diagnostics, "
                          "CONFIG_UNIX_DIAG, are needed): " +
                          std::strerror(err));
  }
  auto* m = reinterpret_cast<const unix_diag_msg*>(NLMSG_DATA(h));
  out->type = m->udiag_type;
  out->state = m->udiag_state;
  int len = int(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
  for (auto* a = reinterpret_cast<const rtattr*>(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == UNIX_DIAG_PEER) out->peer = *static_cast<uint32_t*>(RTA_DATA(a));
    if (a->rta_type == UNIX_DIAG_RQLEN) {
      out->rqueue = static_cast<unix_diag_rqlen*>(RTA_DATA(a))->udiag_rqueue;
      out->wqueue = static_cast<unix_diag_rqlen*>(RTA_DATA(a))->udiag_wqueue;
    }
    if (a->rta_type == UNIX_DIAG_SHUTDOWN) out->shutdown = *static_cast<uint8_t*>(RTA_DATA(a));
  }
  return {};
}

// A name as getsockname/getpeername/recvmsg give it (abstract: leading NUL).
std::string name_of(const sockaddr_un& a, socklen_t len) {
  if (len <= offsetof(sockaddr_un, sun_path)) return {};
  std::string s(a.sun_path, len - offsetof(sockaddr_un, sun_path));
  if (!s.empty() && s[0] != '\0') s.resize(std::strlen(s.c_str()));  // a path: up to its NUL
  return s;
}

const char* type_name(int type) {
  return type == SOCK_STREAM ? "stream" : type == SOCK_DGRAM ? "datagram" : "seqpacket";
}

// A receive queue: (sender's name, bytes) per message.
using Queue = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

// The receive queue, message by message (a stream's in the chunks the
// kernel returns), without consuming it.
Status peek_queue(int sock, int type, bool read_shut, const std::string& what, Queue* out) {
  CKPT_ASSIGN(const int saved_off, begin_peek(sock, what));
  std::vector<uint8_t> buf(kMaxMessage);
  Status s;
  for (;;) {
    sockaddr_un from{};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(64)];
    msghdr mh;
    ssize_t n = peek_message(sock, &buf, reinterpret_cast<sockaddr*>(&from), sizeof from, ctl,
                             sizeof ctl, MSG_CMSG_CLOEXEC, &mh);
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      s = sys_error(what + ": reading its receive queue");
      break;
    }
    bool fds = false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        // A peek installs the descriptors in this tool: close them.
        fds = true;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) ::close(reinterpret_cast<int*>(CMSG_DATA(c))[i]);
      }
    if (fds || (mh.msg_flags & MSG_CTRUNC)) {
      s = make_error(ENOTSUP, what +
                                  ": descriptors in flight (SCM_RIGHTS not yet received): "
                                  "not supported");
      break;
    }
    if (mh.msg_flags & MSG_TRUNC) {
      s = make_error(EFBIG, what + ": a queued message larger than 1 MiB");
      break;
    }
    if (n == 0) {
      // End of file (the peer shut its side down or closed): nothing more
      // is queued. A datagram socket has no end of file: an empty datagram.
      if (type == SOCK_STREAM || (type == SOCK_SEQPACKET && read_shut)) break;
      s = make_error(ENOTSUP, what + ": an empty message in its queue: not supported");
      break;
    }
    out->emplace_back(type == SOCK_STREAM ? std::string() : name_of(from, mh.msg_namelen),
                      std::vector<uint8_t>(buf.begin(), buf.begin() + n));
    if (out->size() > 100000) {
      s = make_error(EFBIG, what + ": more than 100000 queued messages");
      break;
    }
  }
  return end_peek(sock, saved_off, what, std::move(s));
}

// The state of the socket `d` describes, in `p`; a connected socket's peer
// name in *peer_name. Refused: states a restore cannot rebuild.
Status record_state(int sock, const Diag& d, const std::set<uint64_t>& job_sockets,
                    const std::string& desc, std::vector<uint64_t>& p, std::string* peer_name) {
  constexpr int kListen = 10, kEstablished = 1;  // TCP_LISTEN, TCP_ESTABLISHED
  if (d.state == kListen) {
    if (d.rqueue > 0)
      return make_error(ENOTSUP, desc + "): " + std::to_string(d.rqueue) +
                                     " connection(s) not yet accepted: not supported yet");
    p[image::kUnixState] = image::kUnixListening;
    p[image::kUnixBacklog] = d.wqueue;
  } else if (d.peer != 0 && job_sockets.count(d.peer)) {
    p[image::kUnixState] = image::kUnixConnected;
    p[image::kUnixPeer] = d.peer;
    sockaddr_un a{};
    socklen_t len = sizeof a;
    if (::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      *peer_name = name_of(a, len);
  } else if (d.type != SOCK_DGRAM && d.state == kEstablished && (d.peer == 0 || d.shutdown == 3)) {
    // Its peer was closed: what is left to read stays, then end of file.
    p[image::kUnixState] = image::kUnixPeerClosed;
  } else if (d.peer != 0) {
    return make_error(ENOTSUP, desc + " -> peer inode " + std::to_string(d.peer) +
                                   "): its peer is not in the job: checkpoint the whole job "
                                   "(--tree of a common ancestor)");
  } else {
    p[image::kUnixState] = image::kUnixUnconnected;
  }
  return {};
}

// The socket's options and buffer sizes, and the owner and mode of the file
// of a socket bound by path, in `p`.
void record_options(int sock, const std::string& name, std::vector<uint64_t>& p) {
  if (sockopt_int(sock, SOL_SOCKET, SO_PASSCRED)) p[image::kUnixOptions] |= image::kUnixOptPassCred;
  if (sockopt_int(sock, SOL_SOCKET, SO_PASSSEC)) p[image::kUnixOptions] |= image::kUnixOptPassSec;
  p[image::kUnixPeekOff] = uint64_t(int64_t(sockopt_int(sock, SOL_SOCKET, SO_PEEK_OFF)) + 1);
  p[image::kUnixSndBuf] = uint64_t(sockopt_int(sock, SOL_SOCKET, SO_SNDBUF));
  p[image::kUnixRcvBuf] = uint64_t(sockopt_int(sock, SOL_SOCKET, SO_RCVBUF));
  if (!name.empty() && name[0] == '/') {
    struct stat st;
    if (::lstat(name.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      // S_IFSOCK kept in the word, so a file of mode 0 is still "a file".
      p[image::kUnixFileMode] = st.st_mode & (S_IFMT | 07777);
      p[image::kUnixFileUid] = st.st_uid;
      p[image::kUnixFileGid] = st.st_gid;
    }
  }
}

// Who sends each datagram again at restore: the peer of a connected
// socket, else the socket with the sender's name (or an unnamed one).
// Refused: datagrams no socket of the job can send again.
Status check_senders(const Queue& queue, int type, bool connected, const std::string& name,
                     const std::string& peer_name, const std::string& desc) {
  for (const auto& [sender, bytes] : queue) {
    if (type == SOCK_DGRAM && connected && sender != peer_name)
      return make_error(ENOTSUP, desc + "): a queued datagram from " + printable(sender) +
                                     ", not from its peer: not supported");
    if (type == SOCK_DGRAM && !connected && name.empty())
      return make_error(ENOTSUP, desc +
                                     "): queued datagrams on an unnamed, unconnected socket: "
                                     "not supported");
  }
  return {};
}

// The names and the queue into f's data: name, peer name, then (sender
// name, bytes) per message, their lengths in f->params.
void record_data(const std::string& name, const std::string& peer_name, const Queue& queue,
                 int type, FileRecord* f) {
  auto& p = f->params;
  p[image::kUnixNameLen] = name.size();
  p[image::kUnixPeerNameLen] = peer_name.size();
  f->data.assign(name.begin(), name.end());
  f->data.insert(f->data.end(), peer_name.begin(), peer_name.end());
  for (const auto& [sender, bytes] : queue) {
    const std::string& s = type == SOCK_DGRAM ? sender : std::string();
    p.push_back(bytes.size());
    p.push_back(s.size());
    f->data.insert(f->data.end(), s.begin(), s.end());
    f->data.insert(f->data.end(), bytes.begin(), bytes.end());
  }
}

}  // namespace

Status collect_unix(int sock, uint64_t ino, const std::set<uint64_t>& job_sockets,
                    const std::string& what, FileRecord* f) {
  Diag d;
  CKPT_TRY(query_diag(ino, what, &d));
  f->kind = image::FileKind::kUnix;
  f->params.assign(image::kUnixParams, 0);
  auto& p = f->params;
  sockaddr_un a{};
  socklen_t len = sizeof a;
  if (::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return sys_error(what + ": reading its name");
  const std::string name = name_of(a, len);
  std::string peer_name;
  const std::string desc = what + " (UNIX " + type_name(d.type) + " socket " + printable(name);
  if (!name.empty() && name[0] != '\0' && name[0] != '/')
    return make_error(ENOTSUP, desc + "): bound by a relative path: not supported");

  p[image::kUnixType] = uint64_t(d.type);
  p[image::kUnixShutdown] = uint64_t(d.shutdown);
  CKPT_TRY(record_state(sock, d, job_sockets, desc, p, &peer_name));
  record_options(sock, name, p);

  Queue queue;
  if (p[image::kUnixState] != image::kUnixListening)
    CKPT_TRY(peek_queue(sock, d.type, d.shutdown & 1, desc + ")", &queue));
  const bool connected = p[image::kUnixState] == image::kUnixConnected;
  CKPT_TRY(check_senders(queue, d.type, connected, name, peer_name, desc));
  record_data(name, peer_name, queue, d.type, f);
  f->path = "UNIX " + std::string(type_name(d.type)) + " " + printable(name) +
            (connected ? " -> " + printable(peer_name) : "");
  return {};
}

}  // namespace ckpt::sockets
