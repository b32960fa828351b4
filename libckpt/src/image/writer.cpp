#include "image/writer.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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
                        const std::vector<uint8_t>& body, bool durable) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error("creating " + path);
  CKPT_TRY(write_all(fd.get(), header.data(), header.size(), path));
  CKPT_TRY(write_all(fd.get(), body.data(), body.size(), path));
  if (durable && ::fsync(fd.get()) != 0) return sys_error("fsync " + path);
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
  // node's memory use; with the capture buffers the target is released before
  // this write, so the freeze is not longer (docs/performance.md).
  // Callers hand in page-aligned buffers; the page-sized header keeps
  // offsets aligned.
  // Read-write: a live checkpoint reads back parts of runs it cuts (drop_pages).
  int oflags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
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
  std::free(zbuf_);
}

void SnapshotWriter::set_compression(int level, unsigned threads) {
  if (level > 0 && !stream_) compressor_ = std::make_unique<RunCompressor>(level, threads);
}

void SnapshotWriter::discard() {
  if (stream_) return;  // nothing on disk
  if (persister_) (void)persister_->stop();
  pages_fd_.reset();
  for (const char* f : {kPagesFile, kAddrFile, kMetaFile}) ::unlink((tmp_dir_ + "/" + f).c_str());
  ::rmdir(tmp_dir_.c_str());
}

Status SnapshotWriter::flush_iov() {
  if (stream_) {
    Status st = iov_.empty() ? Status{}
                             : stream_->content(iov_.data(), iov_hash_.data(), iov_vaddr_.data(),
                                                iov_.size());
    iov_.clear();
    iov_hash_.clear();
    iov_vaddr_.clear();
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
  // A durable commit fsyncs pages.img: its thread starts writeback of what
  // is written now and persists it in steps (image/persister.hpp).
  if (durable_ && content_bytes_ >= kWritebackChunk) {
    if (!persister_)
      persister_ =
          std::make_unique<Persister>(pages_fd_.get(), kPagesHeaderSize, kWritebackChunk,
                                      Persister::kDefaultStep, tmp_dir_ + "/" + kPagesFile);
    persister_->written(content_bytes_);
  }
  return {};
}

Status SnapshotWriter::add_pages(uint64_t vaddr, const uint8_t* data, size_t npages) {
  if (!stream_ && reinterpret_cast<uintptr_t>(data) % kPageSize != 0) {
    // O_DIRECT needs page-aligned memory: go through the page cache instead.
    int fl = ::fcntl(pages_fd_.get(), F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT)) ::fcntl(pages_fd_.get(), F_SETFL, fl & ~O_DIRECT);
  }
  const size_t first_run = runs_.size();
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
      run.content_hash = xxh3(data + i * kPageSize, run.bytes());
      plain_bytes_ += run.bytes();
    }
    pages_ += run.npages;
    runs_.push_back(run);
    i = j;
  }
  // Compressed frames of this call's runs, made on the compressor's threads
  // (the capture's writer thread calls this after the copy, off the freeze).
  std::vector<RunCompressor::Job> jobs;
  if (compressor_) {
    size_t need = 0;
    for (size_t r = first_run; r < runs_.size(); ++r)
      if (!runs_[r].zero()) need += RunCompressor::bound(runs_[r].bytes());
    if (need > zbuf_len_) {
      std::free(zbuf_);
      zbuf_ = static_cast<uint8_t*>(std::aligned_alloc(kPageSize, need));
      zbuf_len_ = zbuf_ ? need : 0;
    }
    if (zbuf_) {
      size_t at = 0;
      for (size_t r = first_run; r < runs_.size(); ++r) {
        if (runs_[r].zero()) continue;
        RunCompressor::Job job;
        job.src = data + (runs_[r].vaddr - vaddr);
        job.len = runs_[r].bytes();
        job.out = zbuf_ + at;
        at += RunCompressor::bound(job.len);
        jobs.push_back(job);
      }
      compressor_->run(jobs);
    }
  }
  size_t k = 0;
  for (size_t r = first_run; r < runs_.size(); ++r) {
    PageRun& run = runs_[r];
    if (run.zero()) continue;
    const uint8_t* p = data + (run.vaddr - vaddr);
    size_t len = run.bytes();
    if (k < jobs.size() && jobs[k].stored_pages > 0) {
      run.flags |= kRunZstd | uint32_t(jobs[k].stored_pages) << kRunStoredShift;
      p = jobs[k].out;
      len = jobs[k].stored_pages * kPageSize;
      any_compressed_ = true;
    }
    ++k;
    run.content_offset = content_bytes_;
    content_bytes_ += len;
    iov_.push_back(iovec{const_cast<uint8_t*>(p), len});
    if (stream_) {
      iov_hash_.push_back(run.content_hash);
      iov_vaddr_.push_back(run.vaddr);
    }
  }
  return flush_iov();
}

Status SnapshotWriter::drop_pages(const std::vector<MemRange>& ranges, bool keep) {
  if (stream_) return make_error(ENOTSUP, "a stream cannot take pages back");
  // The parts of [a, b) to keep: outside `ranges` (or inside, with `keep`).
  auto kept = [&](uint64_t a, uint64_t b, std::vector<MemRange>* out) {
    out->clear();
    uint64_t at = a;
    auto lo = std::lower_bound(ranges.begin(), ranges.end(), a,
                               [](const MemRange& r, uint64_t v) { return r.end <= v; });
    for (auto it = lo; it != ranges.end() && it->start < b; ++it) {
      uint64_t s = std::max(it->start, a), e = std::min(it->end, b);
      if (keep) {
        out->push_back({s, e});
      } else {
        if (s > at) out->push_back({at, s});
        at = e;
      }
    }
    if (!keep && at < b) out->push_back({at, b});
  };
  // Only the index changes here: a live checkpoint calls this frozen, and
  // reading back and hashing what the cuts leave (most of the process when
  // a few scattered pages cut every run) waits for commit (settle_cuts).
  // The new index goes into vectors kept from the last call: fresh memory
  // of that size is what costs time in a freeze on a VM.
  cuts_.resize(runs_.size());
  std::vector<PageRun>& runs = spare_runs_;
  std::vector<Cut>& cuts = spare_cuts_;
  runs.clear();
  cuts.clear();
  std::vector<MemRange> keep_parts;
  pages_ = zero_pages_ = 0;
  for (size_t i = 0; i < runs_.size(); ++i) {
    const PageRun& r = runs_[i];
    kept(r.vaddr, r.vaddr + r.bytes(), &keep_parts);
    const bool whole = keep_parts.size() == 1 && keep_parts[0].start == r.vaddr &&
                       keep_parts[0].end == r.vaddr + r.bytes();
    for (const MemRange& k : keep_parts) {
      PageRun p = r;
      Cut c = cuts_[i];
      p.vaddr = k.start;
      p.npages = uint32_t((k.end - k.start) / kPageSize);
      if (!whole && !r.zero()) {
        c.cut = true;
        if (r.compressed()) {
          c.frame = r;  // a frame cannot be cut: its pages become plain at commit
          p.flags = 0;
        } else if (c.frame.npages == 0) {
          p.content_offset = r.content_offset + (k.start - r.vaddr);
        }
      }
      pages_ += p.npages;
      if (p.zero()) zero_pages_ += p.npages;
      runs.push_back(p);
      cuts.push_back(c);
    }
  }
  runs_.swap(runs);
  cuts_.swap(cuts);
  return {};
}

Status SnapshotWriter::settle_cuts() {
  if (std::none_of(cuts_.begin(), cuts_.end(), [](const Cut& c) { return c.cut; })) return {};
  const std::string path = tmp_dir_ + "/" + kPagesFile;
  int fl = ::fcntl(pages_fd_.get(), F_GETFL);
  if (fl >= 0 && (fl & O_DIRECT)) ::fcntl(pages_fd_.get(), F_SETFL, fl & ~O_DIRECT);
  std::vector<uint8_t> buf, plain;
  PageRun decoded;  // the frame `plain` holds
  bool appended = false;
  for (size_t i = 0; i < cuts_.size(); ++i) {  // runs added after the last drop follow
    if (!cuts_[i].cut) continue;
    PageRun& p = runs_[i];
    const PageRun& f = cuts_[i].frame;
    if (f.npages == 0) {  // a part of a plain run: its own hash
      buf.resize(p.bytes());
      CKPT_TRY(read_exact(pages_fd_.get(), buf.data(), buf.size(),
                          off_t(kPagesHeaderSize + p.content_offset), path));
      p.content_hash = xxh3(buf.data(), buf.size());
      continue;
    }
    // A part of a frame: decompressed and appended plain; the frame's place
    // becomes a hole that commit's compaction closes.
    if (decoded.npages == 0 || decoded.content_offset != f.content_offset) {
      buf.resize(f.stored_bytes());
      plain.resize(f.bytes());
      CKPT_TRY(read_exact(pages_fd_.get(), buf.data(), buf.size(),
                          off_t(kPagesHeaderSize + f.content_offset), path));
      if (std::string why = decompress_run(buf.data(), buf.size(), plain.data(), plain.size());
          !why.empty())
        return make_error(EIO, path + ": a run written by this tool does not decompress: " + why);
      decoded = f;
    }
    const uint8_t* src = plain.data() + (p.vaddr - f.vaddr);
    p.content_hash = xxh3(src, p.bytes());
    p.content_offset = content_bytes_;
    CKPT_TRY(
        write_all(pages_fd_.get(), src, p.bytes(), path, off_t(kPagesHeaderSize + content_bytes_)));
    content_bytes_ += p.bytes();
    appended = true;
  }
  cuts_.clear();
  if (appended && ::lseek(pages_fd_.get(), off_t(kPagesHeaderSize + content_bytes_), SEEK_SET) < 0)
    return sys_error("seeking in " + path);
  return {};
}

Status SnapshotWriter::fill_holes() {
  std::vector<PageRun> runs, moving;
  uint64_t covered = 0;
  for (const PageRun& r : runs_) covered += r.stored_bytes();
  if (covered == content_bytes_) return {};
  const std::string path = tmp_dir_ + "/" + kPagesFile;
  int fl = ::fcntl(pages_fd_.get(), F_GETFL);
  if (fl >= 0 && (fl & O_DIRECT)) ::fcntl(pages_fd_.get(), F_SETFL, fl & ~O_DIRECT);
  if (std::any_of(runs_.begin(), runs_.end(), [](const PageRun& r) { return r.compressed(); }))
    return compact_content();
  // Content at or past `covered` moves into the holes below it (there is
  // exactly as much of one as of the other); the rest stays where it is.
  std::vector<uint8_t> buf;
  auto hash_at = [&](uint64_t off, uint64_t len) -> Result<uint64_t> {
    buf.resize(len);
    CKPT_TRY(read_exact(pages_fd_.get(), buf.data(), len, off_t(kPagesHeaderSize + off), path));
    return xxh3(buf.data(), len);
  };
  for (const PageRun& r : runs_) {
    if (r.zero() || r.content_offset + r.bytes() <= covered) {
      runs.push_back(r);
    } else if (r.content_offset >= covered) {
      moving.push_back(r);
    } else {  // straddles: the part below stays, the rest moves
      PageRun low = r, high = r;
      low.npages = uint32_t((covered - r.content_offset) / kPageSize);
      CKPT_ASSIGN(low.content_hash, hash_at(low.content_offset, low.bytes()));
      high.npages = r.npages - low.npages;
      high.vaddr = r.vaddr + low.bytes();
      high.content_offset = covered;
      runs.push_back(low);
      moving.push_back(high);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> used;  // content that stays: [off, end)
  for (const PageRun& r : runs)
    if (!r.zero()) used.push_back({r.content_offset, r.content_offset + r.bytes()});
  std::sort(used.begin(), used.end());
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  uint64_t at = 0;
  for (auto [a, b] : used) {
    if (a > at) holes.push_back({at, a});
    at = std::max(at, b);
  }
  if (at < covered) holes.push_back({at, covered});
  size_t h = 0;
  for (PageRun m : moving) {
    while (m.npages > 0) {
      if (h == holes.size()) return make_error(EIO, "internal error: no hole left in " + path);
      uint64_t take = std::min<uint64_t>(m.bytes(), holes[h].second - holes[h].first);
      PageRun piece = m;
      piece.npages = uint32_t(take / kPageSize);
      piece.content_offset = holes[h].first;
      buf.resize(take);
      CKPT_TRY(read_exact(pages_fd_.get(), buf.data(), take,
                          off_t(kPagesHeaderSize + m.content_offset), path));
      CKPT_TRY(write_all(pages_fd_.get(), buf.data(), take, path,
                         off_t(kPagesHeaderSize + piece.content_offset)));
      piece.content_hash = xxh3(buf.data(), take);
      runs.push_back(piece);
      holes[h].first += take;
      if (holes[h].first == holes[h].second) ++h;
      m.vaddr += take;
      m.content_offset += take;
      m.npages -= piece.npages;
    }
  }
  if (::ftruncate(pages_fd_.get(), off_t(kPagesHeaderSize + covered)) != 0)
    return sys_error("truncating " + path);
  runs_ = std::move(runs);
  content_bytes_ = covered;
  return {};
}

// Frames cannot be split into holes: every run's content slides down, in
// file order, until no gap is left. Content hashes stay (they are of the
// pages, not of where they lie).
Status SnapshotWriter::compact_content() {
  const std::string path = tmp_dir_ + "/" + kPagesFile;
  std::vector<PageRun*> order;
  for (PageRun& r : runs_)
    if (!r.zero()) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const PageRun* a, const PageRun* b) {
    return a->content_offset < b->content_offset;
  });
  std::vector<uint8_t> buf;
  uint64_t at = 0;
  for (PageRun* r : order) {
    const uint64_t len = r->stored_bytes();
    if (r->content_offset != at) {
      buf.resize(len);
      CKPT_TRY(read_exact(pages_fd_.get(), buf.data(), len,
                          off_t(kPagesHeaderSize + r->content_offset), path));
      CKPT_TRY(write_all(pages_fd_.get(), buf.data(), len, path, off_t(kPagesHeaderSize + at)));
      r->content_offset = at;
    }
    at += len;
  }
  if (::ftruncate(pages_fd_.get(), off_t(kPagesHeaderSize + at)) != 0)
    return sys_error("truncating " + path);
  content_bytes_ = at;
  return {};
}

Status SnapshotWriter::commit(const ImageMeta& meta) {
  if (meta.generation != generation_ || meta.chain_id != chain_id_)
    return make_error(EINVAL, "metadata does not belong to this generation");
  // A live checkpoint dropped pages: the runs it cut get their hashes, and
  // the content left must fill pages.img.
  if (!stream_) CKPT_TRY(settle_cuts());
  if (!stream_) CKPT_TRY(fill_holes());

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
  if (any_compressed_) h.flags |= kAddrHasZstdRuns;
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
  if (persister_) CKPT_TRY(persister_->stop());
  if (durable_ && ::fsync(pages_fd_.get()) != 0) return sys_error("fsync " + pages);
  pages_fd_.reset();
  CKPT_TRY(write_small_file(tmp_dir_ + "/" + kAddrFile, addr_header, addr, durable_));
  CKPT_TRY(write_small_file(tmp_dir_ + "/" + kMetaFile, meta_header, body, durable_));

  if (durable_) CKPT_TRY(fsync_dir(tmp_dir_));
  if (final_dir_.empty()) {  // a member of a job: the job's generation is renamed as a whole
    committed_ = true;
    return {};
  }
  if (::rename(tmp_dir_.c_str(), final_dir_.c_str()) != 0)
    return sys_error("committing " + final_dir_);
  committed_ = true;
  return durable_ ? fsync_dir(dir_) : Status{};
}

}  // namespace ckpt::image
