/* Per-thread state for the hit path and grace periods for the registry.
 *
 * The hit path marks a read-side section in its thread's record with
 * single unlocked instructions; writers wait for the sections that began
 * before their change (membarrier makes the asymmetric barrier: readers
 * pay nothing). */
#ifndef KP_OS_THREADS_H
#define KP_OS_THREADS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "asm/sections.h"

#define KP_SIGFRAMES 6
#define KP_RI_CACHE 4

/* Set once at start-up: membarrier(PRIVATE_EXPEDITED) works here. */
extern int kp_membarrier_ok;

/* Records for this many threads at once (exited threads' are reused). */
#define KP_MAX_THREADS 8192

/* A watchpoint's access being stepped by the thread (where watchpoints
 * trap before the access): where it goes on after the access, the trap's
 * cookie (0: no handler to run), the program's signal mask (the kernel's
 * 64 signals), whether the step is under way, and whether the trap the
 * step raises again is due now (that one is no hit). */
struct kp_wstep {
	uintptr_t pc;
	uint64_t cookie;
	uint64_t mask;
	unsigned int active;
	unsigned int echo;
};

struct kp_thread {
	pid_t tid;			/* owner, 0 = free record */
	/* Read-side sections: a count of outermost sections ended, and the
	 * depth.  Each is changed by single instructions, so a signal handler
	 * that runs its own section anywhere in between sees a consistent
	 * state; a grace period reads gen before nest. */
	unsigned int gen;
	unsigned int nest;
	/* Running a probe handler.  Right above nest: the assembly hit path
	 * changes both with one instruction. */
	unsigned int in_handler;
	void *ri_top;			/* return-probe instances, newest first */
	void *trap_ctx;			/* signal context of the current hit */
	unsigned int trap_depth;	/* trap handlers running (nested) */
	void *jprobe_save;		/* jprobe state while its handler runs */
	void *jprobe_pp;		/* probepoint whose jprobe is running */
	uintptr_t resume_ip;		/* where the last trap handler sent it */
	/* The program's signal handlers this thread is running, innermost
	 * last: where each interrupted the thread, and its signal frame.  A
	 * thread interrupted inside code about to be patched is still there
	 * even while it runs a handler elsewhere (the census looks here). */
	unsigned int nsigframes;	/* may exceed KP_SIGFRAMES: "unknown" */
	struct kp_sigframe {
		uintptr_t ip;
		uintptr_t frame;
	} sigframes[KP_SIGFRAMES];
	/* Free return-probe instances kept for this thread, one per slot
	 * (core/kretprobe.c): the thread takes and puts them back with plain
	 * instructions while ri_cache_busy is up; others take them only
	 * after a membarrier, outside those moments. */
	unsigned int ri_cache_busy;
	void *ri_cache[KP_RI_CACHE];
	/* Where the vector registers of the hit whose handlers run are kept
	 * (kprobes_vector_reg()): the pt_regs those handlers get, the saved
	 * state, and its layout (KP_VEC_*, arch).  vec_regs is set last and
	 * cleared first; NULL: none kept. */
	const void *vec_regs;
	const void *vec_area;
	unsigned int vec_layout;
	/* How much of in_handler is the library's own code running on this
	 * thread outside any handler (kp_lib_code_begin()): never more than
	 * in_handler holds. */
	unsigned int lib_code;
	/* A watchpoint's access being stepped, where a watchpoint traps
	 * before the access (arm64: arch/arm64/watch.c). */
	struct kp_wstep wstep;
	/* The last pc the trap path ran again because its probe had gone
	 * (arm64: arch/arm64/trap.c, refetch). */
	uintptr_t refetch_pc;
} __attribute__((aligned(64)));

/* Every thread record: *n of them (live, free or of exited threads). */
struct kp_thread *kp_thread_records(unsigned int *n);

/* Is the thread record's owner gone (or none)? */
bool kp_thread_record_dead(const struct kp_thread *r);

/* membarrier(PRIVATE_EXPEDITED): every running thread of the process has
 * passed a full barrier when it returns.  False without membarrier. */
bool kp_membarrier_all(void);

/* Around a program signal handler called by libkprobes (uc: the context it
 * interrupted).  Async-signal-safe. */
void kp_sigframe_push(const void *uc);
void kp_sigframe_pop(void);

/* The calling thread's record, claimed on first use without locks or
 * allocation; NULL only if every record is taken by live threads. */
struct kp_thread *kp_thread_self(void);

extern __thread struct kp_thread *kp_self_tls __attribute__((tls_model("initial-exec")));

/* kp_thread_self() with the common case inline: one TLS load. */

static inline struct kp_thread *kp_thread_current(void)
{
	struct kp_thread *t = kp_self_tls;

	return t ? t : kp_thread_self();
}

/* The calling thread's record if it has one, never claiming one.  For
 * code that handlers call (a handler always runs with its thread's record:
 * the hit path claimed it): reaching kp_thread_self() from there, with its
 * system call and its store through the thread pointer, would make the
 * handler analysis (kp_code_needs) keep errno around every hit. */
static inline struct kp_thread *kp_thread_existing(void)
{
	return kp_self_tls;
}

/* Read-side sections of threads without a record (kprobes_stack() called
 * outside any handler by a thread that never met the library): one shared
 * count, which kp_synchronize() also waits to see at zero.  A full
 * barrier on entry (the atomic add) orders it before the reads it
 * protects, as section_begun() does for a record's section. */
extern unsigned int kp_guest_readers;

static inline void kp_guest_read_enter(void)
{
	__atomic_fetch_add(&kp_guest_readers, 1, __ATOMIC_SEQ_CST);
}

static inline void kp_guest_read_exit(void)
{
	__atomic_fetch_sub(&kp_guest_readers, 1, __ATOMIC_RELEASE);
}

/* After a section's start: with membarrier the writers pay for the
 * barrier, otherwise the reader does. */
static inline void section_begun(void)
{
	if (kp_membarrier_ok)
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void kp_read_enter(struct kp_thread *t)
{
	arch_section_nest_inc(t->nest);
	section_begun();
}

static inline void kp_read_exit(struct kp_thread *t)
{
	arch_section_nest_dec(t->nest, t->gen);
}

/* A read-side section that runs handlers: nest and in_handler raised and
 * dropped together, each by one 64-bit instruction, as the detours do.
 * (Mixed 32- and 64-bit writes of the pair would make the processor's
 * store forwarding fail at the next 64-bit access: a stall on every hit.) */
#define KP_NEST_AND_HANDLER 0x100000001ULL

static inline void kp_handler_section_enter(struct kp_thread *t)
{
	arch_section_pair_add(t->nest, KP_NEST_AND_HANDLER);
	section_begun();
}

static inline void kp_handler_section_exit(struct kp_thread *t)
{
	arch_section_pair_sub(t->nest, t->gen, KP_NEST_AND_HANDLER);
}

/* Library code on a program thread, outside any handler: the interposed
 * functions' own work, the fork handlers, the unwind tables' updates.  The
 * libc and loader functions it calls are not the program's calls, so a
 * probe hit there runs no handler and counts in nmissed, exactly as a hit
 * inside a handler does: the mark is in_handler itself, which every hit
 * path checks already (nothing is added to them).  A return probe whose
 * function was entered before the mark returns after it is dropped (the
 * marked stretches nest inside the calls), and fires as usual.  Returns
 * the thread's record for kp_lib_code_end() (NULL: none, nothing marked).
 * in_handler first and dropped last: a signal handler in between finds
 * lib_code no larger than what in_handler holds (see signals.c). */
static inline struct kp_thread *kp_lib_code_begin(void)
{
	struct kp_thread *t = kp_thread_current();

	if (!t)
		return NULL;
	t->in_handler++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->lib_code++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return t;
}

static inline void kp_lib_code_end(struct kp_thread *t)
{
	if (!t)
		return;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->lib_code--;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->in_handler--;
}

/* Around the program's code called from marked library code: a program
 * signal handler the library calls (the signal may have come in while the
 * thread ran marked code), a caller's function given to a walk.  Its hits
 * are the program's.  Only the library's part of in_handler is set aside
 * (a probe handler interrupted keeps its own).  Returns what to give back
 * to kp_lib_code_resume(). */
static inline unsigned int kp_lib_code_suspend(void)
{
	struct kp_thread *t = kp_self_tls;
	unsigned int n = t ? t->lib_code : 0;

	if (!n)
		return 0;
	t->lib_code = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->in_handler -= n;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return n;
}

static inline void kp_lib_code_resume(unsigned int n)
{
	struct kp_thread *t = kp_self_tls;

	if (!n)
		return;
	t->in_handler += n;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->lib_code = n;
}

/* Record r's read-side section state now, and whether the section seen in
 * such a snapshot (if any) has ended since.  A thread's section is seen
 * from another thread only after a membarrier (or fence) that follows the
 * change the section must not miss. */
uint64_t kp_thread_section(const struct kp_thread *r);
bool kp_thread_section_ended(const struct kp_thread *r, uint64_t snap);

/* Waits until every read-side section that began before the call has ended.
 * Sections are bounded by handler run time, so this never waits on a thread
 * parked in a system call. */
void kp_synchronize(void);

/* Waits until no live thread is inside the jprobe entry function of the
 * probepoint pp (between the trap and its jprobe_return()). */
void kp_wait_jprobes_left(const void *pp);

/* Asks every other thread where it is: returns true when no thread's
 * interrupted instruction pointer lies in one of the n ranges [lo, hi).
 * Threads that cannot answer (signals blocked, stopped) count as "inside".
 * Never blocks for long. */
bool kp_threads_outside(const uintptr_t (*ranges)[2], int n);

/* [lo, hi) of the library's code and of the signal restorer, set at init. */
extern uintptr_t kp_handler_text[2][2];

/* The real-time signal the census uses; threads that block every other
 * signal must leave it deliverable to take part. */
int kp_census_signal(void);

/* One-time set-up (membarrier registration, census signal). */
void kp_threads_init(void);

#endif
