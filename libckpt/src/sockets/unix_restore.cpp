// Recreating the UNIX sockets of a job (unix.hpp). All are made in the
// restorer before any member exists, so both ends of a connection are at
// hand: unnamed pairs come back as socketpair(2); a connection with a name
// through a listener of that name (the job's own, or a temporary one), since
// an accepted socket takes its listener's name. Queues are refilled only when
// every socket exists, each from the socket that had sent it.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <tuple>

#include "sockets/unix.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

socklen_t address(const std::string& name, sockaddr_un* a) {
  *a = {};
  a->sun_family = AF_UNIX;
  std::memcpy(a->sun_path, name.data(), std::min(name.size(), sizeof a->sun_path));
  return socklen_t(offsetof(sockaddr_un, sun_path) + name.size() + (name[0] == '\0' ? 0 : 1));
}

Result<UniqueFd> new_socket(int type, const std::string& what) {
  UniqueFd s(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!s.valid()) return sys_error(what + ": creating the socket");
  return s;
}

// Binds `name`. A socket file left by the killed job (nothing listens on it
// any more: a connect is refused) is replaced; a live one is an error.
Status bind_name(int sock, int type, const std::string& name, const FileRecord& f,
                 const std::string& what) {
  if (name.empty()) return {};
  if (name.size() >= sizeof(sockaddr_un::sun_path))
    return make_error(EBADMSG, what + ": UNIX record's name is too long");
  sockaddr_un a;
  socklen_t len = address(name, &a);
  const bool path = name[0] != '\0';
  for (int tries = 0;; ++tries) {
    if (::bind(sock, reinterpret_cast<sockaddr*>(&a), len) == 0) break;
    if (errno != EADDRINUSE || !path || tries > 0)
      return sys_error(what + ": binding " + printable(name));
    struct stat st;
    if (::lstat(name.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
      return make_error(EADDRINUSE,
                        what + ": binding " + name + ": the path exists and is not a socket");
    UniqueFd probe(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (probe.valid() && ::connect(probe.get(), reinterpret_cast<sockaddr*>(&a), len) == 0)
      return make_error(EADDRINUSE, what + ": binding " + name + ": a live socket has that name");
    if (errno != ECONNREFUSED)
      return make_error(EADDRINUSE, what + ": binding " + name +
                                        ": a socket of another type or in use has that name");
    if (::unlink(name.c_str()) != 0)
      return sys_error(what + ": removing the stale socket file " + name);
  }
  const auto& p = f.params;
  if (path && p[image::kUnixFileMode]) {
    if (::chown(name.c_str(), uid_t(p[image::kUnixFileUid]), gid_t(p[image::kUnixFileGid])) != 0 ||
        ::chmod(name.c_str(), mode_t(p[image::kUnixFileMode] & 07777)) != 0)
      return sys_error(what + ": owner and mode of " + name);
  }
  return {};
}

// A connected stream or seqpacket pair whose server end has `server` as its
// name: through the job's listener of that name or a temporary one.
Status named_pair(int type, const std::string& server, const std::string& client,
                  const FileRecord& f, UnixJob* job, const std::string& what, UniqueFd* s_end,
                  UniqueFd* c_end) {
  UniqueFd temp;
  int listener;
  if (auto it = job->listeners.find(server); it != job->listeners.end()) {
    listener = it->second;
  } else {
    CKPT_ASSIGN(temp, new_socket(type, what));
    FileRecord none = f;
    none.params[image::kUnixFileMode] = 0;
    CKPT_TRY(bind_name(temp.get(), type, server, none, what));
    if (::listen(temp.get(), 1) != 0)
      return sys_error(what + ": listening on " + printable(server));
    listener = temp.get();
  }
  CKPT_ASSIGN(*c_end, new_socket(type, what));
  CKPT_TRY(bind_name(c_end->get(), type, client, f, what));
  sockaddr_un a;
  socklen_t len = address(server, &a);
  if (::connect(c_end->get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return sys_error(what + ": connecting to " + printable(server));
  s_end->reset(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!s_end->valid()) return sys_error(what + ": accepting from " + printable(server));
  if (temp.valid()) {
    temp.reset();
    if (server[0] != '\0') ::unlink(server.c_str());  // the job's own listener binds it again
  }
  return {};
}

Status send_all(int fd, const std::vector<uint8_t>& data, const sockaddr_un* to, socklen_t to_len,
                const std::string& what) {
  size_t at = 0;
  while (at < data.size()) {
    ssize_t n = ::sendto(fd, data.data() + at, data.size() - at, MSG_DONTWAIT | MSG_NOSIGNAL,
                         reinterpret_cast<const sockaddr*>(to), to ? to_len : 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(what + ": refilling its receive queue");
    at += size_t(n);
  }
  return {};
}

Status set_int(int sock, int opt, int v, const std::string& what, const char* name) {
  if (::setsockopt(sock, SOL_SOCKET, opt, &v, sizeof v) != 0)
    return sys_error(what + ": setting " + name);
  return {};
}

// The socket `f` records: its fields, name, peer's name and receive queue
// (not yet its descriptor).
Result<UnixJob::Socket> parse_unix(const FileRecord& f, const std::string& what) {
  const auto& p = f.params;
  if (p.size() < image::kUnixParams || (p.size() - image::kUnixParams) % 2 != 0)
    return make_error(EBADMSG, what + ": UNIX record is malformed");
  UnixJob::Socket s;
  s.ino = f.ino;
  s.type = int(p[image::kUnixType]);
  s.state = p[image::kUnixState];
  s.peer = p[image::kUnixPeer];
  s.shutdown = p[image::kUnixShutdown];
  s.options = p[image::kUnixOptions];
  s.peek_off = p[image::kUnixPeekOff];
  if (s.type != SOCK_STREAM && s.type != SOCK_DGRAM && s.type != SOCK_SEQPACKET)
    return make_error(EBADMSG, what + ": UNIX record has an unknown type");
  // data: name, peer name, then (sender name, bytes) per message.
  uint64_t need = p[image::kUnixNameLen] + p[image::kUnixPeerNameLen];
  for (size_t i = image::kUnixParams; i < p.size(); i += 2) need += p[i] + p[i + 1];
  if (need != f.data.size() || p[image::kUnixNameLen] > 108 || p[image::kUnixPeerNameLen] > 108)
    return make_error(EBADMSG, what + ": UNIX record's lengths do not match its data");
  const char* d = reinterpret_cast<const char*>(f.data.data());
  s.name.assign(d, p[image::kUnixNameLen]);
  d += p[image::kUnixNameLen];
  s.peer_name.assign(d, p[image::kUnixPeerNameLen]);
  d += p[image::kUnixPeerNameLen];
  for (size_t i = image::kUnixParams; i < p.size(); i += 2) {
    UnixJob::Message m;
    m.sender.assign(d, p[i + 1]);
    d += p[i + 1];
    m.data.assign(d, d + p[i]);
    d += p[i];
    s.queue.push_back(std::move(m));
  }
  return s;
}

// A connected socket: the end made with its peer's, or a datagram socket
// connected by finish_unix, or one end of a new pair whose other end waits
// in job->ahead for its peer's record.
Result<UniqueFd> connected_socket(UnixJob::Socket* s, const FileRecord& f, UnixJob* job,
                                  const std::string& what) {
  const int type = s->type;
  UniqueFd sock;
  if (auto it = job->ahead.find(s->ino); it != job->ahead.end()) {
    sock = std::move(it->second);
    job->ahead.erase(it);
    return sock;
  }
  if (type == SOCK_DGRAM && !s->peer_name.empty()) {
    CKPT_ASSIGN(sock, new_socket(type, what));
    CKPT_TRY(bind_name(sock.get(), type, s->name, f, what));
    s->connect_later = true;  // its peer may not exist yet
    return sock;
  }
  UniqueFd other;
  if (type == SOCK_DGRAM || (s->name.empty() && s->peer_name.empty())) {
    int sv[2];
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0)
      return sys_error(what + ": socketpair");
    sock.reset(sv[0]);
    other.reset(sv[1]);
    CKPT_TRY(bind_name(sock.get(), type, s->name, f, what));
  } else if (!s->peer_name.empty()) {
    // The peer is the accepted end (it has its listener's name).
    CKPT_TRY(named_pair(type, s->peer_name, s->name, f, job, what, &other, &sock));
  } else {
    CKPT_TRY(named_pair(type, s->name, "", f, job, what, &sock, &other));
  }
  job->ahead[s->peer] = std::move(other);
  return sock;
}

// The socket of `s`, made in the state it was checkpointed in.
Result<UniqueFd> socket_in_state(UnixJob::Socket* s, const FileRecord& f, UnixJob* job,
                                 const std::string& what) {
  UniqueFd sock;
  const int type = s->type;
  if (s->state == image::kUnixListening) {
    CKPT_ASSIGN(sock, new_socket(type, what));
    CKPT_TRY(bind_name(sock.get(), type, s->name, f, what));
    if (::listen(sock.get(), int(f.params[image::kUnixBacklog])) != 0)
      return sys_error(what + ": listening on " + printable(s->name));
    job->listeners[s->name] = sock.get();
  } else if (s->state == image::kUnixUnconnected) {
    CKPT_ASSIGN(sock, new_socket(type, what));
    CKPT_TRY(bind_name(sock.get(), type, s->name, f, what));
  } else if (s->state == image::kUnixPeerClosed) {
    int sv[2];
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0)
      return sys_error(what + ": socketpair");
    sock.reset(sv[0]);
    s->closer = sv[1];
    job->closers.emplace_back(sv[1]);
  } else if (s->state == image::kUnixConnected) {
    CKPT_ASSIGN(sock, connected_socket(s, f, job, what));
  } else {
    return make_error(EBADMSG, what + ": UNIX record has an unknown state");
  }
  return sock;
}

// The buffer sizes and O_NONBLOCK of `f`, set on `fd`.
Status set_options(int fd, const FileRecord& f, const std::string& what) {
  const auto& p = f.params;
  // Buffer sizes before the refill: a sender's limits what it may have queued.
  for (auto [param, force, plain, name] :
       {std::tuple{image::kUnixSndBuf, SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF"},
        std::tuple{image::kUnixRcvBuf, SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF"}}) {
    const int v = int(p[param] / 2);  // getsockopt reports twice what was set
    if (v > 0 && ::setsockopt(fd, SOL_SOCKET, force, &v, sizeof v) != 0)
      CKPT_TRY(set_int(fd, plain, v, what, name));
  }
  if ((f.flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
    return sys_error(what + ": setting O_NONBLOCK");
  return {};
}

}  // namespace

Result<UniqueFd> restore_unix(const FileRecord& f, const std::string& what, UnixJob* job) {
  CKPT_ASSIGN(UnixJob::Socket s, parse_unix(f, what));
  CKPT_ASSIGN(UniqueFd sock, socket_in_state(&s, f, job, what));
  if (s.type == SOCK_DGRAM && !s.name.empty()) job->dgrams[s.name] = sock.get();
  const int fd = sock.get();
  CKPT_TRY(set_options(fd, f, what));
  s.fd = fd;
  job->sockets.push_back(std::move(s));
  return sock;
}

Status finish_unix(UnixJob* job) {
  std::map<uint64_t, int> by_ino;
  for (const auto& s : job->sockets) by_ino[s.ino] = s.fd;
  for (const auto& s : job->sockets)
    if (s.connect_later) {
      sockaddr_un a;
      socklen_t len = address(s.peer_name, &a);
      if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
        return sys_error("UNIX datagram socket " + printable(s.name) + ": connecting to " +
                         printable(s.peer_name));
    }
  UniqueFd helper;  // sends what an unnamed socket, or one no longer there, had sent
  for (const auto& s : job->sockets) {
    const std::string what = std::string("UNIX socket ") + printable(s.name);
    for (const auto& m : s.queue) {
      sockaddr_un to;
      socklen_t to_len = 0;
      int from = -1;
      UniqueFd named_helper;
      if (s.state == image::kUnixPeerClosed) {
        from = s.closer;
      } else if (s.state == image::kUnixConnected) {
        auto it = by_ino.find(s.peer);
        if (it == by_ino.end()) return make_error(EBADMSG, what + ": its peer is not in the image");
        from = it->second;
        if (s.type == SOCK_DGRAM && !s.name.empty()) to_len = address(s.name, &to);
      } else if (s.type == SOCK_DGRAM && !s.name.empty()) {
        to_len = address(s.name, &to);
        if (auto it = job->dgrams.find(m.sender); !m.sender.empty() && it != job->dgrams.end()) {
          from = it->second;
        } else if (!m.sender.empty()) {
          // Its sender is gone: a stand-in with its name sends it.
          CKPT_ASSIGN(named_helper, new_socket(SOCK_DGRAM, what));
          FileRecord none;
          none.params.assign(image::kUnixParams, 0);
          CKPT_TRY(bind_name(named_helper.get(), SOCK_DGRAM, m.sender, none, what));
          from = named_helper.get();
        } else {
          if (!helper.valid()) {
            CKPT_ASSIGN(helper, new_socket(SOCK_DGRAM, what));
            int big = 64 << 20;
            ::setsockopt(helper.get(), SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
          }
          from = helper.get();
        }
      } else {
        return make_error(EBADMSG, what + ": queued data with no possible sender");
      }
      CKPT_TRY(send_all(from, m.data, to_len ? &to : nullptr, to_len, what));
      if (named_helper.valid() && m.sender[0] != '\0') {
        named_helper.reset();
        ::unlink(m.sender.c_str());
      }
    }
  }
  for (const auto& s : job->sockets) {
    const std::string what = std::string("UNIX socket ") + printable(s.name);
    if (s.options & image::kUnixOptPassCred)
      CKPT_TRY(set_int(s.fd, SO_PASSCRED, 1, what, "SO_PASSCRED"));
    if (s.options & image::kUnixOptPassSec)
      CKPT_TRY(set_int(s.fd, SO_PASSSEC, 1, what, "SO_PASSSEC"));
    if (s.peek_off)
      CKPT_TRY(set_int(s.fd, SO_PEEK_OFF, int(int64_t(s.peek_off) - 1), what, "SO_PEEK_OFF"));
    if ((s.shutdown & 1) && ::shutdown(s.fd, SHUT_RD) != 0) return sys_error(what + ": shutdown");
    if ((s.shutdown & 2) && ::shutdown(s.fd, SHUT_WR) != 0) return sys_error(what + ": shutdown");
  }
  job->closers.clear();  // the peers that had closed close now: end of file after the data
  job->ahead.clear();
  job->sockets.clear();
  return {};
}

}  // namespace ckpt::sockets
