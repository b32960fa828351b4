#include "notify/inotify.hpp"

namespace ckpt::notify {

void store_watches(const std::vector<Watch>& watches, image::FileRecord* f) {
  f->params.clear();
  f->data.clear();
  for (const Watch& w : watches) {
    f->params.insert(f->params.end(), {uint64_t(uint32_t(w.wd)), w.mask, w.path.size()});
    f->data.insert(f->data.end(), w.path.begin(), w.path.end());
  }
}

Result<std::vector<Watch>> load_watches(const image::FileRecord& f, const std::string& what) {
  if (f.params.size() % 3 != 0) return make_error(EBADMSG, what + ": inotify record is malformed");
  std::vector<Watch> out;
  size_t at = 0;
  for (size_t i = 0; i < f.params.size(); i += 3) {
    const uint64_t wd = f.params[i], mask = f.params[i + 1], len = f.params[i + 2];
    if (wd == 0 || wd > uint64_t(kMaxWatchDescriptor) || mask > UINT32_MAX || len == 0 ||
        len > f.data.size() - at)
      return make_error(EBADMSG, what + ": inotify record is malformed");
    Watch w{int32_t(wd), uint32_t(mask),
            std::string(f.data.begin() + long(at), f.data.begin() + long(at + len))};
    if (w.path[0] != '/' || w.path.find('\0') != std::string::npos)
      return make_error(EBADMSG, what + ": inotify record is malformed");
    if (!out.empty() && w.wd <= out.back().wd)
      return make_error(EBADMSG, what + ": inotify watches out of order");
    at += len;
    out.push_back(std::move(w));
  }
  if (at != f.data.size()) return make_error(EBADMSG, what + ": inotify record is malformed");
  return out;
}

}  // namespace ckpt::notify
