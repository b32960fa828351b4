// A tracker's self-test that passed is recorded for the rest of the boot
// (dirty/self_test_record.hpp): the record counts only for this boot and
// only in a directory nobody else can write into.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "dirty/ledger.hpp"
#include "dirty/self_test_record.hpp"

using namespace ckpt::dirty;

namespace {

const char kName[] = "unit-test-record";

std::string record_file() {
  return *runtime_dir("self-test") + "/" + kName;
}

TEST(SelfTestRecord, PassCountsForThisBootOnly) {
  ASSERT_TRUE(runtime_dir("self-test").has_value());
  ::unlink(record_file().c_str());
  EXPECT_FALSE(self_test_passed_this_boot(kName));
  record_self_test_pass(kName);
  EXPECT_TRUE(self_test_passed_this_boot(kName));
  // The same record from another boot (another boot id) says nothing.
  { std::ofstream(record_file()) << "00000000-0000-0000-0000-000000000000\n"; }
  EXPECT_FALSE(self_test_passed_this_boot(kName));
  record_self_test_pass(kName);
  EXPECT_TRUE(self_test_passed_this_boot(kName));
  ::unlink(record_file().c_str());
}

TEST(SelfTestRecord, IgnoredInADirectoryOthersCanWrite) {
  ASSERT_TRUE(runtime_dir("self-test").has_value());
  record_self_test_pass(kName);
  ASSERT_TRUE(self_test_passed_this_boot(kName));
  const std::string dir = *runtime_dir("self-test");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const bool read = self_test_passed_this_boot(kName);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_FALSE(read) << "a record anyone could have planted was believed";
  ::unlink(record_file().c_str());
}

}  // namespace
