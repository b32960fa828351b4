// meta_edit GEN_DIR claim-root|drop-credentials|open-file:PATH: rewrites GEN_DIR/meta.img as
// an attacker who can write the images would, checksums recomputed, so that
// only the privilege rules of a restore (docs/security.md) can refuse it.
//   claim-root:        every thread's uids and gids become 0, with all capabilities
//   drop-credentials:  the credential records are removed (an "old" image)
//   open-file:PATH     one more descriptor, fd 50, PATH opened read-only
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "image/chain_link.hpp"
#include "image/format.hpp"

using namespace ckpt::image;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: meta_edit GEN_DIR claim-root|drop-credentials|open-file:PATH\n");
    return 2;
  }
  const std::string path = std::string(argv[1]) + "/" + kMetaFile;
  const std::string mode = argv[2];
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  FileHeader h;
  std::string err;
  if (!decode_header(file.data(), file.size(), kMetaMagic, &h, &err)) {
    std::fprintf(stderr, "meta_edit: %s: %s\n", path.c_str(), err.c_str());
    return 1;
  }
  ImageMeta m;
  if (!decode_meta(file.data() + h.header_size, file.size() - h.header_size, h.count, &m, &err)) {
    std::fprintf(stderr, "meta_edit: %s: %s\n", path.c_str(), err.c_str());
    return 1;
  }
  if (m.credentials.empty()) {
    std::fprintf(stderr, "meta_edit: %s has no credentials to edit\n", path.c_str());
    return 1;
  }
  if (mode == "claim-root") {
    // Every capability this (root) process has: all a root restorer could give.
    std::ifstream st("/proc/self/status");
    uint64_t caps = 0;
    for (std::string line; std::getline(st, line);)
      if (line.rfind("CapPrm:", 0) == 0) caps = std::stoull(line.substr(7), nullptr, 16);
    for (TaskCredentials& c : m.credentials) {
      c.uid = {0, 0, 0, 0};
      c.gid = {0, 0, 0, 0};
      c.groups.clear();
      c.cap_permitted = c.cap_effective = caps;
    }
  } else if (mode == "drop-credentials") {
    m.credentials.clear();
  } else if (mode.rfind("open-file:", 0) == 0) {
    FileRecord f;
    f.fd = 50;
    f.kind = FileKind::kRegular;
    f.flags = O_RDONLY;
    f.path = mode.substr(10);
    m.files.push_back(f);
  } else {
    std::fprintf(stderr, "meta_edit: unknown edit %s\n", mode.c_str());
    return 2;
  }
  uint64_t n = 0;
  std::vector<uint8_t> body = encode_meta(m, &n);
  // The chain link record (format 2) comes last, as the writer puts it; it
  // binds addr.img and the parent, which the edit leaves as they were.
  if (m.link.present) append_chain_link(m.link, body, &n);
  h.count = n;
  std::vector<uint8_t> out = encode_header(h);
  out.insert(out.end(), body.begin(), body.end());
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
  return o.good() ? 0 : 1;
}
