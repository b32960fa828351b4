// Shared memory objects of a job are matched across members by kind, device
// and inode (image::SharedObject): shared anonymous memory, SysV segment ids
// and tmpfs inodes are numbered independently, and on a fresh kernel they
// are small and collide (the first SysV segment has id 0).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cstring>

#include "dump/collect.hpp"
#include "proc/maps.hpp"
#include "restore/shared_memory.hpp"

namespace ckpt {
namespace {

image::VmaRecord shared_vma(uint32_t kind, uint64_t ino, uint64_t dev = 0) {
  image::VmaRecord v;
  v.start = 0x10000 + ino * 0x1000;
  v.end = v.start + 0x1000;
  v.flags = image::kVmaShared | kind;
  v.ino = ino;
  v.dev = dev;
  return v;
}

TEST(SharedObject, KindAndDeviceArePartOfTheKey) {
  const auto sysv0 = shared_vma(image::kVmaSysv, 0).shared_object();
  ASSERT_TRUE(sysv0.has_value()) << "SysV id 0 is a segment";
  const auto anon5 = shared_vma(0, 5).shared_object();
  const auto sysv5 = shared_vma(image::kVmaSysv, 5).shared_object();
  const auto del5a = shared_vma(image::kVmaDelShared, 5, 0x1a).shared_object();
  const auto del5b = shared_vma(image::kVmaDelShared, 5, 0x1b).shared_object();
  ASSERT_TRUE(anon5 && sysv5 && del5a && del5b);
  EXPECT_NE(*anon5, *sysv5);
  EXPECT_NE(*anon5, *del5a);
  EXPECT_NE(*del5a, *del5b);
  // Shared anonymous memory of images from before jobs names no object.
  EXPECT_FALSE(shared_vma(0, 0).shared_object().has_value());
  image::VmaRecord priv = shared_vma(0, 7);
  priv.flags = 0;
  EXPECT_FALSE(priv.shared_object().has_value());
}

// Before the key had a kind, member 1's shared anonymous object 5 was taken
// for member 0's segment 5: its content was dropped from member 1's plan and
// never written.
TEST(SharedObject, HoldersOfCollidingNumbersAreSeparate) {
  image::ImageMeta a, b;
  a.vmas = {shared_vma(image::kVmaSysv, 5)};
  b.vmas = {shared_vma(0, 5), shared_vma(image::kVmaSysv, 5)};
  const auto holders = restore::shared_memory_holders({&a, &b});
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders.at(*a.vmas[0].shared_object()), 0u);
  EXPECT_EQ(holders.at(*b.vmas[0].shared_object()), 1u);
}

// The checkpoint picks each object's saving member from /proc/PID/maps
// before it describes the members: that key must be the one the VMA record
// gets, for each kind, on this process's own mappings.
TEST(SharedObject, MapsKeyMatchesTheRecordsKey) {
  const size_t len = 2 * 4096;
  void* anon = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  const int id = ::shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
  ASSERT_GE(id, 0) << std::strerror(errno);
  void* seg = ::shmat(id, nullptr, 0);
  ::shmctl(id, IPC_RMID, nullptr);  // goes with the detach
  ASSERT_NE(seg, reinterpret_cast<void*>(-1));
  const std::string path = "/dev/shm/ckpt_shared_object_test." + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, off_t(len)), 0);
  void* del = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ::unlink(path.c_str());
  ASSERT_NE(del, MAP_FAILED);

  auto maps = proc::read_maps(::getpid());
  ASSERT_TRUE(maps.ok()) << maps.error().message;
  std::vector<proc::MapEntry> mine;
  for (const proc::MapEntry& m : *maps)
    for (void* p : {anon, seg, del})
      if (m.start == reinterpret_cast<uint64_t>(p)) mine.push_back(m);
  ASSERT_EQ(mine.size(), 3u);
  auto vmas = dump::collect_vmas(::getpid(), mine);
  ASSERT_TRUE(vmas.ok()) << vmas.error().message;
  ASSERT_EQ(vmas->size(), 3u);
  std::set<uint32_t> kinds;
  for (size_t i = 0; i < 3; ++i) {
    const auto from_record = (*vmas)[i].shared_object();
    const auto from_maps = dump::shared_object_of(mine[i]);
    ASSERT_TRUE(from_record && from_maps) << mine[i].path;
    EXPECT_EQ(*from_record, *from_maps) << mine[i].path;
    kinds.insert(from_record->kind);
  }
  EXPECT_EQ(kinds, (std::set<uint32_t>{0, image::kVmaSysv, image::kVmaDelShared}));
  ::munmap(anon, len);
  ::shmdt(seg);
  ::munmap(del, len);
}

}  // namespace
}  // namespace ckpt
