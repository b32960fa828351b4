// parse_maps() on /proc/PID/maps text as kernels print it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "proc/maps.hpp"

namespace ckpt::proc {
namespace {

// Column padding as the kernel prints it: the path starts at column 73.
std::string line(const std::string& head, const std::string& path) {
  if (path.empty()) return head + " \n";  // anonymous: a trailing space, no path
  std::string l = head + " ";
  if (l.size() < 73) l.append(73 - l.size(), ' ');
  return l + path + "\n";
}

TEST(ParseMaps, RealisticProcess) {
  const std::string text =
      line("55d0c8a00000-55d0c8a02000 r--p 00000000 fe:01 1835043", "/usr/bin/cat") +
      line("55d0c8a02000-55d0c8a07000 r-xp 00002000 fe:01 1835043", "/usr/bin/cat") +
      line("55d0ca1e4000-55d0ca205000 rw-p 00000000 00:00 0", "[heap]") +
      line("7f1c2e000000-7f1c2e021000 rw-p 00000000 00:00 0", "") +
      line("7f1c2e3c2000-7f1c2e518000 r-xp 00026000 103:02 332835",
           "/usr/lib/x86_64-linux-gnu/libc.so.6") +
      line("7f1c2e581000-7f1c2e588000 r--s 00000000 fe:00 332280",
           "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache") +
      line("7f1c2e58b000-7f1c2e58f000 r--p 00000000 00:00 0", "[vvar]") +
      line("7f1c2e58f000-7f1c2e591000 r--p 00000000 00:00 0", "[vvar_vclock]") +
      line("7f1c2e591000-7f1c2e593000 r-xp 00000000 00:00 0", "[vdso]") +
      line("7ffd6d8e1000-7ffd6d902000 rw-p 00000000 00:00 0", "[stack]") +
      line("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0", "[vsyscall]");
  std::vector<MapEntry> m = parse_maps(text);
  ASSERT_EQ(m.size(), 11u);

  EXPECT_EQ(m[0].start, 0x55d0c8a00000u);
  EXPECT_EQ(m[0].end, 0x55d0c8a02000u);
  EXPECT_TRUE(m[0].r);
  EXPECT_FALSE(m[0].w);
  EXPECT_FALSE(m[0].x);
  EXPECT_FALSE(m[0].shared);
  EXPECT_EQ(m[0].offset, 0u);
  EXPECT_EQ(m[0].dev_major, 0xfeu);
  EXPECT_EQ(m[0].dev_minor, 0x01u);
  EXPECT_EQ(m[0].inode, 1835043u);
  EXPECT_EQ(m[0].path, "/usr/bin/cat");

  EXPECT_TRUE(m[1].x);
  EXPECT_EQ(m[1].offset, 0x2000u);

  EXPECT_EQ(m[2].path, "[heap]");
  EXPECT_TRUE(m[2].r && m[2].w && !m[2].x && !m[2].shared);
  EXPECT_EQ(m[2].dev_major, 0u);
  EXPECT_EQ(m[2].inode, 0u);

  EXPECT_EQ(m[3].path, "");  // anonymous
  EXPECT_EQ(m[3].start, 0x7f1c2e000000u);
  EXPECT_EQ(m[3].end, 0x7f1c2e021000u);

  EXPECT_EQ(m[4].dev_major, 0x103u);  // hex, wider than two digits (nvme)
  EXPECT_EQ(m[4].dev_minor, 0x02u);
  EXPECT_EQ(m[4].offset, 0x26000u);

  EXPECT_TRUE(m[5].shared);
  EXPECT_FALSE(m[5].w);

  EXPECT_EQ(m[6].path, "[vvar]");
  EXPECT_EQ(m[7].path, "[vvar_vclock]");
  EXPECT_EQ(m[7].start, 0x7f1c2e58f000u);
  EXPECT_EQ(m[8].path, "[vdso]");
  EXPECT_EQ(m[9].path, "[stack]");

  EXPECT_EQ(m[10].start, 0xffffffffff600000u);
  EXPECT_EQ(m[10].end, 0xffffffffff601000u);
  EXPECT_FALSE(m[10].r);
  EXPECT_TRUE(m[10].x);
  EXPECT_EQ(m[10].path, "[vsyscall]");
}

TEST(ParseMaps, PathsWithSpacesAndDeletedFiles) {
  const std::string text =
      line("7f0000000000-7f0000001000 r--p 00001000 fe:01 42", "/home/u/my lib (v2).so") +
      line("7f0000001000-7f0000002000 rw-s 00000000 00:01 1026", "/dev/zero (deleted)") +
      line("7f0000002000-7f0000003000 rw-s 00000000 00:05 0", "/SYSV00000000 (deleted)") +
      line("7f0000003000-7f0000004000 r-xp 00000000 fe:01 77", "/tmp/a  b   c (deleted)") +
      line("7f0000004000-7f0000005000 rw-p 00000000 00:00 0", "[anon:glibc malloc]");
  std::vector<MapEntry> m = parse_maps(text);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].path, "/home/u/my lib (v2).so");
  EXPECT_EQ(m[0].offset, 0x1000u);
  EXPECT_EQ(m[1].path, "/dev/zero (deleted)");  // the suffix is kept for the caller to judge
  EXPECT_TRUE(m[1].shared);
  EXPECT_EQ(m[1].inode, 1026u);
  EXPECT_EQ(m[2].path, "/SYSV00000000 (deleted)");
  EXPECT_EQ(m[3].path, "/tmp/a  b   c (deleted)");  // inner runs of spaces intact
  EXPECT_EQ(m[4].path, "[anon:glibc malloc]");
}

TEST(ParseMaps, LargeValues) {
  const std::string text = line(
      "7fffffffe000-7ffffffff000 rw-p fffffffffffff000 ffff:fffff 18446744073709551615", "/big");
  std::vector<MapEntry> m = parse_maps(text);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].offset, 0xfffffffffffff000u);
  EXPECT_EQ(m[0].dev_major, 0xffffu);
  EXPECT_EQ(m[0].dev_minor, 0xfffffu);
  EXPECT_EQ(m[0].inode, 18446744073709551615u);
  EXPECT_EQ(m[0].path, "/big");
}

TEST(ParseMaps, LineEndingsAndJunk) {
  // Anonymous lines with and without the trailing space, no final newline,
  // blank and malformed lines skipped.
  const std::string text =
      "1000-2000 rw-p 00000000 00:00 0\n"
      "\n"
      "not a maps line\n"
      "3000-4000 ---p 00000000 00:00 0 \n"
      "5000-6000 r--p 00000000 fe:01 9 /no/newline";
  std::vector<MapEntry> m = parse_maps(text);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].start, 0x1000u);
  EXPECT_EQ(m[0].path, "");
  EXPECT_EQ(m[1].start, 0x3000u);
  EXPECT_FALSE(m[1].r || m[1].w || m[1].x || m[1].shared);
  EXPECT_EQ(m[1].path, "");
  EXPECT_EQ(m[2].path, "/no/newline");
  EXPECT_TRUE(parse_maps("").empty());
}

TEST(ParseMaps, OwnProcess) {
  auto m = read_maps(::getpid());
  ASSERT_TRUE(m.ok()) << m.error().message;
  bool stack = false, vdso = false;
  uint64_t prev_end = 0;
  for (const MapEntry& e : *m) {
    EXPECT_LT(e.start, e.end);
    EXPECT_GE(e.start, prev_end) << "entries out of order";
    EXPECT_EQ(e.start % 4096, 0u);
    prev_end = e.end;
    stack |= e.path == "[stack]";
    vdso |= e.path == "[vdso]";
  }
  EXPECT_TRUE(stack);
  EXPECT_TRUE(vdso);
  // This function's code is inside an executable mapping.
  const uint64_t pc = reinterpret_cast<uint64_t>(&parse_maps);
  bool found = false;
  for (const MapEntry& e : *m) found |= e.start <= pc && pc < e.end && e.x;
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace ckpt::proc
