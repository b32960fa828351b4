// Kernel objects a checkpoint refuses, named as a user knows them: the
// refusal says what the program holds, not how /proc spells it.
#pragma once

#include <string>
#include <utility>

namespace ckpt::dump {

// memfd_secret(2) memory shows as "/secretmem (deleted)", as an fd and as a
// mapping. The kernel keeps its pages out of reach of every other process
// (process_vm_readv and /proc/PID/mem fail), so it cannot be saved.
inline bool is_secretmem(const std::string& path) {
  return path == "/secretmem" || path.starts_with("/secretmem ");
}
inline constexpr const char* kSecretmemRefusal =
    "memfd_secret memory (the kernel lets no other process read it): not supported";

// " (an io_uring instance)" for "anon_inode:[io_uring]", "" for a kind it
// does not know.
inline std::string anon_inode_name(const std::string& link) {
  static const std::pair<const char*, const char*> names[] = {
      {"[io_uring]", "an io_uring instance"},
      {"[fanotify]", "a fanotify instance"},
      {"[pidfd]", "a pidfd"},
      {"[userfaultfd]", "a userfaultfd"},
      {"[perf_event]", "a perf event"},
      {"bpf-map", "a BPF map"},
      {"bpf-prog", "a BPF program"},
      {"bpf_link", "a BPF link"},
      {"[fscontext]", "a filesystem context"},
      {"[secretmem]", "memfd_secret memory"},
      {"[kvm", "a KVM object"},
      {"[dmabuf]", "a DMA buffer"},
      {"[sync_file]", "a sync file"},
      {"[landlock-ruleset]", "a Landlock ruleset"},
  };
  const std::string kind = link.substr(link.find(':') + 1);
  for (const auto& [k, name] : names)
    if (kind.starts_with(k)) return std::string(" (") + name + ")";
  return "";
}

}  // namespace ckpt::dump
