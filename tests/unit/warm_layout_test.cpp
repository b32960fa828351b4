// Metadata first (migrate/warm_restore): a process built from a full's
// layout, its memory written run by run as it "arrives", holds exactly the
// checkpointed memory once the generation is committed; and a committed
// generation that is not what was written is refused (the receiver then
// restores cold).
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ckpt/ckpt.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "image/format.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "migrate/protocol.hpp"
#include "migrate/warm_restore.hpp"
#include "page_child.hpp"

namespace ckpt {
namespace {

using testing::kChildPage;
using testing::kChildPages;

class WarmLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a process is built under ptrace)";
    char tmpl[] = "/tmp/ckpt-warm-layout-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    child_.start(false);
    for (int p = 0; p < kChildPages; p += 3) child_.op('w', p);
    CheckpointOptions o;
    o.dir = dir_;
    o.pid = child_.pid;
    o.tracker = "hash";  // nothing left inside the child
    auto st = checkpoint_full(o);
    ASSERT_TRUE(st.ok()) << st.error().message;
    gen_dir_ = image::generation_dir(dir_, 1);
    auto r = image::SnapshotReader::open(gen_dir_);
    ASSERT_TRUE(r.ok()) << r.error().message;
    reader_ = std::move(*r);
    // layout.img as the receiver's handler writes it from GEN_LAYOUT.
    uint64_t nrec = 0;
    std::vector<uint8_t> records = image::encode_meta(reader_->meta(), &nrec);
    std::vector<uint8_t> layout;
    migrate::put_u64(layout, nrec);
    layout.insert(layout.end(), records.begin(), records.end());
    std::ofstream(gen_dir_ + "/layout.img", std::ios::binary)
        .write(reinterpret_cast<const char*>(layout.data()), std::streamsize(layout.size()));
  }
  void TearDown() override {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
  }

  // The full's non-zero runs, as GEN_RUNS and CONTENT would announce them.
  std::vector<migrate::LandedRun> landed() const {
    std::vector<migrate::LandedRun> out;
    for (const image::PageRun& r : reader_->runs())
      if (!r.zero()) out.push_back({r.vaddr, r.bytes(), r.content_offset});
    return out;
  }

  static size_t half_index(const std::vector<migrate::LandedRun>& r) { return r.size() / 2; }

  std::vector<uint8_t> read_block(pid_t pid) const {
    std::vector<uint8_t> b(kChildPages * kChildPage);
    iovec l{b.data(), b.size()}, r{reinterpret_cast<void*>(child_.base), b.size()};
    EXPECT_EQ(::process_vm_readv(pid, &l, 1, &r, 1, 0), ssize_t(b.size()));
    return b;
  }

  std::string dir_, gen_dir_;
  testing::PageChild child_;
  std::unique_ptr<image::SnapshotReader> reader_;
};

TEST_F(WarmLayout, BuiltWhileArrivingHoldsTheCheckpointedMemory) {
  migrate::WarmRestore w(dir_, true);
  Status st = w.begin_layout(1, gen_dir_);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const auto runs = landed();
  ASSERT_GE(runs.size(), 2u);
  // In two messages, as the handler reports every few MiB.
  const size_t half = runs.size() / 2;
  st = w.write_landed({runs.begin(), runs.begin() + long(half)});
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = w.write_landed({runs.begin() + long(half), runs.end()});
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = w.add(1);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(w.built_early());
  EXPECT_EQ(read_block(w.pid()), read_block(child_.pid));
  w.abort();
}

TEST_F(WarmLayout, AGenerationThatIsNotWhatWasWrittenIsRefused) {
  const auto runs = landed();
  ASSERT_GE(runs.size(), 2u);
  {  // a run that never arrived
    migrate::WarmRestore w(dir_, true);
    ASSERT_TRUE(w.begin_layout(1, gen_dir_).ok());
    Status wl = w.write_landed({runs.begin(), runs.end() - 1});
    ASSERT_TRUE(wl.ok()) << wl.error().message;
    Status st = w.add(1);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("is not the content written"), std::string::npos)
        << st.error().message;
  }
  {  // content that is not what the generation's addr.img says (changed in staging)
    migrate::WarmRestore w(dir_, true);
    ASSERT_TRUE(w.begin_layout(1, gen_dir_).ok());
    const std::string pages = gen_dir_ + "/" + image::kPagesFile;
    std::fstream f(pages, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = std::streamoff(image::kPagesHeaderSize + runs[half_index(runs)].offset + 100);
    f.seekg(at);
    const char was = char(f.get());
    f.seekp(at);
    f.put(char(was ^ 0xff));
    f.close();
    ASSERT_TRUE(w.write_landed(runs).ok());
    Status st = w.add(1);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("is not the content written"), std::string::npos)
        << st.error().message;
  }
  {  // content out of file order is refused as it arrives
    migrate::WarmRestore w(dir_, true);
    ASSERT_TRUE(w.begin_layout(1, gen_dir_).ok());
    Status st = w.write_landed({runs.back()});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("does not fit the layout"), std::string::npos)
        << st.error().message;
  }
}

}  // namespace
}  // namespace ckpt
