// Self-tests that passed in this boot. A tracker's self-test asks the running
// kernel a question whose answer changes only with the kernel, i.e. at the
// next boot (kexec included: a new boot id). pagemap-scan's takes 1-20 ms of
// faulting in and zapping memory, which every tool run paid once: the record
// lets the runs after the first skip it.
#pragma once

#include <optional>
#include <string>

namespace ckpt::dirty {

// Whether `name`'s self-test passed earlier in this boot: a record in the
// caller's private runtime directory (dirty/ledger.hpp, runtime_dir) holding
// this boot's id. A record another user could have written is not read.
bool self_test_passed_this_boot(const std::string& name);
// Records that it passed (best effort: without the record, the next run tests
// again).
void record_self_test_pass(const std::string& name);

// The same kind of record with a payload (what a self-test learnt, e.g. the
// layout of a kernel structure): nullopt when there is none for this boot.
std::optional<std::string> boot_record(const std::string& name);
void write_boot_record(const std::string& name, const std::string& payload);

}  // namespace ckpt::dirty
