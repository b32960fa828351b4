// Gives a restored thread its checkpointed scheduling and credentials. Runs
// after every other step that needs the restorer's privileges for that
// thread (and for the leader, after its resource limits), because it drops
// them: scheduling is set from outside (sched_setaffinity, setpriority,
// sched_setscheduler on the TID), credentials by calls injected into the
// thread, since a thread can only change its own.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "image/credentials.hpp"
#include "proc/inject.hpp"
#include "restore/address_space.hpp"

namespace ckpt::restore {

Status restore_scheduling(pid_t tid, const image::TaskCredentials& c);

// Sets uids, gids, groups, the capability sets, securebits and
// no_new_privs of the thread `rs` runs in, then reads them back and
// compares. Nothing is called when they already are the saved ones (a
// restore by the same unprivileged user). Securebits not read at checkpoint
// keep the value the thread has.
Status restore_credentials(proc::RemoteSyscall& rs, AddressSpaceBuilder& builder,
                           const image::TaskCredentials& c);

// Both, for thread `index` of `meta` running as `tid`; nothing for an image
// without credentials (an old image: docs/security.md).
Status restore_identity(proc::RemoteSyscall& rs, AddressSpaceBuilder& builder,
                        const image::ImageMeta& meta, size_t index);

// For a rollback in place (cr_pause), which keeps the live threads and
// their credentials: refuses when a thread's credentials differ from the
// checkpoint's (the process changed them since; nothing is changed here).
Status check_credentials_unchanged(pid_t pid, const image::ImageMeta& meta);

}  // namespace ckpt::restore
