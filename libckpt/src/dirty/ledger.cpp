#include "dirty/ledger.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "util/fd.hpp"
#include "util/private_dir.hpp"
#include "util/text.hpp"

namespace ckpt::dirty {

namespace {

// root: /run (usually a tmpfs, but not always: records carry the boot id);
// others: their runtime directory, else /tmp. What is below the base must be
// the caller's own and closed to others (util/private_dir): another user
// could otherwise plant a link where the next record is written.
std::string ledger_base() {
  if (::geteuid() == 0) return "/run";
  if (const char* x = ::getenv("XDG_RUNTIME_DIR"); x && *x) return x;
  return "/tmp";
}

std::string libckpt_dir() {
  if (ledger_base() == "/tmp") return "/tmp/libckpt-" + std::to_string(::geteuid());
  return ledger_base() + "/libckpt";
}

std::string ledger_dir() {
  return libckpt_dir() + "/tracking";
}

// Field 22 of /proc/PID/stat: start time in clock ticks since boot.
std::optional<uint64_t> start_time(pid_t pid) {
  auto stat = read_file(proc_path(pid, "stat"));
  if (!stat.ok()) return std::nullopt;
  size_t p = stat->rfind(')');
  if (p == std::string::npos) return std::nullopt;
  // After ")": field 3 (state) ... field 22.
  const char* s = stat->c_str() + p + 1;
  for (int field = 3; field < 22; ++field) {
    while (*s == ' ') ++s;
    while (*s && *s != ' ') ++s;
  }
  char* end = nullptr;
  uint64_t t = std::strtoull(s, &end, 10);
  if (end == s) return std::nullopt;
  return t;
}

// The PID namespace the PIDs of this tool's records mean something in: a
// tool in another one (cr_recv in a PID namespace of its own, a container
// sharing /run) sees other processes, or none, under the same numbers.
unsigned long long pid_namespace() {
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

// The first 8 hex digits of this boot's id: /run is not a tmpfs everywhere
// (some machines keep it on their root disk), and after a reboot the same PID, start
// time and PID namespace (the initial one's number is fixed) can name
// another process (a service started at the same point of every boot).
const std::string& boot_tag() {
  static const std::string tag = [] {
    auto id = boot_id();
    std::string t;
    for (char c : id.value_or("")) {
      if (std::isxdigit(static_cast<unsigned char>(c))) t += c;
      if (t.size() == 8) break;
    }
    return t.size() == 8 ? t : std::string("00000000");
  }();
  return tag;
}

// PID-STARTTIME-PIDNS-BOOT.
std::optional<std::string> entry_name(pid_t pid) {
  auto t = start_time(pid);
  if (!t) return std::nullopt;
  return std::to_string(pid) + "-" + std::to_string(*t) + "-" + std::to_string(pid_namespace()) +
         "-" + boot_tag();
}

// Records of processes gone, among those of this PID namespace only (a
// record of another namespace names a PID this tool cannot look up: it
// removed other namespaces' live records, so their next incremental saved
// everything).
void drop_dead_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const unsigned long long ns = pid_namespace();
  std::vector<std::string> dead;
  while (dirent* e = ::readdir(d)) {
    int pid = 0;
    unsigned long long t = 0, in = 0;
    char boot[9] = "";
    const int n = std::sscanf(e->d_name, "%d-%llu-%llu-%8[0-9a-f]", &pid, &t, &in, boot);
    if (n < 3 || in != ns) continue;
    auto now = start_time(pid);
    // An earlier boot's record (or one from before records named the boot)
    // describes a process that is gone, whatever PID holds the number now.
    if (n != 4 || boot_tag() != boot || !now || *now != t) dead.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& p : dead) ::unlink(p.c_str());
}

}  // namespace

std::string describe(const LedgerEntry& e) {
  char id[9];
  std::snprintf(id, sizeof id, "%02x%02x%02x%02x", e.chain_id[0], e.chain_id[1], e.chain_id[2],
                e.chain_id[3]);
  return "generation " + std::to_string(e.generation) + " of chain " + id + "...";
}

std::optional<std::string> ledger_side_file(pid_t pid, const std::string& suffix, bool create_dir) {
  auto name = entry_name(pid);
  if (!name) return std::nullopt;
  const std::string dir = ledger_dir();
  if (create_dir && !make_private_dirs(ledger_base(), dir).ok()) return std::nullopt;
  return dir + "/" + *name + suffix;
}

namespace {
std::string side_header(const TrackerState& s, uint64_t generation) {
  return hex_id(s.chain_id) + " " + std::to_string(generation) + "\n";
}
}  // namespace

namespace {
// What waits while a LedgerHold lives: side files by path (read from here
// meanwhile), and the removal of dead processes' records.
struct Held {
  std::mutex mu;
  int holds = 0;
  std::map<std::string, std::string> text;
  bool drop_dead = false;
};
Held& held() {
  static Held h;
  return h;
}

// Under the holds' lock: while a LedgerHold lives, `park` what has to wait
// (into the Held state) and say so; else the caller does it at once.
template <class Park>
bool park_if_held(Park park) {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.holds == 0) return false;
  park(h);
  return true;
}

// Reads /proc/PID/stat of every record's process: 0.2-0.7 ms with a few
// hundred records here, too long for a freeze.
void drop_dead_entries_unless_held(const std::string& dir) {
  if (!park_if_held([](Held& h) { h.drop_dead = true; })) drop_dead_entries(dir);
}

std::optional<std::string> held_text(const std::string& path) {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.text.find(path);
  if (it == h.text.end()) return std::nullopt;
  return it->second;
}

// The side file's whole text, header included.
std::optional<std::string> read_side_file(pid_t pid, const std::string& suffix) {
  auto path = ledger_side_file(pid, suffix, false);
  if (!path) return std::nullopt;
  if (auto t = held_text(*path)) return t;
  auto text = read_file(*path);
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
}
}  // namespace

std::optional<std::string> read_side_state(pid_t pid, const std::string& suffix,
                                           const TrackerState& s) {
  auto text = read_side_file(pid, suffix);
  if (!text) return std::nullopt;
  const std::string want = side_header(s, s.prev_generation);
  if (text->compare(0, want.size(), want) != 0) return std::nullopt;  // another parent
  return text->substr(want.size());
}

std::optional<std::string> read_side_state_any_chain(pid_t pid, const std::string& suffix) {
  auto text = read_side_file(pid, suffix);
  if (!text) return std::nullopt;
  const size_t eol = text->find('\n');
  if (eol == std::string::npos) return std::nullopt;
  return text->substr(eol + 1);
}

void write_side_state(pid_t pid, const std::string& suffix, const TrackerState& s,
                      const std::string& lines) {
  auto path = ledger_side_file(pid, suffix, true);
  if (!path) return;
  std::string text = side_header(s, s.generation) + lines;
  if (!park_if_held([&](Held& h) { h.text[*path] = std::move(text); }))
    (void)replace_file(*path, text);  // best effort: hints
}

LedgerHold::LedgerHold() {
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mu);
  ++h.holds;
}

LedgerHold::~LedgerHold() {
  write();
  Held& h = held();
  std::lock_guard<std::mutex> lock(h.mu);
  --h.holds;
}

void LedgerHold::write() {
  std::map<std::string, std::string> files;
  bool drop_dead = false;
  {
    Held& h = held();
    std::lock_guard<std::mutex> lock(h.mu);
    files.swap(h.text);
    std::swap(drop_dead, h.drop_dead);
  }
  if (drop_dead) drop_dead_entries(ledger_dir());
  for (const auto& [path, text] : files) (void)replace_file(path, text);
}

std::optional<std::string> boot_id() {
  auto text = read_file("/proc/sys/kernel/random/boot_id");
  if (!text.ok() || text->size() < 32) return std::nullopt;
  return text->substr(0, text->find('\n'));
}

std::optional<std::string> runtime_dir(const std::string& leaf) {
  const std::string dir = libckpt_dir() + "/" + leaf;
  if (!make_private_dirs(ledger_base(), dir).ok()) return std::nullopt;
  return dir;
}

std::optional<LedgerEntry> read_ledger(pid_t pid) {
  auto name = entry_name(pid);
  if (!name) return std::nullopt;
  // A directory others could write into proves nothing: no record then.
  if (!make_private_dirs(ledger_base(), ledger_dir()).ok()) return std::nullopt;
  auto text = read_file(ledger_dir() + "/" + *name);
  if (!text.ok()) return std::nullopt;
  LedgerEntry e;
  unsigned long long gen = 0, claim = 0;
  char hex[33] = "";
  if (std::sscanf(text->c_str(), "%32s %llu %llu", hex, &gen, &claim) < 2 ||
      std::string(hex).size() != 32)
    return std::nullopt;
  e.claim = claim;
  for (size_t i = 0; i < 16; ++i)
    e.chain_id[i] = uint8_t(std::stoul(std::string(hex + 2 * i, 2), nullptr, 16));
  e.generation = gen;
  return e;
}

Status write_ledger(pid_t pid, const LedgerEntry& e) {
  auto name = entry_name(pid);
  if (!name) return make_error(ESRCH, "no process " + std::to_string(pid));
  const std::string dir = ledger_dir();
  CKPT_TRY(make_private_dirs(ledger_base(), dir));
  drop_dead_entries_unless_held(dir);
  std::string text;
  char b[3];
  for (uint8_t c : e.chain_id) {
    std::snprintf(b, sizeof b, "%02x", c);
    text += b;
  }
  text += " " + std::to_string(e.generation);
  if (e.claim) text += " " + std::to_string(e.claim);
  text += "\n";
  return replace_file(dir + "/" + *name, text);
}

void record_arm(pid_t pid, const TrackerState& s) {
  (void)write_ledger(pid, LedgerEntry{s.chain_id, s.generation});
}

uint64_t claim_collect(pid_t pid, const TrackerState& s) {
  if (s.generation == s.prev_generation) return 0;
  auto last = read_ledger(pid);
  if (!last || !last->same_generation(LedgerEntry{s.chain_id, s.prev_generation})) return 0;
  LedgerEntry mine{s.chain_id, s.generation};
  while (mine.claim == 0)
    if (::getrandom(&mine.claim, sizeof mine.claim, 0) != ssize_t(sizeof mine.claim)) return 0;
  return write_ledger(pid, mine).ok() ? mine.claim : 0;
}

Result<std::string> begin_collect(pid_t pid, const TrackerState& s, uint64_t claim) {
  const LedgerEntry parent{s.chain_id, s.prev_generation};
  auto last = read_ledger(pid);
  if (!last) return std::string("no record of the generation that last reset tracking");
  if (claim) {
    // Exactly this tool run's claim: a claim by another run of the same
    // generation, or any record written since, means someone else may have
    // reset tracking after the claim.
    if (!(*last == LedgerEntry{s.chain_id, s.generation, claim}))
      return "tracking was reset by " + describe(*last) + " since " + describe(parent) +
             " (this tool's claim of generation " + std::to_string(s.generation) + " was replaced)";
    return std::string();
  }
  if (!last->same_generation(parent))
    return "tracking was reset by " + describe(*last) + " since " + describe(parent);
  if (s.generation != s.prev_generation)
    if (Status w = write_ledger(pid, LedgerEntry{s.chain_id, s.generation}); !w.ok())
      return w.error().context("recording the tracking state");
  return std::string();
}

}  // namespace ckpt::dirty
