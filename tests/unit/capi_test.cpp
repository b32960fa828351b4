// The C API (ckpt/ckpt.h): bad input is -EINVAL with a one-line message on
// the handle and the thread, never a crash; a real process checkpointed and
// restored attached (the caller's child) and detached (not its child).
#include <ckpt/ckpt.h>
#include <ckpt/plan.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "image_test_util.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CKPT_HAS_ASAN 1
#endif
#endif
#ifndef CKPT_HAS_ASAN
#define CKPT_HAS_ASAN 0
#endif

namespace {

struct Ctx {
  ckpt_ctx* c = nullptr;
  Ctx() { EXPECT_EQ(ckpt_ctx_new(CKPT_API_VERSION, &c), 0); }
  ~Ctx() { ckpt_ctx_free(c); }
};

std::string msg(const ckpt_ctx* c) {
  return ckpt_ctx_message(c);
}

TEST(CApi, UnknownVersionAndNullOut) {
  ckpt_ctx* c = reinterpret_cast<ckpt_ctx*>(0x1);
  EXPECT_EQ(ckpt_ctx_new(0, &c), -EINVAL);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(ckpt_last_message()).find("unknown API version 0"), std::string::npos);
  EXPECT_EQ(ckpt_ctx_new(CKPT_API_VERSION + 1, &c), -EINVAL);
  EXPECT_NE(std::string(ckpt_last_message()).find("unknown API version"), std::string::npos);
  EXPECT_EQ(ckpt_ctx_new(-7, &c), -EINVAL);
  EXPECT_EQ(ckpt_ctx_new(CKPT_API_VERSION, nullptr), -EINVAL);
  EXPECT_STREQ(ckpt_ctx_message(nullptr), ckpt_last_message());
  ckpt_ctx_free(nullptr);
  EXPECT_STRNE(ckpt_version(), "");
}

TEST(CApi, NullHandleEverywhere) {
  ckpt_checkpoint_opts co{sizeof co, "/tmp", 1, 0, nullptr};
  ckpt_restore_opts ro{sizeof ro, "/tmp", 0, 0};
  ckpt_pause_opts po{sizeof po, "/tmp", 1};
  ckpt_migrate_opts mo{};
  mo.size = sizeof mo;
  size_t n = 0;
  ckpt_generation_info gi{sizeof gi};
  EXPECT_EQ(ckpt_checkpoint_full(nullptr, &co, nullptr), -EINVAL);
  EXPECT_NE(std::string(ckpt_last_message()).find("handle is NULL"), std::string::npos);
  EXPECT_EQ(ckpt_checkpoint_incremental(nullptr, &co, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_restore(nullptr, &ro, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_generations(nullptr, "/tmp", nullptr, &n), -EINVAL);
  EXPECT_EQ(ckpt_info(nullptr, "/tmp", 0, &gi), -EINVAL);
  EXPECT_EQ(ckpt_verify(nullptr, "/tmp", 0), -EINVAL);
  EXPECT_EQ(ckpt_compact(nullptr, "/tmp", nullptr), -EINVAL);
  EXPECT_EQ(ckpt_pause(nullptr, &po, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_migrate(nullptr, &mo, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_set_progress(nullptr, nullptr, nullptr), -EINVAL);
}

TEST(CApi, NullAndShortOptions) {
  Ctx x;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, nullptr, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("ckpt_checkpoint_opts is NULL"), std::string::npos) << msg(x.c);
  ckpt_checkpoint_opts co{0, "/tmp/x", 1, 0, nullptr};
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("too small"), std::string::npos) << msg(x.c);
  co.size = CKPT_CHECKPOINT_OPTS_SIZE_V1 - 1;
  EXPECT_EQ(ckpt_checkpoint_incremental(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("too small"), std::string::npos);
  ckpt_restore_opts ro{sizeof(size_t), "/tmp/x", 0, 0};
  EXPECT_EQ(ckpt_restore(x.c, &ro, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("ckpt_restore_opts: size"), std::string::npos) << msg(x.c);
  EXPECT_EQ(ckpt_restore(x.c, nullptr, nullptr), -EINVAL);
  ckpt_pause_opts po{3, "/tmp/x", 1};
  EXPECT_EQ(ckpt_pause(x.c, &po, nullptr), -EINVAL);
  ckpt_migrate_opts mo{};
  mo.size = CKPT_MIGRATE_OPTS_SIZE_V1 - 8;
  EXPECT_EQ(ckpt_migrate(x.c, &mo, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("too small"), std::string::npos);
  EXPECT_EQ(ckpt_migrate(x.c, nullptr, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_pause(x.c, nullptr, nullptr), -EINVAL);
  // The appended compress_level: 0 to 19.
  ckpt_checkpoint_opts cz{};
  cz.size = sizeof cz;
  cz.dir = "/tmp/x";
  cz.pid = 1;
  cz.compress_level = 42;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &cz, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("compress_level"), std::string::npos) << msg(x.c);
  // The thread's message follows the handle's.
  EXPECT_EQ(msg(x.c), ckpt_last_message());
}

TEST(CApi, NewerStructsAndBadFields) {
  Ctx x;
  // A caller built against a newer, longer struct: accepted when the fields
  // this library does not know are zero, refused otherwise.
  struct Longer {
    ckpt_checkpoint_opts o;
    uint64_t future;
  } l{};
  l.o.size = sizeof l;
  l.o.dir = "/nonexistent-ckpt-capi";
  l.o.pid = 0x3ffffff0;  // no such process
  l.future = 1;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &l.o, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("does not know"), std::string::npos) << msg(x.c);
  l.future = 0;
  int rc = ckpt_checkpoint_full(x.c, &l.o, nullptr);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -EINVAL) << msg(x.c);  // got past the struct: the PID does not exist

  ckpt_checkpoint_opts co{sizeof co, nullptr, 1, 0, nullptr};
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("no directory"), std::string::npos);
  co.dir = "";
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  co.dir = "/tmp/x";
  co.pid = 0;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("no target PID"), std::string::npos);
  co.pid = 1;
  co.flags = 1u << 20;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("unknown flags"), std::string::npos);
  co.flags = CKPT_FORCE;
  EXPECT_EQ(ckpt_checkpoint_incremental(x.c, &co, nullptr), -EINVAL);
  co.flags = 0;
  ckpt_checkpoint_stats st{};  // size not set
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, &st), -EINVAL);
  EXPECT_NE(msg(x.c).find("size is not set"), std::string::npos);

  ckpt_restore_opts ro{sizeof ro, "/tmp/x", 0, 1u << 9};
  EXPECT_EQ(ckpt_restore(x.c, &ro, nullptr), -EINVAL);
  size_t n = 0;
  EXPECT_EQ(ckpt_generations(x.c, "/tmp", nullptr, nullptr), -EINVAL);
  EXPECT_EQ(ckpt_generations(x.c, nullptr, nullptr, &n), -EINVAL);
  EXPECT_EQ(ckpt_info(x.c, "/tmp", 0, nullptr), -EINVAL);
  ckpt_generation_info gi{};
  EXPECT_EQ(ckpt_info(x.c, "/tmp", 0, &gi), -EINVAL);
  EXPECT_EQ(ckpt_verify(x.c, nullptr, 0), -EINVAL);
  ckpt_migrate_opts mo{};
  mo.size = sizeof mo;
  mo.to = "127.0.0.1:1";
  mo.pid = 1;
  EXPECT_EQ(ckpt_migrate(x.c, &mo, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("no token file"), std::string::npos);

  // A success clears the handle's message.
  EXPECT_EQ(ckpt_set_progress(x.c, nullptr, nullptr), 0);
  EXPECT_EQ(msg(x.c), "");
}

TEST(CApi, FreedAndGarbageHandlesAreRefused) {
  ckpt_ctx* c = nullptr;
  ASSERT_EQ(ckpt_ctx_new(CKPT_API_VERSION, &c), 0);
  ckpt_ctx_free(c);
  EXPECT_EQ(ckpt_set_progress(c, nullptr, nullptr), -EINVAL);
  EXPECT_NE(std::string(ckpt_last_message()).find("not a handle"), std::string::npos)
      << ckpt_last_message();
  EXPECT_EQ(ckpt_verify(c, "/tmp", 0), -EINVAL);
  EXPECT_NE(std::string(ckpt_ctx_message(c)).find("not a handle"), std::string::npos);
  ckpt_ctx_free(c);  // twice: ignored
  // Never read through: an address nothing maps.
  auto* garbage = reinterpret_cast<ckpt_ctx*>(uintptr_t(0xdead0000));
  EXPECT_EQ(ckpt_verify(garbage, "/tmp", 0), -EINVAL);
  EXPECT_EQ(ckpt_set_progress(garbage, nullptr, nullptr), -EINVAL);
  EXPECT_NE(std::string(ckpt_ctx_message(garbage)).find("not a handle"), std::string::npos);
  ckpt_ctx_free(garbage);
}

TEST(CApi, ReservedMustBeZero) {
  Ctx x;
  ckpt_checkpoint_opts co{};
  co.size = sizeof co;
  co.dir = "/tmp/x";
  co.pid = 1;
  co.reserved = 1;
  EXPECT_EQ(ckpt_checkpoint_full(x.c, &co, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("reserved"), std::string::npos) << msg(x.c);
  ckpt_restore_opts ro{};
  ro.size = sizeof ro;
  ro.dir = "/tmp/x";
  ro.reserved = 2;
  EXPECT_EQ(ckpt_restore(x.c, &ro, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("reserved"), std::string::npos) << msg(x.c);
  ckpt_pause_opts po{};
  po.size = sizeof po;
  po.dir = "/tmp/x";
  po.pid = 1;
  po.flags = 1u << 7;
  EXPECT_EQ(ckpt_pause(x.c, &po, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("unknown flags"), std::string::npos) << msg(x.c);
  ckpt_migrate_opts mo{};
  mo.size = sizeof mo;
  mo.reserved = 4;
  EXPECT_EQ(ckpt_migrate(x.c, &mo, nullptr), -EINVAL);
  EXPECT_NE(msg(x.c).find("reserved"), std::string::npos) << msg(x.c);
}

TEST(CApi, VersionsAgree) {
  EXPECT_EQ(ckpt_version_number(), unsigned(CKPT_VERSION_NUMBER));
  EXPECT_EQ(std::string(ckpt_version()), std::to_string(CKPT_VERSION_MAJOR) + "." +
                                             std::to_string(CKPT_VERSION_MINOR) + "." +
                                             std::to_string(CKPT_VERSION_PATCH));
  EXPECT_EQ(ckpt_check_version(CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR), 0);
  EXPECT_EQ(ckpt_check_version(CKPT_VERSION_MAJOR, 0), 0);
  EXPECT_EQ(ckpt_check_version(CKPT_VERSION_MAJOR + 1, 0), -EINVAL);
  EXPECT_NE(std::string(ckpt_last_message()).find("not compatible"), std::string::npos);
  EXPECT_EQ(ckpt_check_version(CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR + 1), -EINVAL);
}

TEST(CApi, OutputBeyondTheLibrarysStructIsZeroed) {
  // A caller built against a newer, longer result struct.
  struct Longer {
    ckpt_plan_interval_result r;
    uint64_t future;
  } out;
  std::memset(&out, 0xa5, sizeof out);
  out.r.size = sizeof out;
  ckpt_plan_interval_opts in{};
  in.size = sizeof in;
  in.checkpoint_s = 23;
  in.restart_s = 30;
  in.mtbf_s = 4500;
  ASSERT_EQ(ckpt_plan_interval(&in, &out.r, nullptr, 0), 0) << ckpt_last_message();
  EXPECT_EQ(out.r.size, sizeof out);
  EXPECT_GT(out.r.young_daly_period_s, 400);
  EXPECT_EQ(out.future, 0u);
  // plan.h's failures are the thread's message too.
  in.mtbf_s = -1;
  char buf[8];
  EXPECT_EQ(ckpt_plan_interval(&in, &out.r, buf, sizeof buf), -EINVAL);
  EXPECT_NE(std::string(ckpt_last_message()), "");
  EXPECT_EQ(std::strlen(buf), sizeof buf - 1);  // truncated to the caller's buffer
}

// Out of memory inside the library (a tiny RLIMIT_AS, in a child): every
// call returns, none terminates the caller, and the message says so.
TEST(CApi, OutOfMemoryIsAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__) || CKPT_HAS_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator ends the process when memory runs out instead of "
                  "throwing std::bad_alloc: nothing to catch";
#endif
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ckpt_ctx* c = nullptr;
    if (ckpt_ctx_new(CKPT_API_VERSION, &c) != 0) _exit(10);
    // Room for the call's first steps, not for its buffers.
    rlimit lim{};
    std::ifstream status("/proc/self/status");
    unsigned long vm_kb = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoul(line.substr(7));
    lim.rlim_cur = lim.rlim_max = (vm_kb + 256) * 1024;
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(11);
    int enomem = 0;
    for (int i = 0; i < 20; ++i) {
      ckpt_plan_mesh mesh{};
      mesh.size = sizeof mesh;
      mesh.q = 3;
      for (int d = 0; d < 3; ++d) mesh.dims[d] = 200;  // 8e6 nodes: a rank map of 32 MB
      mesh.spare_dims = 1;
      mesh.thickness = 1;
      int ranks[4];
      size_t n = 4;
      int failed = 0;
      int rc =
          ckpt_plan_substitute(&mesh, &failed, 1, CKPT_PLAN_SLIDE_HYBRID, ranks, &n, nullptr, 0);
      if (rc == -ENOMEM && std::strstr(ckpt_last_message(), "out of memory")) ++enomem;
      (void)ckpt_verify(c, "/proc/self", 0);  // any answer, but an answer
    }
    _exit(enomem > 0 ? 0 : 12);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st)) << "the child was killed by signal " << WTERMSIG(st)
                             << " (an exception crossed the C API?)";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "no call reported ENOMEM (12: none; 10, 11: setup)";
}

TEST(CApi, MessagesArePerThread) {
  Ctx x;
  ckpt_ctx* bad = nullptr;
  EXPECT_EQ(ckpt_ctx_new(99, &bad), -EINVAL);
  std::string other;
  std::thread t([&] { other = ckpt_last_message(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(ckpt_last_message()), "");
  EXPECT_EQ(msg(x.c), "");  // another handle is untouched
}

TEST(CApi, EmptyDirectoryAndMissingGeneration) {
  ckpt::testing::TempDir tmp;
  Ctx x;
  size_t n = 0;
  EXPECT_EQ(ckpt_generations(x.c, tmp.path().c_str(), nullptr, &n), 0) << msg(x.c);
  EXPECT_EQ(n, 0u);
  ckpt_generation_info gi{sizeof gi};
  EXPECT_EQ(ckpt_info(x.c, tmp.path().c_str(), 0, &gi), -ENOENT);
  EXPECT_NE(msg(x.c).find("no checkpoint"), std::string::npos);
  EXPECT_EQ(ckpt_verify(x.c, tmp.path().c_str(), 0), -ENOENT);
}

// `argv` (argv[0] a path) with nothing but /dev/null on its fds, returned
// once it has exec'd (its end of a close-on-exec pipe closed).
pid_t start_quiet(std::initializer_list<const char*> args) {
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  argv.push_back(nullptr);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != p[1]) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(p[1]);
  char c;
  while (read(p[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(p[0]);
  return pid;
}

pid_t start_sleep() {
  return start_quiet({"/bin/sleep", "60"});
}

// A job of three: a shell and its two `sleep`s.
pid_t start_job() {
  const pid_t pid = start_quiet({"/bin/sh", "-c", "sleep 60 & sleep 60 & wait"});
  if (pid <= 0) return pid;
  // Until both children run `sleep`.
  for (int i = 0; i < 500; ++i) {
    std::ifstream kids("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                       "/children");
    int a = 0, b = 0;
    if ((kids >> a >> b) && a > 0 && b > 0) {
      char ea[64] = {}, eb[64] = {};
      if (readlink(("/proc/" + std::to_string(a) + "/exe").c_str(), ea, sizeof ea - 1) > 0 &&
          readlink(("/proc/" + std::to_string(b) + "/exe").c_str(), eb, sizeof eb - 1) > 0 &&
          std::strstr(ea, "sleep") && std::strstr(eb, "sleep"))
        return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  size_t p = line.rfind(')');
  if (p == std::string::npos) return -1;
  char state;
  int ppid = -1;
  std::sscanf(line.c_str() + p + 2, "%c %d", &state, &ppid);
  return ppid;
}

// Progress reports per phase, and those made on another thread than the
// caller's (ckpt.h: none).
std::thread::id g_caller;
std::atomic<int> g_off_thread{0};
void on_progress(void* user, int phase, uint64_t done, uint64_t total) {
  if (std::this_thread::get_id() != g_caller) ++g_off_thread;
  auto* calls = static_cast<int*>(user);
  ASSERT_TRUE(phase == CKPT_PHASE_CHECKPOINT || phase == CKPT_PHASE_RESTORE);
  EXPECT_LE(done, total);
  ++calls[phase];
}

TEST(CApi, CheckpointAndRestoreAttachedAndDetached) {
  if (geteuid() != 0) GTEST_SKIP() << "restore with the original PID needs root";
  ckpt::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ck";
  Ctx x;
  int calls[3] = {0, 0, 0};
  g_caller = std::this_thread::get_id();
  g_off_thread = 0;
  ASSERT_EQ(ckpt_set_progress(x.c, on_progress, calls), 0);
  pid_t pid = start_sleep();
  ASSERT_GT(pid, 0);
  ckpt_checkpoint_opts co{sizeof co, dir.c_str(), pid, CKPT_KILL, "hash"};
  ckpt_checkpoint_stats st{sizeof st};
  ASSERT_EQ(ckpt_checkpoint_full(x.c, &co, &st), 0) << msg(x.c);
  // CKPT_KILL: the target is gone (the library, its tracer, may have reaped
  // our child already).
  int status = 0;
  pid_t w = waitpid(pid, &status, 0);
  if (w == pid)
    EXPECT_TRUE(WIFSIGNALED(status));
  else
    EXPECT_EQ(errno, ECHILD);
  EXPECT_NE(kill(pid, 0), 0);
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.parent_generation, 0u);
  EXPECT_EQ(st.processes, 1u);
  EXPECT_STREQ(st.tracker, "hash");
  EXPECT_GT(st.bytes_written, 0u);
  EXPECT_GT(calls[CKPT_PHASE_CHECKPOINT], 0);
  EXPECT_EQ(calls[CKPT_PHASE_RESTORE], 0);
  EXPECT_EQ(g_off_thread, 0) << "progress reported on a thread of the library's own";

  uint64_t gens[4];
  size_t n = 0;
  EXPECT_EQ(ckpt_generations(x.c, dir.c_str(), gens, &n), -ERANGE);
  EXPECT_EQ(n, 1u);
  n = 4;
  ASSERT_EQ(ckpt_generations(x.c, dir.c_str(), gens, &n), 0);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(gens[0], 1u);
  ckpt_generation_info gi{sizeof gi};
  ASSERT_EQ(ckpt_info(x.c, dir.c_str(), 0, &gi), 0) << msg(x.c);
  EXPECT_EQ(gi.pid, pid);
  EXPECT_STREQ(gi.comm, "sleep");
  EXPECT_EQ(gi.processes, 1u);
  EXPECT_EQ(gi.threads, 1u);
  EXPECT_EQ(ckpt_verify(x.c, dir.c_str(), 0), 0) << msg(x.c);

  // Attached: our child, reaped here.
  ckpt_restore_opts ro{sizeof ro, dir.c_str(), 0, 0};
  ckpt_restore_stats rs{sizeof rs};
  ASSERT_EQ(ckpt_restore(x.c, &ro, &rs), 0) << msg(x.c);
  EXPECT_EQ(rs.pid, pid);
  EXPECT_EQ(rs.processes, 1u);
  EXPECT_EQ(parent_of(pid), getpid());
  EXPECT_GT(calls[CKPT_PHASE_RESTORE], 0);
  EXPECT_EQ(g_off_thread, 0) << "restore progress reported on a thread of the library's own";
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);

  // Detached: runs, but is not our child; its progress still reaches the
  // callback, on this thread.
  ro.flags = CKPT_RESTORE_DETACH;
  rs = {sizeof rs};
  const int attached_calls = calls[CKPT_PHASE_RESTORE];
  ASSERT_EQ(ckpt_restore(x.c, &ro, &rs), 0) << msg(x.c);
  EXPECT_GT(calls[CKPT_PHASE_RESTORE], attached_calls) << "no progress from a detached restore";
  EXPECT_EQ(g_off_thread, 0) << "detached progress reported on another thread";
  EXPECT_EQ(rs.pid, pid);
  EXPECT_NE(parent_of(pid), getpid());
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  char exe[256] = {};
  EXPECT_GT(readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1), 0);
  EXPECT_NE(std::string(exe).find("sleep"), std::string::npos) << exe;
  kill(pid, SIGKILL);
  for (int i = 0; i < 500 && kill(pid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  // A generation the directory lacks: refused, not "verified".
  EXPECT_EQ(ckpt_verify(x.c, dir.c_str(), 77), -ENOENT);
  EXPECT_NE(msg(x.c).find("no generation 77"), std::string::npos) << msg(x.c);

  // A directory of chains as cr_run writes them: its newest chain.
  const std::string run = tmp.path() + "/run";
  ASSERT_EQ(mkdir(run.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((run + "/chain-000001").c_str(), 0700), 0);  // nothing committed
  ASSERT_EQ(rename(dir.c_str(), (run + "/chain-000002").c_str()), 0);
  n = 4;
  ASSERT_EQ(ckpt_generations(x.c, run.c_str(), gens, &n), 0) << msg(x.c);
  EXPECT_EQ(n, 1u);
  gi = {sizeof gi};
  ASSERT_EQ(ckpt_info(x.c, run.c_str(), 0, &gi), 0) << msg(x.c);
  EXPECT_EQ(gi.pid, pid);
  EXPECT_EQ(ckpt_verify(x.c, run.c_str(), 0), 0) << msg(x.c);
  EXPECT_EQ(ckpt_verify(x.c, run.c_str(), 77), -ENOENT);
  ASSERT_EQ(rename((run + "/chain-000002").c_str(), dir.c_str()), 0);

  // Damage is found by ckpt_verify, with the cause on the handle.
  {
    std::fstream f(dir + "/gen-000001/pages.img", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(0, std::ios::end);
    auto size = f.tellp();
    f.seekp(size / 2);
    f.put('\x5a').put('\xa5').put('\x5a').put('\xa5');
  }
  EXPECT_LT(ckpt_verify(x.c, dir.c_str(), 0), 0);
  EXPECT_NE(msg(x.c), "");
}

// A job through the C API: checkpointed with CKPT_TREE, rolled back with
// CKPT_PAUSE_TREE (kill and restore: the root becomes the caller's child),
// its tracking ended with ckpt_untrack.
TEST(CApi, AJobIsCheckpointedPausedAndUntracked) {
  if (geteuid() != 0) GTEST_SKIP() << "restore with the original PIDs needs root";
  ckpt::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ck";
  Ctx x;
  const pid_t root = start_job();
  ASSERT_GT(root, 0);
  ckpt_checkpoint_opts co{};
  co.size = sizeof co;
  co.dir = dir.c_str();
  co.pid = root;
  co.flags = CKPT_TREE;
  ckpt_checkpoint_stats st{sizeof st};
  ASSERT_EQ(ckpt_checkpoint_full(x.c, &co, &st), 0) << msg(x.c);
  EXPECT_EQ(st.processes, 3u);
  ckpt_pause_opts po{};
  po.size = sizeof po;
  po.dir = dir.c_str();
  po.pid = root;
  po.flags = CKPT_PAUSE_TREE;
  ckpt_pause_stats ps{sizeof ps};
  ASSERT_EQ(ckpt_pause(x.c, &po, &ps), 0) << msg(x.c);
  EXPECT_EQ(ps.restarted, 1);
  EXPECT_EQ(ps.processes, 3u);
  EXPECT_EQ(ps.pid, root);
  EXPECT_EQ(parent_of(root), getpid());
  // The restored job's tracking (armed by the restore when the chain's
  // tracker is a kernel one) handed back.
  ckpt_untrack_stats us{sizeof us};
  ASSERT_EQ(ckpt_untrack(x.c, dir.c_str(), &us), 0) << msg(x.c);
  EXPECT_EQ(us.processes, 3u);
  EXPECT_LE(us.released, 3u);
  EXPECT_STREQ(us.tracker, st.tracker);
  {
    std::ifstream kids("/proc/" + std::to_string(root) + "/task/" + std::to_string(root) +
                       "/children");
    for (int k; kids >> k;) kill(k, SIGKILL);
  }
  kill(root, SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(root, &status, 0), root);
}

}  // namespace
