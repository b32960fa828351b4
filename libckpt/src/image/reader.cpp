#include "image/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <new>

#include "image/chain_link.hpp"
#include "image/format.hpp"
#include "image/page_codec.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"
#include "util/text.hpp"

namespace ckpt::image {

namespace {

struct Loaded {
  FileHeader header;
  std::vector<uint8_t> head;  // the header's bytes (small files only)
  std::vector<uint8_t> body;  // everything after the header (small files only)
  UniqueFd fd;
  uint64_t size = 0;
};

Result<Loaded> load(const std::string& path, const Magic& magic, bool read_body) {
  Loaded l;
  l.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!l.fd.valid()) return sys_error("opening " + path);
  struct stat st;
  if (::fstat(l.fd.get(), &st) != 0) return sys_error("stat " + path);
  l.size = uint64_t(st.st_size);
  std::vector<uint8_t> block(std::min<uint64_t>(l.size, kPagesHeaderSize));
  CKPT_TRY(read_exact(l.fd.get(), block.data(), block.size(), 0, path));
  std::string err;
  if (!decode_header(block.data(), block.size(), magic, &l.header, &err))
    return make_error(EBADMSG, path + ": " + err);
  if (read_body) {
    l.head.assign(block.begin(), block.begin() + l.header.header_size);
    l.body.resize(l.size - l.header.header_size);
    CKPT_TRY(read_exact(l.fd.get(), l.body.data(), l.body.size(), l.header.header_size, path));
  }
  return l;
}

Error corrupt(const std::string& path, const std::string& why) {
  return make_error(EBADMSG, path + ": " + why);
}

}  // namespace

Result<std::unique_ptr<SnapshotReader>> SnapshotReader::open(const std::string& gen_dir) {
  std::unique_ptr<SnapshotReader> r(new SnapshotReader);
  r->dir_ = gen_dir;
  const std::string meta_path = gen_dir + "/" + kMetaFile;
  const std::string addr_path = gen_dir + "/" + kAddrFile;
  const std::string pages_path = gen_dir + "/" + kPagesFile;

  CKPT_ASSIGN(Loaded meta, load(meta_path, kMetaMagic, true));
  std::string err;
  if (!decode_meta(meta.body.data(), meta.body.size(), meta.header.count, &r->meta_, &err))
    return corrupt(meta_path, err);
  if (meta.header.flags != 0) return corrupt(meta_path, "unknown header flags");
  r->version_ = meta.header.version;
  r->meta_digest_ = file_digest(meta.head, meta.body);

  CKPT_ASSIGN(Loaded addr, load(addr_path, kAddrMagic, true));
  const size_t runs_bytes = addr.header.count * kRunRecordSize;
  if (addr.header.count > addr.body.size() / kRunRecordSize ||
      (addr.header.flags & kAddrHasPageHashes ? addr.body.size() < runs_bytes
                                              : addr.body.size() != runs_bytes))
    return corrupt(addr_path, "size does not match its run count (truncated?)");
  if (addr.header.flags & ~(kAddrHasPageHashes | kAddrHasZstdRuns))
    return corrupt(addr_path, "unknown header flags");
  const bool zstd_runs = addr.header.flags & kAddrHasZstdRuns;
  if ((addr.header.flags & kAddrHasPageHashes) &&
      !decode_page_hashes(addr.body.data() + runs_bytes, addr.body.size() - runs_bytes,
                          &r->page_hashes_))
    return corrupt(addr_path, "page-hash table is damaged or truncated");
  CKPT_ASSIGN(Loaded pages, load(pages_path, kPagesMagic, false));
  if (pages.header.flags != 0) return corrupt(pages_path, "unknown header flags");
  if (pages.size != kPagesHeaderSize + pages.header.count)
    return corrupt(pages_path, "size does not match its header (truncated?)");
  r->content_bytes_ = pages.header.count;

  for (const Loaded* l : {&addr, &pages})
    if (l->header.generation != meta.header.generation ||
        l->header.chain_id != meta.header.chain_id || l->header.version != meta.header.version)
      return corrupt(gen_dir, "files belong to different checkpoints");
  if (r->meta_.generation != meta.header.generation || r->meta_.chain_id != meta.header.chain_id)
    return corrupt(meta_path, "generation record does not match the header");
  if (std::string why = check_own_link(r->meta_, r->version_, file_digest(addr.head, addr.body));
      !why.empty())
    return corrupt(meta_path, why);

  r->runs_.resize(addr.header.count);
  for (size_t i = 0; i < r->runs_.size(); ++i) {
    PageRun& run = r->runs_[i];
    if (!decode_run(&addr.body[i * kRunRecordSize], &run))
      return corrupt(addr_path, "run record " + std::to_string(i) + " checksum mismatch");
    // Flags: ZERO, or ZSTD with its stored page count (1 to npages) when the
    // header announces compressed runs; nothing else.
    const uint32_t known = run.compressed() ? kRunZstd | (0xffffu << kRunStoredShift) : kRunZero;
    if ((run.flags & ~known) || (run.compressed() && (!zstd_runs || run.stored_pages() == 0 ||
                                                      run.stored_pages() > run.npages)))
      return corrupt(addr_path, "run record " + std::to_string(i) + " has unknown flags");
    if (run.npages == 0 || run.npages > kMaxRunPages || run.vaddr % kPageSize != 0 ||
        (!run.zero() &&
         (run.content_offset % kPageSize != 0 || run.content_offset > r->content_bytes_ ||
          run.stored_bytes() > r->content_bytes_ - run.content_offset)))
      return corrupt(addr_path, "run record " + std::to_string(i) + " is out of range");
  }

  uint64_t covered = 0;
  for (const PageRun& run : r->runs_) covered += run.stored_bytes();
  if (covered != r->content_bytes_)
    return corrupt(addr_path, "runs do not cover the page content exactly");

  if (pages.size > kPagesHeaderSize) {
    void* m = ::mmap(nullptr, pages.size, PROT_READ, MAP_SHARED, pages.fd.get(), 0);
    if (m == MAP_FAILED) return sys_error("mapping " + pages_path);
    r->map_ = static_cast<const uint8_t*>(m);
    r->map_len_ = pages.size;
    ::madvise(m, pages.size, MADV_SEQUENTIAL);
  }
  return r;
}

SnapshotReader::~SnapshotReader() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_len_);
}

const uint8_t* SnapshotReader::content(const PageRun& run) const {
  if (run.zero()) return nullptr;
  if (run.compressed()) {
    std::lock_guard<std::mutex> l(plain_mu_);
    auto it = plain_.find(key(run));
    return it == plain_.end() ? nullptr : it->second.get();
  }
  return map_ + kPagesHeaderSize + run.content_offset;
}

Status SnapshotReader::verify_run(const PageRun& run) const {
  if (run.zero()) return {};
  const uint8_t* stored = map_ + kPagesHeaderSize + run.content_offset;
  auto mismatch = [&](const std::string& why) {
    return corrupt(dir_ + "/" + kPagesFile, "page run at " + hex(run.vaddr) + ": " + why);
  };
  if (!run.compressed()) {
    if (xxh3(stored, run.bytes()) != run.content_hash) return mismatch("content checksum mismatch");
    return {};
  }
  if (content(run)) return {};  // verified before
  std::unique_ptr<uint8_t[]> plain(new (std::nothrow) uint8_t[run.bytes()]);
  if (!plain) return make_error(ENOMEM, "decompressing " + dir_ + "/" + kPagesFile);
  if (std::string why = decompress_run(stored, run.stored_bytes(), plain.get(), run.bytes());
      !why.empty())
    return mismatch("content checksum mismatch (" + why + ")");
  if (xxh3(plain.get(), run.bytes()) != run.content_hash)
    return mismatch("content checksum mismatch");
  std::lock_guard<std::mutex> l(plain_mu_);
  plain_.emplace(key(run), std::move(plain));
  return {};
}

void SnapshotReader::drop_content(const PageRun& run) const {
  if (!run.compressed()) return;
  std::lock_guard<std::mutex> l(plain_mu_);
  plain_.erase(key(run));
}

Status SnapshotReader::verify_all() const {
  for (const PageRun& run : runs_) {
    CKPT_TRY(verify_run(run));
    drop_content(run);
  }
  return {};
}

}  // namespace ckpt::image
