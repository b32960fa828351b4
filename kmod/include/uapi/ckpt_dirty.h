/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ckpt_dirty: which pages a process wrote since the last collect.
 *
 * The one interface between the ckpt_dirty kernel module (kmod/) and its
 * users (libckpt's "kmod" tracker, the module tests, the benchmarks). Plain C,
 * fixed-size little-endian structs, safe to include from C and C++.
 *
 * Life cycle, all through ioctls on /dev/ckpt_dirty:
 *   VERSION  what the loaded module speaks (check first: the ioctl numbers
 *            below encode the struct sizes, so another layout gives ENOTTY);
 *   START    start (or restart) tracking the address space of a process:
 *            every page counts as clean from now on. Returns a token;
 *   COLLECT  the pages of [start, end) written since START or the previous
 *            COLLECT, as a bitmap, and tracking restarts for them from now.
 *            Takes the newest token and returns the next one: a caller that
 *            stores the token between runs learns (ESTALE) when anybody else
 *            reset the tracking in between, or when its own run never
 *            finished. Tokens are in 1 .. 2^31-1;
 *   STOP     end tracking (also happens by itself when the process exits or
 *            execs, and when the module is unloaded).
 * Tracking belongs to the address space, not to the file descriptor: a later
 * process may continue it. Errors (-1 and errno):
 *   ESRCH    no such process, or it has no address space (exiting);
 *   EPERM    the caller is neither the process itself nor its ptrace tracer;
 *   ENOENT   (COLLECT, STOP) this address space is not tracked: never
 *            started, stopped, or a new one since (exec, pid reuse);
 *   ESTALE   (COLLECT) the token is not the newest: report everything;
 *   EINVAL   bad range, flags or sizes; EFAULT bad user pointers;
 *   ENOSPC   (START) too many tracked address spaces.
 */
#ifndef _UAPI_CKPT_DIRTY_H
#define _UAPI_CKPT_DIRTY_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define CKPT_DIRTY_DEVICE "/dev/ckpt_dirty"
#define CKPT_DIRTY_VERSION 1

struct ckpt_dirty_version {
	__u32 version;   /* out: CKPT_DIRTY_VERSION of the module */
	__u32 page_size; /* out: bytes of memory per bitmap bit */
	__u64 max_range; /* out: largest end - start of one COLLECT, in bytes */
};

struct ckpt_dirty_start {
	__s32 pid;   /* in: any thread of the process (caller's pid namespace) */
	__u32 flags; /* in: 0 or CKPT_DIRTY_START_TOKEN */
	__u64 token; /* in (CKPT_DIRTY_START_TOKEN): the token to continue with;
		      * out: the token for the first COLLECT */
};
/* START: continue with the caller's token (1 .. 2^31-1) instead of a new one.
 * For a process just restored from a checkpoint whose metadata holds that
 * token: its memory is that checkpoint's, so the chain goes on from it. */
#define CKPT_DIRTY_START_TOKEN (1u << 0)

struct ckpt_dirty_collect {
	__s32 pid;         /* in */
	__u32 flags;       /* in: 0 */
	__u64 token;       /* in: the newest token; out: the next one */
	__u64 start;       /* in: page aligned */
	__u64 end;         /* in: page aligned, start < end, end - start <= max_range */
	__u64 bitmap;      /* in: user address of (end - start) / page_size bits,
			    * in 64-bit words, bit i of word j (LSB first) is the
			    * page at start + (64 * j + i) * page_size; the module
			    * writes every bit of the range */
	__u64 bitmap_bits; /* in: capacity of the bitmap in bits */
	__u64 written;     /* out: bits set */
	__u32 status;      /* out: CKPT_DIRTY_S_* about the range */
	__u32 reserved;
};

/* COLLECT status: why bits were set (or left clear) besides writes. */
#define CKPT_DIRTY_S_UNTRACKABLE (1u << 0) /* shared, hugetlb, mixed or devmap
					      memory: reported whole */
#define CKPT_DIRTY_S_SKIPPED (1u << 1)     /* VM_IO / VM_PFNMAP: left clear */
#define CKPT_DIRTY_S_HOLES (1u << 2)       /* unmapped parts: reported */
#define CKPT_DIRTY_S_CHANGED (1u << 3)     /* page tables changed under the
					      tracker (swap, migration, zap,
					      remap...): those pages reported */

struct ckpt_dirty_stop {
	__s32 pid;   /* in */
	__u32 flags; /* in: 0 */
};

#define CKPT_DIRTY_IOC_MAGIC 0xCD
#define CKPT_DIRTY_IOC_VERSION _IOR(CKPT_DIRTY_IOC_MAGIC, 0, struct ckpt_dirty_version)
#define CKPT_DIRTY_IOC_START _IOWR(CKPT_DIRTY_IOC_MAGIC, 1, struct ckpt_dirty_start)
#define CKPT_DIRTY_IOC_COLLECT _IOWR(CKPT_DIRTY_IOC_MAGIC, 2, struct ckpt_dirty_collect)
#define CKPT_DIRTY_IOC_STOP _IOW(CKPT_DIRTY_IOC_MAGIC, 3, struct ckpt_dirty_stop)

#endif /* _UAPI_CKPT_DIRTY_H */
