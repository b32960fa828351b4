// UDP records and epoll registrations shared by job members, restored in
// this process (restore/files, sockets/udp_restore).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "restore/files.hpp"
#include "sockets/address.hpp"

namespace ckpt::restore {
namespace {

using image::FileKind;
using image::FileRecord;
using image::ImageMeta;

int source_of(const PreparedFiles& p, int target) {
  for (const PreparedFile& f : p.fds)
    if (f.target == target) return f.source;
  return -1;
}

sockets::Endpoint loopback(uint16_t port) {
  sockets::Endpoint e;
  e.family = AF_INET;
  e.addr[0] = 127, e.addr[3] = 1;
  e.port = port;
  return e;
}

// A free loopback port (bound and released).
uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof a;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l);
  ::close(s);
  return ntohs(a.sin_port);
}

// A UDP record bound to `me` with datagrams from `from`, in order.
FileRecord udp_record(int fd, const sockets::Endpoint& me, const sockets::Endpoint& from,
                      const std::vector<std::string>& datagrams) {
  FileRecord f;
  f.fd = fd;
  f.kind = FileKind::kUdp;
  f.path = "UDP test";
  f.params.assign(image::kUdpParams, 0);
  f.params[image::kUdpFamily] = AF_INET;
  sockets::store_endpoint(me, &f.params[image::kUdpLocalPort]);
  for (const std::string& d : datagrams) {
    const size_t at = f.params.size();
    f.params.resize(at + image::kUdpDgramWords, 0);
    f.params[at + image::kUdpDgramLen] = d.size();
    sockets::store_endpoint(from, &f.params[at + image::kUdpDgramFromPort]);
    uint64_t to[3];
    sockets::store_endpoint(me, to);
    f.params[at + image::kUdpDgramToAddr] = to[1];
    f.params[at + image::kUdpDgramToAddr + 1] = to[2];
    f.params[at + image::kUdpDgramFamily] = AF_INET;
    f.data.insert(f.data.end(), d.begin(), d.end());
  }
  return f;
}

TEST(udp_files, QueueComesBackFromItsSenderWithItsBoundaries) {
  const sockets::Endpoint me = loopback(free_port()), sender = loopback(free_port());
  ImageMeta m;
  m.files = {udp_record(3, me, sender, {"first", "", "third datagram"})};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const int s = source_of(p, 3);
  ASSERT_GE(s, 0);
  sockaddr_storage a{};
  socklen_t l = sizeof a;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l), 0);
  EXPECT_TRUE(sockets::endpoint_of(a) == me);
  for (const std::string want : {"first", "", "third datagram"}) {
    char buf[64];
    sockaddr_storage from{};
    socklen_t fl = sizeof from;
    ssize_t n =
        ::recvfrom(s, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
    ASSERT_EQ(n, ssize_t(want.size())) << "datagram \"" << want << "\"";
    EXPECT_EQ(std::string(buf, size_t(n)), want);
    EXPECT_TRUE(sockets::endpoint_of(from) == sender);
  }
  char b;
  EXPECT_LT(::recv(s, &b, 1, MSG_DONTWAIT), 0) << "more datagrams than the image held";
}

TEST(udp_files, MalformedRecordsAreRefused) {
  FileRecord f = udp_record(3, loopback(free_port()), loopback(free_port()), {"abc"});
  f.data.push_back('x');  // one byte more than the datagrams
  ImageMeta m;
  m.files = {f};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "fd 3: UDP test: UDP record's lengths do not match its data");
  f.params.push_back(1);  // not a whole datagram entry
  m.files = {f};
  PreparedFiles q;
  st = prepare_files(m, &q);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "fd 3: UDP test: UDP record is malformed");
}

// Two members share an epoll and an eventfd: the first registered the
// eventfd at its fd 4, the second lists the same registration (its fd 4 is
// the same file) and one of its own pipe at fd 7. Each registration is made
// once, by a member whose fd numbers name the file.
TEST(udp_files, SharedEpollRegistrationsAreMadeOnce) {
  FileRecord ev;
  ev.fd = 4;
  ev.kind = FileKind::kEventfd;
  ev.params = {0, 0};
  FileRecord ep;
  ep.fd = 3;
  ep.kind = FileKind::kEpoll;
  ep.params = {4, 1, 0x22};
  ImageMeta a;
  a.process.pid = 100;
  a.files = {ep, ev};
  FileRecord pipe_r;
  pipe_r.fd = 7;
  pipe_r.kind = FileKind::kPipe;
  pipe_r.ino = 555;
  pipe_r.params = {65536};
  ImageMeta b;
  b.process.pid = 101;
  FileRecord ep_b = ep;
  ep_b.params = {4, 1, 0x22, 7, 1, 0x33};
  b.files = {ep_b, ev, pipe_r};
  SharedFiles shared;
  shared.share_of[{101, 3}] = {100, 3};
  shared.share_of[{101, 4}] = {100, 4};
  PreparedFiles pa, pb;
  Status st = prepare_files(a, &pa, &shared);
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = prepare_files(b, &pb, &shared);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(pa.epoll.size(), 1u);
  EXPECT_EQ(pa.epoll[0].tfd, 4);
  ASSERT_EQ(pb.epoll.size(), 1u) << "the eventfd's registration must not be made twice";
  EXPECT_EQ(pb.epoll[0].tfd, 7);
  EXPECT_EQ(pb.epoll[0].data, 0x33u);
  EXPECT_EQ(source_of(pa, 3), source_of(pb, 3)) << "one epoll for both";
  EXPECT_EQ(source_of(pa, 4), source_of(pb, 4)) << "one eventfd for both";
  EXPECT_TRUE(finish_files(&shared).ok());
}

}  // namespace
}  // namespace ckpt::restore
