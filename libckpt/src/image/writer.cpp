#include "image/writer.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "image/chain_link.hpp"
#include "image/format.hpp"
#include "image/store.hpp"
#include "util/hash.hpp"
#include "util/zeros.hpp"

namespace ckpt::image {

namespace {

bool is_zero_page(const uint8_t* p) {
  uint64_t first;
  std::memcpy(&first, p, 8);
  return first == 0 && std::memcmp(p, zero_bytes(), kPageSize) == 0;
}

Status write_small_file(const std::string& path, const std::vector<uint8_t>& header,
                        const std::vector<uint8_t>& body) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error("creating " + path);
  CKPT_TRY(write_all(fd.get(), header.data(), header.size(), path));
  CKPT_TRY(write_all(fd.get(), body.data(), body.size(), path));
  if (::fsync(fd.get()) != 0) return sys_error("fsync " + path);
  return {};
}

}  // namespace

Result<std::unique_ptr<SnapshotWriter>> SnapshotWriter::create(
    const std::string& dir, uint64_t generation, const std::array<uint8_t, 16>& chain_id,
    bool direct_io) {
  const std::string tmp = temp_dir_name(dir, generation);
  if (::mkdir(tmp.c_str(), 0700) != 0) return sys_error("cannot write checkpoint into " + dir);
  auto w = create_in(tmp, generation, chain_id, direct_io);
  if (w.ok()) {
    (*w)->dir_ = dir;
    (*w)->final_dir_ = generation_dir(dir, generation);
  } else {
    ::rmdir(tmp.c_str());
  }
  return w;
}

Result<std::unique_ptr<SnapshotWriter>> SnapshotWriter::create_in(
    const std::string& files_dir, uint64_t generation, const std::array<uint8_t, 16>& chain_id,
    bool direct_io) {
  std::unique_ptr<SnapshotWriter> w(new SnapshotWriter);
  w->generation_ = generation;
  w->chain_id_ = chain_id;
  w->tmp_dir_ = files_dir;
  if (::mkdir(files_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return sys_error("cannot write checkpoint into " + files_dir);
  std::string pages = w->tmp_dir_ + "/" + kPagesFile;
  // Optionally content goes to disk with O_DIRECT (where the filesystem
  // allows it): no page cache to allocate, so a checkpoint does not double the
  // node's memory use, at the price of a longer freeze (docs/performance.md).
  // Callers hand in page-aligned buffers; the page-sized header keeps
  // offsets aligned.
  int oflags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  if (direct_io) w->pages_fd_.reset(::open(pages.c_str(), oflags | O_DIRECT, 0600));
  if (!w->pages_fd_.valid()) {
    ::unlink(pages.c_str());
    w->pages_fd_.reset(::open(pages.c_str(), oflags, 0600));
  }
  if (!w->pages_fd_.valid()) {
    Error e = sys_error("creating " + pages);
    w->discard();
    return e;
  }
  // Content starts after the page-sized header, which is written at commit.
  if (::lseek(w->pages_fd_.get(), kPagesHeaderSize, SEEK_SET) < 0) return sys_error("lseek");
  return w;
}

std::unique_ptr<SnapshotWriter> SnapshotWriter::create_stream(
    uint64_t generation, const std::array<uint8_t, 16>& chain_id,
    std::unique_ptr<GenerationStream> stream) {
  std::unique_ptr<SnapshotWriter> w(new SnapshotWriter);
  w->generation_ = generation;
  w->chain_id_ = chain_id;
  w->stream_ = std::move(stream);
  return w;
}

SnapshotWriter::~SnapshotWriter() {
  if (!committed_) discard();
}

void SnapshotWriter::discard() {
  if (stream_) return;  // nothing on disk
  pages_fd_.reset();
  for (const char* f : {kPagesFile, kAddrFile, kMetaFile}) ::unlink((tmp_dir_ + "/" + f).c_str());
  ::rmdir(tmp_dir_.c_str());
}

Status SnapshotWriter::flush_iov() {
  if (stream_) {
    Status st =
        iov_.empty() ? Status{} : stream_->content(iov_.data(), iov_hash_.data(), iov_.size());
    iov_.clear();
    iov_hash_.clear();
    return st;
  }
  size_t i = 0;
  while (i < iov_.size()) {
    int n = int(std::min<size_t>(iov_.size() - i, IOV_MAX));
    ssize_t done = ::writev(pages_fd_.get(), &iov_[i], n);
    if (done < 0) {
      if (errno == EINTR) continue;
      return sys_error("writing " + tmp_dir_ + "/" + kPagesFile);
    }
    // Skip fully written vectors; trim a partially written one and retry.
    while (done > 0 && i < iov_.size()) {
      if (size_t(done) >= iov_[i].iov_len) {
        done -= ssize_t(iov_[i].iov_len);
        ++i;
      } else {
        iov_[i].iov_base = static_cast<char*>(iov_[i].iov_base) + done;
        iov_[i].iov_len -= size_t(done);
        done = 0;
      }
    }
  }
  iov_.clear();
  return {};
}

Status SnapshotWriter::add_pages(uint64_t vaddr, const uint8_t* data, size_t npages) {
  if (!stream_ && reinterpret_cast<uintptr_t>(data) % kPageSize != 0) {
    // O_DIRECT needs page-aligned memory: go through the page cache instead.
    int fl = ::fcntl(pages_fd_.get(), F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT)) ::fcntl(pages_fd_.get(), F_SETFL, fl & ~O_DIRECT);
  }
  size_t i = 0;
  while (i < npages) {
    bool zero = is_zero_page(data + i * kPageSize);
    size_t j = i + 1;
    while (j < npages && j - i < kMaxRunPages && is_zero_page(data + j * kPageSize) == zero) ++j;
    PageRun run;
    run.vaddr = vaddr + i * kPageSize;
    run.npages = uint32_t(j - i);
    if (zero) {
      run.flags = kRunZero;
      zero_pages_ += run.npages;
    } else {
      const uint8_t* p = data + i * kPageSize;
      run.content_offset = content_bytes_;
      run.content_hash = xxh3(p, run.bytes());
      content_bytes_ += run.bytes();
      iov_.push_back(iovec{const_cast<uint8_t*>(p), run.bytes()});
      if (stream_) iov_hash_.push_back(run.content_hash);
    }
    pages_ += run.npages;
    runs_.push_back(run);
    i = j;
  }
  return flush_iov();
}

Status SnapshotWriter::commit(const ImageMeta& meta) {
  if (meta.generation != generation_ || meta.chain_id != chain_id_)
    return make_error(EINVAL, "metadata does not belong to this generation");

  FileHeader h;
  h.generation = generation_;
  h.chain_id = chain_id_;

  h.magic = kPagesMagic;
  h.header_size = kPagesHeaderSize;
  h.count = content_bytes_;
  std::vector<uint8_t> ph = encode_header(h);

  std::vector<uint8_t> addr(runs_.size() * kRunRecordSize);
  for (size_t i = 0; i < runs_.size(); ++i) encode_run(runs_[i], &addr[i * kRunRecordSize]);
  h.magic = kAddrMagic;
  h.header_size = kSmallHeaderSize;
  h.count = runs_.size();
  if (!page_hashes_.empty()) {
    h.flags = kAddrHasPageHashes;
    encode_page_hashes(page_hashes_, addr);
  }
  std::vector<uint8_t> addr_header = encode_header(h);

  uint64_t nrec = 0;
  std::vector<uint8_t> body = encode_meta(meta, &nrec);
  // The chain link comes last: it binds this addr.img and the parent.
  ChainLink link = meta.link;
  link.generation = generation_;
  link.chain_id = chain_id_;
  link.parent_generation = meta.parent_generation;
  link.addr_digest = file_digest(addr_header, addr);
  append_chain_link(link, body, &nrec);
  h.magic = kMetaMagic;
  h.count = nrec;
  h.flags = 0;
  std::vector<uint8_t> meta_header = encode_header(h);
  meta_digest_ = file_digest(meta_header, body);
  bytes_total_ = ph.size() + content_bytes_ + kSmallHeaderSize * 2 + addr.size() + body.size();

  if (stream_) {
    addr.insert(addr.begin(), addr_header.begin(), addr_header.end());
    body.insert(body.begin(), meta_header.begin(), meta_header.end());
    CKPT_TRY(stream_->commit(ph, addr, body));
    committed_ = true;
    return {};
  }

  std::string pages = tmp_dir_ + "/" + kPagesFile;
  int fl = ::fcntl(pages_fd_.get(), F_GETFL);
  if (fl >= 0 && (fl & O_DIRECT)) ::fcntl(pages_fd_.get(), F_SETFL, fl & ~O_DIRECT);
  CKPT_TRY(write_all(pages_fd_.get(), ph.data(), ph.size(), pages, 0));
  if (::fsync(pages_fd_.get()) != 0) return sys_error("fsync " + pages);
  pages_fd_.reset();
  CKPT_TRY(write_small_file(tmp_dir_ + "/" + kAddrFile, addr_header, addr));
  CKPT_TRY(write_small_file(tmp_dir_ + "/" + kMetaFile, meta_header, body));

  CKPT_TRY(fsync_dir(tmp_dir_));
  if (final_dir_.empty()) {  // a member of a job: the job's generation is renamed as a whole
    committed_ = true;
    return {};
  }
  if (::rename(tmp_dir_.c_str(), final_dir_.c_str()) != 0)
    return sys_error("committing " + final_dir_);
  committed_ = true;
  return fsync_dir(dir_);
}

}  // namespace ckpt::image
