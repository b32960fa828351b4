// SPDX-License-Identifier: GPL-2.0
/*
 * ckpt_dirty: tells a checkpointer which pages a process wrote since the
 * previous checkpoint, without write-protect faults in the process.
 *
 * The CPU sets a PTE's dirty bit on the first write through it, with no
 * fault. At COLLECT the module walks the target's page tables, reports the
 * dirty PTEs (and PMDs: a huge page is reported as its 4 KiB pages), clears
 * the bit and flushes the TLBs so that the next write sets it again. What the
 * kernel itself needs to know is kept: before the bit is cleared, the dirty
 * state moves to the folio wherever the kernel reads it (swap cache pages,
 * MADV_FREE'd pages, file pages), exactly where MGLRU's page-table walk moves
 * it too. A private anonymous page outside the swap cache is the exception:
 * its PG_dirty flag means nothing to the kernel (add_to_swap() sets it anyway),
 * so the module leaves it alone and uses it to learn of writes that do not go
 * through the PTE (get_user_pages(FOLL_WRITE) users: process_vm_writev,
 * /proc/PID/mem, O_DIRECT reads) - they set PG_dirty after writing.
 *
 * Whatever else changes the page tables (swap-out, migration, MADV_DONTNEED,
 * MADV_FREE, mremap, munmap, THP split or collapse, KSM) goes through an MMU
 * notifier: those ranges are remembered and reported at the next COLLECT.
 * Pages without a present PTE are always reported. See README.md.
 */
#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pgtable.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/swap.h>
#include <linux/swapops.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <asm/tlbflush.h>

#include "include/uapi/ckpt_dirty.h"

#define CKD_MAX_SESSIONS 4096
#define CKD_MAX_TOUCHED 64
/* One COLLECT covers at most this much; it is walked in chunks. */
#define CKD_MAX_RANGE (64ULL << 30)
#define CKD_CHUNK (1UL << 30)

struct ckd_range {
	unsigned long start, end;
};

/*
 * One tracked address space. The global mutex guards only the list; a
 * request holds a reference and the session's own mutex while it walks, so
 * users tracking different processes do not wait for each other.
 */
struct ckd_session {
	struct list_head node; /* in ckd_sessions (ckd_mutex) until stopped or gone */
	struct kref ref;       /* the list's, and one per request in flight */
	struct mutex walk;     /* token, resets and walks of this address space */
	struct mmu_notifier mn;
	struct mm_struct *mm; /* mmgrab()'ed: the pointer stays unique */
	kuid_t owner;         /* who started it: the per-user limit */
	u64 token;
	bool released; /* the mm is gone (exit, exec): only freeing is left */
	spinlock_t lock; /* touched[] */
	unsigned int ntouched;
	struct ckd_range touched[CKD_MAX_TOUCHED];
};

static LIST_HEAD(ckd_sessions);
static DEFINE_MUTEX(ckd_mutex); /* the list and the counts */
static unsigned int ckd_nsessions;
/* Read-only, for tests and curious admins: tracked address spaces (gone ones
 * included until the next START or STOP frees them). */
module_param_named(sessions, ckd_nsessions, uint, 0444);
MODULE_PARM_DESC(sessions, "tracked address spaces (read-only)");
static unsigned int ckd_max_user_sessions = 1024;
module_param_named(max_user_sessions, ckd_max_user_sessions, uint, 0644);
MODULE_PARM_DESC(max_user_sessions,
		 "address spaces one non-root user may track at once (default 1024 of 4096)");
static int ckd_trusted_gid = -1;
module_param_named(trusted_gid, ckd_trusted_gid, int, 0444);
MODULE_PARM_DESC(trusted_gid, "a group whose members may use the device besides root "
			      "(default -1: none, the device is root's alone)");

static DEFINE_SPINLOCK(ckd_token_lock);
static u64 ckd_next_token;

static u64 ckd_new_token(void)
{
	u64 t;

	spin_lock(&ckd_token_lock);
	ckd_next_token = ckd_next_token % 0x7fffffffULL + 1; /* 1 .. 2^31-1 */
	t = ckd_next_token;
	spin_unlock(&ckd_token_lock);
	return t;
}

/* ---- MMU notifier: ranges whose page tables changed under us ---- */

static void ckd_touch(struct ckd_session *s, unsigned long start, unsigned long end)
{
	unsigned int i, best = 0;
	unsigned long gap, best_gap = ULONG_MAX;

	spin_lock(&s->lock);
	for (i = 0; i < s->ntouched; i++) {
		struct ckd_range *r = &s->touched[i];

		if (start <= r->end && end >= r->start) { /* overlaps or touches */
			r->start = min(r->start, start);
			r->end = max(r->end, end);
			goto out;
		}
	}
	if (s->ntouched < CKD_MAX_TOUCHED) {
		s->touched[s->ntouched].start = start;
		s->touched[s->ntouched].end = end;
		s->ntouched++;
		goto out;
	}
	/* Full: grow the nearest range over it (reports more, never less). */
	for (i = 0; i < s->ntouched; i++) {
		struct ckd_range *r = &s->touched[i];

		gap = start > r->end ? start - r->end : r->start - end;
		if (gap < best_gap) {
			best_gap = gap;
			best = i;
		}
	}
	s->touched[best].start = min(s->touched[best].start, start);
	s->touched[best].end = max(s->touched[best].end, end);
out:
	spin_unlock(&s->lock);
}

static int ckd_invalidate_range_start(struct mmu_notifier *mn,
				      const struct mmu_notifier_range *range)
{
	struct ckd_session *s = container_of(mn, struct ckd_session, mn);

	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:  /* mprotect, NUMA hinting: keep dirty bits */
	case MMU_NOTIFY_PROTECTION_PAGE: /* fork's write-protect, mkclean of shared
					  * mappings (not tracked): keep them too */
	case MMU_NOTIFY_SOFT_DIRTY:      /* clear_refs: only soft-dirty/young bits */
		return 0;
	default:
		ckd_touch(s, range->start, range->end);
		return 0;
	}
}

static void ckd_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct ckd_session *s = container_of(mn, struct ckd_session, mn);

	WRITE_ONCE(s->released, true);
}

static const struct mmu_notifier_ops ckd_mn_ops = {
	.release = ckd_release,
	.invalidate_range_start = ckd_invalidate_range_start,
};

/* ---- the page-table walk ---- */

struct ckd_walk {
	bool report;          /* false: reset only (START) */
	unsigned long base;   /* address of bit 0 */
	unsigned long *bits;
	bool cleared;         /* a dirty bit was cleared: TLBs must be flushed */
	u32 status;
	struct folio *last;   /* verdict cache for large folios */
	bool last_written;
};

static void ckd_mark(struct ckd_walk *w, unsigned long start, unsigned long end)
{
	if (w->report && end > start)
		bitmap_set(w->bits, (start - w->base) >> PAGE_SHIFT,
			   (end - start) >> PAGE_SHIFT);
}

/* A private anonymous folio outside the swap cache: PG_dirty is ours. */
static bool ckd_plain_anon(struct folio *folio)
{
	return folio_test_anon(folio) && !folio_test_ksm(folio) &&
	       folio_test_swapbacked(folio) && !folio_test_swapcache(folio);
}

static int ckd_mapcount(struct folio *folio)
{
	long i, n;
	int maps;

	if (!folio_test_large(folio))
		return atomic_read(&folio->_mapcount) + 1;
	maps = folio_entire_mapcount(folio);
	n = folio_nr_pages(folio);
	for (i = 0; i < n; i++)
		maps += atomic_read(&folio_page(folio, i)->_mapcount) + 1;
	return maps;
}

/*
 * Whether the kernel may have written the folio without a dirty PTE since
 * the last reset (a get_user_pages() writer), and resets that knowledge.
 * Called with the page table lock held.
 */
static bool ckd_kernel_wrote(struct ckd_walk *w, struct folio *folio)
{
	bool wrote;

	if (folio == w->last)
		return w->last_written;
	if (!ckd_plain_anon(folio)) {
		/*
		 * Swap cache or lazily freed page: its dirty flag is the
		 * kernel's, and a GUP writer needs FOLL_WRITE to have broken
		 * COW, which dirtied the PTE. File pages are never reached
		 * (shared mappings are not walked; a private mapping's page
		 * cache page is read-only here).
		 */
		wrote = false;
	} else if (!folio_trylock(folio)) {
		wrote = true; /* busy (reclaim, migration): cannot tell */
	} else {
		/* Order: clear PG_dirty, then look for writers in flight. */
		wrote = ckd_plain_anon(folio) ? folio_test_clear_dirty(folio) : false;
		folio_unlock(folio);
		smp_mb();
		/*
		 * A reference beyond the mappings may be a get_user_pages()
		 * writer that has not set PG_dirty yet (or a short-lived one:
		 * LRU batches, migration). Report it; its set_page_dirty()
		 * will report it again next time.
		 */
		if (folio_ref_count(folio) > ckd_mapcount(folio))
			wrote = true;
	}
	if (folio_test_large(folio)) {
		w->last = folio;
		w->last_written = wrote;
	}
	return wrote;
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
/*
 * From 6.5 a page table can be freed under mmap_lock (read) by RCU
 * (khugepaged retracting file THP tables), and __pte_offset_map_lock() is
 * not exported: the same steps here. NULL when the PMD no longer points to a
 * page table; the caller looks at the PMD again.
 */
static pte_t *ckd_pte_map_lock(struct mm_struct *mm, pmd_t *pmd, unsigned long addr,
			       spinlock_t **ptlp)
{
	pmd_t val;
	spinlock_t *ptl;
	pte_t *pte;

	rcu_read_lock();
	val = pmdp_get_lockless(pmd);
	if (pmd_none(val) || !pmd_present(val) || pmd_trans_huge(val) || pmd_devmap(val) ||
	    pmd_bad(val))
		goto none;
	ptl = pte_lockptr(mm, &val);
	pte = pte_offset_kernel(&val, addr);
	spin_lock(ptl);
	if (likely(pmd_same(val, pmdp_get_lockless(pmd)))) {
		*ptlp = ptl;
		return pte; /* RCU read side held until ckd_pte_unmap_unlock() */
	}
	spin_unlock(ptl);
none:
	rcu_read_unlock();
	return NULL;
}

static void ckd_pte_unmap_unlock(pte_t *pte, spinlock_t *ptl)
{
	spin_unlock(ptl);
	rcu_read_unlock();
}
#else
static pte_t *ckd_pte_map_lock(struct mm_struct *mm, pmd_t *pmd, unsigned long addr,
			       spinlock_t **ptlp)
{
	return pte_offset_map_lock(mm, pmd, addr, ptlp);
}

static void ckd_pte_unmap_unlock(pte_t *pte, spinlock_t *ptl)
{
	pte_unmap_unlock(pte, ptl);
}
#endif

/*
 * Clears the dirty bit of a PTE or PMD in place; true if it was set. From
 * 6.6, x86 moves a write-protected entry's Dirty to SavedDirty (shadow
 * stacks): that is a write too.
 */
static bool ckd_test_and_clean(unsigned long *entry)
{
	bool dirty = test_and_clear_bit(_PAGE_BIT_DIRTY, entry);
#ifdef _PAGE_BIT_SAVED_DIRTY
	dirty |= test_and_clear_bit(_PAGE_BIT_SAVED_DIRTY, entry);
#endif
	return dirty;
}

/* False when the PMD no longer points to a page table (look at it again). */
static bool ckd_pte_range(struct ckd_walk *w, struct mm_struct *mm, pmd_t *pmd,
			  unsigned long addr, unsigned long end)
{
	spinlock_t *ptl;
	pte_t *start_pte, *pte;

	start_pte = pte = ckd_pte_map_lock(mm, pmd, addr, &ptl);
	if (!pte)
		return false;
	for (; addr < end; pte++, addr += PAGE_SIZE) {
		pte_t ptent = READ_ONCE(*pte);
		struct folio *folio;
		bool dirty;

		if (!pte_present(ptent)) {
			/* Never populated, zapped, swapped, migrating, a marker. */
			ckd_mark(w, addr, addr + PAGE_SIZE);
			continue;
		}
		if (pte_special(ptent)) /* the zero page: never written */
			continue;
		if (pte_devmap(ptent) || !pfn_valid(pte_pfn(ptent))) {
			ckd_mark(w, addr, addr + PAGE_SIZE);
			w->status |= CKPT_DIRTY_S_UNTRACKABLE;
			continue;
		}
		folio = page_folio(pfn_to_page(pte_pfn(ptent)));
		dirty = pte_dirty(ptent);
		if (dirty) {
			/* The kernel's copy of the bit first, then ours goes. */
			if (!ckd_plain_anon(folio))
				folio_mark_dirty(folio);
			dirty = ckd_test_and_clean((unsigned long *)&pte->pte);
			w->cleared = true;
		}
		if (ckd_kernel_wrote(w, folio) || dirty)
			ckd_mark(w, addr, addr + PAGE_SIZE);
	}
	ckd_pte_unmap_unlock(start_pte, ptl);
	return true;
}

/* A huge PMD under its lock; false when it is not huge (any more). */
static bool ckd_huge_pmd(struct ckd_walk *w, struct mm_struct *mm, pmd_t *pmd,
			 unsigned long addr, unsigned long end)
{
	spinlock_t *ptl = pmd_lock(mm, pmd);
	pmd_t val = READ_ONCE(*pmd);
	struct folio *folio;
	bool dirty;

	if (!pmd_present(val) && !pmd_none(val)) { /* a THP migration entry */
		ckd_mark(w, addr, end);
		goto out;
	}
	if (!pmd_trans_huge(val) && !pmd_devmap(val)) {
		spin_unlock(ptl);
		return false;
	}
	if (pmd_devmap(val) || !pfn_valid(pmd_pfn(val))) {
		ckd_mark(w, addr, end);
		w->status |= CKPT_DIRTY_S_UNTRACKABLE;
		goto out;
	}
	folio = page_folio(pmd_page(val));
	dirty = pmd_dirty(val);
	if (dirty) {
		if (!ckd_plain_anon(folio))
			folio_mark_dirty(folio);
		dirty = ckd_test_and_clean((unsigned long *)pmd);
		w->cleared = true;
	}
	if (ckd_kernel_wrote(w, folio) || dirty)
		ckd_mark(w, addr, end);
out:
	spin_unlock(ptl);
	return true;
}

static void ckd_pmd_range(struct ckd_walk *w, struct mm_struct *mm, pud_t *pud,
			  unsigned long addr, unsigned long end)
{
	pmd_t *pmd = pmd_offset(pud, addr);
	unsigned long next;

	for (; addr < end; pmd++, addr = next) {
		pmd_t val;

		next = pmd_addr_end(addr, end);
again:
		val = READ_ONCE(*pmd);
		if (pmd_none(val)) {
			ckd_mark(w, addr, next);
			continue;
		}
		if (!pmd_present(val) || pmd_trans_huge(val) || pmd_devmap(val)) {
			if (!ckd_huge_pmd(w, mm, pmd, addr, next))
				goto again; /* split meanwhile: a page table now */
			continue;
		}
		if (pmd_bad(val)) {
			ckd_mark(w, addr, next);
			w->status |= CKPT_DIRTY_S_UNTRACKABLE;
			continue;
		}
		/* A page table (gone meanwhile: look again). */
		if (!ckd_pte_range(w, mm, pmd, addr, next))
			goto again;
	}
}

static void ckd_pud_range(struct ckd_walk *w, struct mm_struct *mm, p4d_t *p4d,
			  unsigned long addr, unsigned long end)
{
	pud_t *pud = pud_offset(p4d, addr);
	unsigned long next;

	for (; addr < end; pud++, addr = next) {
		pud_t val = READ_ONCE(*pud);

		next = pud_addr_end(addr, end);
		if (pud_none(val)) {
			ckd_mark(w, addr, next);
		} else if (pud_trans_huge(val) || pud_devmap(val) || pud_bad(val)) {
			ckd_mark(w, addr, next); /* DAX: not ours to track */
			w->status |= CKPT_DIRTY_S_UNTRACKABLE;
		} else {
			ckd_pmd_range(w, mm, pud, addr, next);
		}
	}
}

static void ckd_walk_vma_range(struct ckd_walk *w, struct mm_struct *mm,
			       unsigned long addr, unsigned long end)
{
	pgd_t *pgd = pgd_offset(mm, addr);
	unsigned long next;

	for (; addr < end; pgd++, addr = next) {
		p4d_t *p4d;
		unsigned long p4end, p4next;

		next = pgd_addr_end(addr, end);
		if (pgd_none(*pgd) || pgd_bad(*pgd)) {
			ckd_mark(w, addr, next);
			continue;
		}
		p4d = p4d_offset(pgd, addr);
		for (p4end = next; addr < p4end; p4d++, addr = p4next) {
			p4next = p4d_addr_end(addr, p4end);
			if (p4d_none(*p4d) || p4d_bad(*p4d)) {
				ckd_mark(w, addr, p4next);
				continue;
			}
			ckd_pud_range(w, mm, p4d, addr, p4next);
		}
		addr = next;
		cond_resched();
	}
}

/* Walks [start, end) of mm, which is read-locked. */
static void ckd_walk(struct ckd_walk *w, struct mm_struct *mm, unsigned long start,
		     unsigned long end)
{
	unsigned long addr = start;

	while (addr < end) {
		struct vm_area_struct *vma = find_vma(mm, addr);
		unsigned long vend;

		if (!vma || vma->vm_start >= end) {
			ckd_mark(w, addr, end);
			w->status |= CKPT_DIRTY_S_HOLES;
			break;
		}
		if (vma->vm_start > addr) {
			ckd_mark(w, addr, vma->vm_start);
			w->status |= CKPT_DIRTY_S_HOLES;
			addr = vma->vm_start;
		}
		vend = min(vma->vm_end, end);
		if (vma->vm_flags & (VM_IO | VM_PFNMAP)) {
			w->status |= CKPT_DIRTY_S_SKIPPED; /* device memory: not ours */
		} else if (vma->vm_flags & (VM_SHARED | VM_HUGETLB | VM_MIXEDMAP)) {
			/* Others write it through their own page tables. */
			ckd_mark(w, addr, vend);
			w->status |= CKPT_DIRTY_S_UNTRACKABLE;
		} else {
			ckd_walk_vma_range(w, mm, addr, vend);
		}
		addr = vend;
	}
}

static void ckd_flush_this_cpu(void *unused)
{
	__flush_tlb_all();
}

/*
 * After dirty bits were cleared, no CPU may keep a TLB entry that still says
 * dirty (it would write without setting the bit again). flush_tlb_mm_range()
 * is not exported. Bumping the mm's TLB generation makes every CPU that
 * switches to the mm later flush it (switch_mm compares generations, also for
 * entries kept under another PCID); the CPUs that have it loaded now are in
 * mm_cpumask() (switch_mm sets the bit before it reads the generation, we
 * bump it before we read the mask: one of the two sees the other). Only the
 * x86 switch_mm of the kernels this was reviewed against (6.1 to 6.12) is
 * known to work that way; on others, every CPU is flushed.
 */
static void ckd_flush_tlbs(struct mm_struct *mm)
{
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
	/* inc_mm_tlb_gen(), which asm/tlbflush.h keeps from modules; a full barrier. */
	atomic64_inc_return(&mm->context.tlb_gen);
	on_each_cpu_mask(mm_cpumask(mm), ckd_flush_this_cpu, NULL, 1);
#else
	on_each_cpu(ckd_flush_this_cpu, NULL, 1);
#endif
}

/* Moves the touched ranges within [start, end) into the walk's bitmap. */
static void ckd_take_touched(struct ckd_session *s, struct ckd_walk *w, unsigned long start,
			     unsigned long end)
{
	unsigned int i;

	spin_lock(&s->lock);
	for (i = 0; i < s->ntouched;) {
		struct ckd_range *r = &s->touched[i];
		unsigned long a = max(r->start, start), b = min(r->end, end);

		if (a >= b) {
			i++;
			continue;
		}
		ckd_mark(w, round_down(a, PAGE_SIZE), round_up(b, PAGE_SIZE));
		w->status |= CKPT_DIRTY_S_CHANGED;
		if (r->start >= start && r->end <= end) {
			*r = s->touched[--s->ntouched]; /* consumed whole */
			continue;
		}
		/* Keep what lies outside; one piece only, else keep it all. */
		if (r->start >= start)
			r->start = end;
		else if (r->end <= end)
			r->end = start;
		i++;
	}
	spin_unlock(&s->lock);
}

/* ---- sessions ---- */

/* The address space of pid, if the caller may track it (mmput() it). */
static struct mm_struct *ckd_target_mm(pid_t nr)
{
	struct task_struct *task, *tracer;
	struct mm_struct *mm;
	bool allowed;

	struct pid *pid = find_get_pid(nr);

	task = pid ? get_pid_task(pid, PIDTYPE_PID) : NULL;
	put_pid(pid);
	if (!task)
		return ERR_PTR(-ESRCH);
	/*
	 * The caller must be the process itself or its ptrace tracer: attaching
	 * ran ptrace_may_access(PTRACE_MODE_ATTACH_REALCREDS) and the LSMs
	 * (ptrace_may_access itself is not exported to modules).
	 */
	rcu_read_lock();
	tracer = ptrace_parent(task);
	allowed = same_thread_group(task, current) ||
		  (tracer && same_thread_group(tracer, current));
	rcu_read_unlock();
	mm = allowed ? get_task_mm(task) : ERR_PTR(-EPERM);
	put_task_struct(task);
	return mm ? mm : ERR_PTR(-ESRCH);
}

/* A live session of mm, with a reference for the caller (ckd_mutex held). */
static struct ckd_session *ckd_find(struct mm_struct *mm)
{
	struct ckd_session *s;

	list_for_each_entry(s, &ckd_sessions, node)
		if (s->mm == mm && !READ_ONCE(s->released)) {
			kref_get(&s->ref);
			return s;
		}
	return NULL;
}

static void ckd_destroy(struct kref *ref)
{
	struct ckd_session *s = container_of(ref, struct ckd_session, ref);

	mmu_notifier_unregister(&s->mn, s->mm); /* waits for running callbacks */
	mmdrop(s->mm);
	kfree(s);
}

/* Drops a reference; the last one frees (may sleep: never under a spinlock). */
static void ckd_put(struct ckd_session *s)
{
	kref_put(&s->ref, ckd_destroy);
}

/* Takes the session off the list (ckd_mutex held) onto `gone`, whose
 * references the caller drops after unlocking. */
static void ckd_unlink(struct ckd_session *s, struct list_head *gone)
{
	list_move(&s->node, gone);
	ckd_nsessions--;
}

static void ckd_put_all(struct list_head *gone)
{
	struct ckd_session *s, *tmp;

	list_for_each_entry_safe(s, tmp, gone, node) {
		list_del_init(&s->node);
		ckd_put(s);
	}
}

/* Moves the sessions whose address space is gone onto `gone` (ckd_mutex held). */
static void ckd_gc(struct list_head *gone)
{
	struct ckd_session *s, *tmp;

	list_for_each_entry_safe(s, tmp, &ckd_sessions, node)
		if (READ_ONCE(s->released))
			ckd_unlink(s, gone);
}

/* Whether the caller may start one more session (ckd_mutex held). */
static long ckd_may_add(kuid_t owner)
{
	struct ckd_session *s;
	unsigned int mine = 0;

	if (ckd_nsessions >= CKD_MAX_SESSIONS)
		return -ENOSPC;
	if (uid_eq(owner, GLOBAL_ROOT_UID))
		return 0;
	list_for_each_entry(s, &ckd_sessions, node)
		mine += uid_eq(s->owner, owner);
	return mine >= READ_ONCE(ckd_max_user_sessions) ? -EDQUOT : 0;
}

/* Resets every dirty bit of the session's mm (s->walk held). */
static void ckd_reset_all(struct ckd_session *s)
{
	struct ckd_walk w = { .report = false };

	spin_lock(&s->lock);
	s->ntouched = 0;
	spin_unlock(&s->lock);
	mmap_read_lock(s->mm);
	ckd_walk(&w, s->mm, 0, TASK_SIZE_MAX);
	mmap_read_unlock(s->mm);
	if (w.cleared)
		ckd_flush_tlbs(s->mm);
}

/* A new session of mm, listed, with a reference for the caller (ckd_mutex held). */
static struct ckd_session *ckd_add(struct mm_struct *mm)
{
	struct ckd_session *s;
	long err = ckd_may_add(current_euid());

	if (err)
		return ERR_PTR(err);
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&s->lock);
	mutex_init(&s->walk);
	kref_init(&s->ref); /* the list's */
	s->owner = current_euid();
	s->mn.ops = &ckd_mn_ops;
	err = mmu_notifier_register(&s->mn, mm);
	if (err) {
		kfree(s);
		return ERR_PTR(err);
	}
	mmgrab(mm);
	s->mm = mm;
	list_add(&s->node, &ckd_sessions);
	ckd_nsessions++;
	kref_get(&s->ref); /* the caller's */
	return s;
}

static long ckd_start(struct ckpt_dirty_start __user *uarg)
{
	struct ckpt_dirty_start a;
	struct ckd_session *s;
	struct mm_struct *mm;
	LIST_HEAD(gone);
	long err;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags & ~CKPT_DIRTY_START_TOKEN)
		return -EINVAL;
	if ((a.flags & CKPT_DIRTY_START_TOKEN) && (a.token == 0 || a.token > 0x7fffffffULL))
		return -EINVAL;
	mm = ckd_target_mm(a.pid);
	if (IS_ERR(mm))
		return PTR_ERR(mm);
	mutex_lock(&ckd_mutex);
	ckd_gc(&gone);
	s = ckd_find(mm);
	if (!s)
		s = ckd_add(mm);
	mutex_unlock(&ckd_mutex);
	ckd_put_all(&gone);
	if (IS_ERR(s)) {
		mmput(mm);
		return PTR_ERR(s);
	}
	mutex_lock(&s->walk);
	ckd_reset_all(s);
	s->token = (a.flags & CKPT_DIRTY_START_TOKEN) ? a.token : ckd_new_token();
	a.token = s->token;
	mutex_unlock(&s->walk);
	err = copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
	ckd_put(s);
	mmput(mm);
	return err;
}

static long ckd_collect(struct ckpt_dirty_collect __user *uarg)
{
	struct ckpt_dirty_collect a;
	struct ckd_session *s;
	struct mm_struct *mm;
	unsigned long *bits = NULL, chunk, pos;
	u64 npages, written = 0;
	u32 status = 0;
	long err;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags || a.reserved || a.start >= a.end || a.end > TASK_SIZE_MAX ||
	    !PAGE_ALIGNED(a.start) || !PAGE_ALIGNED(a.end) || a.end - a.start > CKD_MAX_RANGE ||
	    (a.bitmap & 7))
		return -EINVAL;
	npages = (a.end - a.start) >> PAGE_SHIFT;
	if (a.bitmap_bits < npages)
		return -EINVAL;
	chunk = min_t(u64, a.end - a.start, CKD_CHUNK);
	bits = kvmalloc(BITS_TO_LONGS(chunk >> PAGE_SHIFT) * sizeof(long), GFP_KERNEL);
	if (!bits)
		return -ENOMEM;
	mm = ckd_target_mm(a.pid);
	if (IS_ERR(mm)) {
		kvfree(bits);
		return PTR_ERR(mm);
	}
	mutex_lock(&ckd_mutex);
	s = ckd_find(mm);
	mutex_unlock(&ckd_mutex);
	err = -ENOENT;
	if (!s)
		goto out_free;
	mutex_lock(&s->walk);
	err = -ESTALE;
	if (a.token != s->token)
		goto out;
	/* From here on, the old token is spent whatever happens. */
	s->token = ckd_new_token();
	for (pos = a.start; pos < a.end; pos += chunk) {
		unsigned long cend = min_t(u64, pos + chunk, a.end);
		unsigned long n = (cend - pos) >> PAGE_SHIFT;
		struct ckd_walk w = { .report = true, .base = pos, .bits = bits };

		bitmap_zero(bits, n);
		/* Changes recorded before the walk are reported now; later ones next time. */
		ckd_take_touched(s, &w, pos, cend);
		mmap_read_lock(mm);
		ckd_walk(&w, mm, pos, cend);
		mmap_read_unlock(mm);
		if (w.cleared)
			ckd_flush_tlbs(mm);
		status |= w.status;
		written += bitmap_weight(bits, n);
		err = -EFAULT;
		/* Whole 64-bit words: the bitmap is little-endian u64s, like long here. */
		if (copy_to_user((u8 __user *)(uintptr_t)a.bitmap + ((pos - a.start) >> PAGE_SHIFT) / 8,
				 bits, DIV_ROUND_UP(n, 64) * 8))
			goto out;
	}
	a.token = s->token;
	a.written = written;
	a.status = status;
	err = copy_to_user(uarg, &a, sizeof(a)) ? -EFAULT : 0;
out:
	mutex_unlock(&s->walk);
	ckd_put(s);
out_free:
	mmput(mm);
	kvfree(bits);
	return err;
}

static long ckd_stop(struct ckpt_dirty_stop __user *uarg)
{
	struct ckpt_dirty_stop a;
	struct ckd_session *s;
	struct mm_struct *mm;
	LIST_HEAD(gone);
	long err = -ENOENT;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags)
		return -EINVAL;
	mm = ckd_target_mm(a.pid);
	if (IS_ERR(mm))
		return PTR_ERR(mm);
	mutex_lock(&ckd_mutex);
	s = ckd_find(mm);
	if (s) {
		ckd_unlink(s, &gone); /* the list's reference goes with `gone` */
		err = 0;
	}
	ckd_gc(&gone);
	mutex_unlock(&ckd_mutex);
	if (s)
		ckd_put(s); /* ckd_find's */
	ckd_put_all(&gone);
	mmput(mm);
	return err;
}

/* Root's alone, unless the module was loaded with a trusted group. */
static int ckd_open(struct inode *inode, struct file *file)
{
	if (capable(CAP_SYS_ADMIN) || capable(CAP_CHECKPOINT_RESTORE))
		return 0;
	if (ckd_trusted_gid >= 0 && in_group_p(make_kgid(&init_user_ns, ckd_trusted_gid)))
		return 0;
	return -EACCES;
}

static long ckd_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case CKPT_DIRTY_IOC_VERSION: {
		struct ckpt_dirty_version v = {
			.version = CKPT_DIRTY_VERSION,
			.page_size = PAGE_SIZE,
			.max_range = CKD_MAX_RANGE,
		};
		return copy_to_user(uarg, &v, sizeof(v)) ? -EFAULT : 0;
	}
	case CKPT_DIRTY_IOC_START:
		return ckd_start(uarg);
	case CKPT_DIRTY_IOC_COLLECT:
		return ckd_collect(uarg);
	case CKPT_DIRTY_IOC_STOP:
		return ckd_stop(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations ckd_fops = {
	.owner = THIS_MODULE,
	.open = ckd_open,
	.unlocked_ioctl = ckd_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice ckd_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "ckpt_dirty",
	.fops = &ckd_fops,
	.mode = 0600, /* 0666 with trusted_gid: open() checks the group */
};

static int __init ckd_init(void)
{
	/* The PTEs are written in place: not under Xen PV, whose page tables are the hypervisor's. */
	if (cpu_feature_enabled(X86_FEATURE_XENPV))
		return -ENODEV;
	ckd_next_token = get_random_u32() % 0x7fffffffU;
	if (ckd_trusted_gid >= 0)
		ckd_dev.mode = 0666;
	return misc_register(&ckd_dev);
}

static void __exit ckd_exit(void)
{
	struct ckd_session *s, *tmp;
	LIST_HEAD(gone);

	/* No new opens; open files pin the module, so no request is in flight. */
	misc_deregister(&ckd_dev);
	mutex_lock(&ckd_mutex);
	list_for_each_entry_safe(s, tmp, &ckd_sessions, node)
		ckd_unlink(s, &gone);
	mutex_unlock(&ckd_mutex);
	ckd_put_all(&gone);
}

module_init(ckd_init);
module_exit(ckd_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ckpt_dirty: written-page tracking through PTE dirty bits, for checkpointing");
MODULE_VERSION("1");
