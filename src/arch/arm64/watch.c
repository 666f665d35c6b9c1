/*
 * Watchpoints on arm64: stepping the access.
 *
 * An arm64 watchpoint traps *before* the access, with the pc at the
 * accessing instruction.  The kernel then means to step the access itself
 * (it turns the thread's watchpoints off and single-steps), but the
 * SIGTRAP it sends is delivered first, and that step lands on the signal
 * handler's first instruction instead: when the handler returns to the
 * access, the watchpoint traps again, for ever.  So the trap handler
 * steps the access itself, and runs the handlers after it, as they run
 * on x86-64 (where the trap comes after the access):
 *
 *   1. the trap (SIGTRAP, TRAP_PERF, pc at the access): the access is
 *      copied into the thread's slot, [access; UDF], and the thread sent
 *      there with every signal blocked but SIGILL, SIGSEGV and SIGBUS;
 *   2. the access runs in the slot and the watchpoint traps again; with
 *      SIGTRAP blocked, nothing is delivered, and the kernel's own step
 *      now carries the access out (its trap stays pending, flagged
 *      asynchronous);
 *   3. the UDF (SIGILL): the thread's mask is the program's again, the pc
 *      the instruction after the access; SIGTRAP is unblocked at once,
 *      which delivers the pending trap (the step's own: dropped); then the
 *      handlers run, with the registers as the access left them, and an
 *      access they make themselves traps on its own (counted missed).
 *      Linux 6.1 delivers a blocked synchronous signal first when an
 *      unblocked one is pending (dequeue_synchronous_signal() takes the
 *      first in the queue): there the step's own trap arrives with the
 *      UDF as its pc, and the SIGILL is taken at the trap handler's first
 *      instruction; the SIGILL handler then leaves it to the trap, which
 *      ends the step the same way.
 *
 * PC-relative loads (LDR literal) cannot run elsewhere: they are
 * simulated in the trap handler (the simulator's read is the access).
 * Exclusive load/store pairs are stepped like any access; as with any
 * trap between the pair, the store-exclusive then fails, and a loop that
 * retries it with the watchpoint on never ends (LSE atomics do not have
 * this problem).
 *
 * The slots are one memfd mapped twice (os/linux/dualmap.h), written with
 * plain stores from the trap handler: one slot per thread record, so a
 * thread rewrites only its own, which no other thread runs, and one spare
 * for a thread without a record, taken by compare-and-swap.  A fork child
 * gets slots of its own (the mapping is shared with the parent).
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.h"
#include "arch/arm64/insn.h"
#include "arch/arm64/regs.h"
#include "arch/arm64/trap.h"
#include "core/arch_api.h"
#include "os/linux/dualmap.h"
#include "os/linux/hwbreak.h"
#include "os/linux/memory.h"
#include "os/linux/sys.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

/* UDF #imm16: permanently undefined, SIGILL (ILL_ILLOPC) at its pc. */
#define A64_UDF(imm) ((uint32_t)(imm) & 0xffffu)
#define WSTEP_UDF_IMM 0x6b77

#define SLOT_WORDS 2
#define SLOT_BYTES (SLOT_WORDS * 4)
#define SPARE KP_MAX_THREADS		/* the slot of a thread without a record */
#define NSLOTS (KP_MAX_THREADS + 1)

static struct kp_dualmap slots;		/* rx published last (release) */

/* The spare slot's step, and the thread using it (0: free). */
static struct kp_wstep spare;
static pid_t spare_tid;

/* The kernel's sigset: 64 signals, bit sig - 1. */
#define SIGBIT(sig) (1ULL << ((sig) - 1))

static size_t slots_bytes(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return ((size_t)NSLOTS * SLOT_BYTES + pg - 1) & ~(pg - 1);
}

int arch_wprobe_prepare(void)
{
	struct kp_dualmap m;
	int err;

	if (__atomic_load_n(&slots.rx, __ATOMIC_ACQUIRE))
		return 0;
	err = kp_dualmap_create(&m, slots_bytes());
	if (err)
		return err;
	slots.rw = m.rw;
	slots.len = m.len;
	__atomic_store_n(&slots.rx, m.rx, __ATOMIC_RELEASE);
	return 0;
}

/* The child's only thread is not stepping; the slots it inherited are its
 * parent's too, so it takes fresh ones. */
int arch_wprobe_after_fork_child(void)
{
	struct kp_dualmap old = slots;

	if (!old.rx)
		return 0;
	spare_tid = 0;
	__atomic_store_n(&slots.rx, NULL, __ATOMIC_RELEASE);
	munmap(old.rw, old.len);
	munmap((void *)old.rx, old.len);
	return arch_wprobe_prepare();
}

static uintptr_t slot_code(unsigned int i)
{
	return (uintptr_t)slots.rx + (size_t)i * SLOT_BYTES;
}

/* The thread's slot: its record's, or the spare (false when that is in
 * use by another thread: the trap is taken again until it is free). */
static bool slot_take(struct kp_thread *t, unsigned int *i, struct kp_wstep **st)
{
	unsigned int n;
	pid_t me, none = 0;

	if (t) {
		*i = (unsigned int)(t - kp_thread_records(&n));
		*st = &t->wstep;
		return true;
	}
	me = kp_gettid();
	if (!__atomic_compare_exchange_n(&spare_tid, &none, me, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED) && none != me)
		return false;
	*i = SPARE;
	*st = &spare;
	return true;
}

/* The step of the thread whose slot ends at pc (the UDF), or NULL. */
static struct kp_wstep *step_at(uintptr_t pc, unsigned int *i)
{
	uintptr_t rx = (uintptr_t)__atomic_load_n(&slots.rx, __ATOMIC_ACQUIRE);
	struct kp_thread *t;
	unsigned int n;

	if (!rx || pc < rx || pc >= rx + (size_t)NSLOTS * SLOT_BYTES)
		return NULL;
	*i = (unsigned int)((pc - rx) / SLOT_BYTES);
	if (*i == SPARE)
		return __atomic_load_n(&spare_tid, __ATOMIC_RELAXED) == kp_gettid() ? &spare : NULL;
	t = kp_thread_self();
	if (!t || (unsigned int)(t - kp_thread_records(&n)) != *i)
		return NULL;
	return &t->wstep;
}

/* The watchpoint named by cookie when it is to run: registered, enabled,
 * the global knob on.  Inside a read-side section. */
static struct wprobe *live_wprobe(uint64_t cookie)
{
	struct wprobe *wp = kp_wprobe_of_cookie(cookie);

	if (!wp || (__atomic_load_n(&wp->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED) ||
	    !__atomic_load_n(&kp_knob_enabled, __ATOMIC_RELAXED))
		return NULL;
	return wp;
}

/* t may be NULL (a thread without a record). */
static void count_missed(struct kp_thread *t, uint64_t cookie)
{
	struct wprobe *wp;

	if (t)
		kp_read_enter(t);
	else
		kp_guest_read_enter();
	wp = live_wprobe(cookie);
	if (wp)
		__atomic_add_fetch(&wp->nmissed, 1, __ATOMIC_RELAXED);
	if (t)
		kp_read_exit(t);
	else
		kp_guest_read_exit();
}

/* The watchpoint's trap of the access just stepped is pending (SIGTRAP
 * blocked): taken now, as the step's own, so that accesses the handlers
 * make trap on their own (and count as missed). */
static void take_own_trap(struct kp_thread *t)
{
	uint64_t trap = SIGBIT(SIGTRAP);

	__atomic_store_n(&t->wstep.echo, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	kp_syscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&trap, 0, 8, 0, 0);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->wstep.echo, 0, __ATOMIC_RELAXED);
}

/* The handlers of the watchpoint named by cookie (0: none), with uc the
 * program's context right after the access. */
static void run_handlers(struct kp_thread *t, uint64_t cookie, ucontext_t *uc)
{
	struct pt_regs regs;
	struct wprobe *wp;
	int e;

	if (!cookie)
		return;
	kp_read_enter(t);
	wp = live_wprobe(cookie);
	if (wp && wp->handler) {
		/* The census sees where the program will return. */
		kp_sigframe_push(uc);
		regs_from_ucontext(&regs, uc);
		e = a64_handlers_begin(t);
		wp->handler(wp, &regs);
		a64_handlers_end(t, e);
		regs_to_ucontext(&regs, uc);
		kp_sigframe_pop();
	}
	kp_read_exit(t);
}

/* A PC-relative load: simulated here, the simulator's read being the
 * access.  The trap handler runs with SIGTRAP open (handlers may hit
 * breakpoints): it is blocked for the read, so that the kernel steps it
 * and its trap waits, for take_own_trap(). */
static void simulate_access(struct kp_thread *t, const struct a64_insn *dec, uint64_t cookie,
			    ucontext_t *uc)
{
	uint64_t trap = SIGBIT(SIGTRAP);
	struct pt_regs regs;
	int err;

	regs_from_ucontext(&regs, uc);
	kp_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&trap, 0, 8, 0, 0);
	err = a64_insn_simulate(dec, &regs);
	if (!t) {
		kp_syscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&trap, 0, 8, 0, 0);
		if (!err)
			regs_to_ucontext(&regs, uc);
		return;
	}
	take_own_trap(t);
	/* an unreadable literal: the instruction faults when it runs again
	 * (the watchpoint comes first only where it can be read) */
	if (err)
		return;
	regs_to_ucontext(&regs, uc);
	run_handlers(t, cookie, uc);
}

/* Sends the thread through its slot with the access word insn. */
static bool step_in_slot(struct kp_thread *t, uint32_t insn, uint64_t cookie, ucontext_t *uc)
{
	uint32_t *code;
	struct kp_wstep *st;
	uint64_t window = ~(SIGBIT(SIGILL) | SIGBIT(SIGSEGV) | SIGBIT(SIGBUS));
	unsigned int i;
	uintptr_t at;

	if (!slot_take(t, &i, &st))
		return false;
	at = slot_code(i);
	code = (uint32_t *)((char *)slots.rw + (at - (uintptr_t)slots.rx));
	code[0] = insn;
	code[1] = A64_UDF(WSTEP_UDF_IMM);
	/* cleaned to the point of unification and invalidated at the
	 * executable addresses; only this thread runs this slot, and its
	 * return from the signal synchronizes its context */
	__builtin___clear_cache((char *)at, (char *)(at + SLOT_BYTES));
	st->pc = (uintptr_t)PC(uc) + 4;
	st->cookie = cookie;
	memcpy(&st->mask, &uc->uc_sigmask, sizeof(st->mask));
	__atomic_store_n(&st->active, 1, __ATOMIC_RELAXED);
	/* nothing but the slot's own traps until the UDF: no handler of the
	 * program's runs with SIGTRAP blocked (a BRK there would kill) */
	memcpy(&uc->uc_sigmask, &window, sizeof(window));
	PC(uc) = at;
	return true;
}

/* Ends the step st (slot i) whose UDF uc is at: the context becomes the
 * program's right after the access, then the handlers run, with SIGTRAP
 * open (a breakpoint they meet with it blocked would kill the process),
 * which takes the step's own trap where that is still pending. */
static void step_finish(struct kp_wstep *st, unsigned int i, ucontext_t *uc)
{
	uint64_t cookie = st->cookie;
	struct kp_thread *t;

	PC(uc) = st->pc;
	memcpy(&uc->uc_sigmask, &st->mask, sizeof(st->mask));
	__atomic_store_n(&st->active, 0, __ATOMIC_RELAXED);
	if (i == SPARE) {
		/* no record: no handler; the step's own trap, when still
		 * due, comes once the mask is the program's again, and counts
		 * as the missed hit this was */
		__atomic_store_n(&spare_tid, 0, __ATOMIC_RELEASE);
		return;
	}
	t = kp_thread_self();
	take_own_trap(t);
	run_handlers(t, cookie, uc);
}

/* The step whose UDF is at pc and is under way, or NULL. */
static struct kp_wstep *step_ending_at(uintptr_t pc, unsigned int *i)
{
	struct kp_wstep *st = step_at(pc - 4, i);

	if (!st || !__atomic_load_n(&st->active, __ATOMIC_RELAXED) || pc != slot_code(*i) + 4)
		return NULL;
	return st;
}

bool a64_watch_trap(const siginfo_t *info, ucontext_t *uc)
{
	uint64_t cookie = kp_siginfo_perf_data(info), run;
	uintptr_t pc = (uintptr_t)PC(uc);
	struct kp_thread *t;
	struct kp_wstep *st;
	struct a64_insn dec;
	uintptr_t word;
	unsigned int i;

	if (!kp_wprobe_cookie_ours(cookie))
		return false;
	t = kp_thread_self();
	if (kp_siginfo_perf_flags(info) & KP_TRAP_PERF_FLAG_ASYNC) {
		/* The step's own trap, taken ahead of its UDF's SIGILL (see
		 * above): the step ends here. */
		st = step_ending_at(pc, &i);
		if (st) {
			step_finish(st, i, uc);
			return true;
		}
		/* Delivered late: the kernel stepped that access, long done.
		 * The step's own trap is no hit; any other is a missed one. */
		if (!t || !__atomic_load_n(&t->wstep.echo, __ATOMIC_RELAXED))
			count_missed(t, cookie);
		return true;
	}
	/* the aligned word holding the instruction: never across a page */
	if (!__atomic_load_n(&slots.rx, __ATOMIC_ACQUIRE) || (pc & 3) ||
	    kp_load_nofault(pc & ~(uintptr_t)7, &word))
		return true;	/* taken again */
	word = (uint32_t)(word >> (8 * (pc & 4)));
	/* A probe's BRK there now: its path runs the access out of line,
	 * where it traps again. */
	if ((uint32_t)word == ARCH_BREAKPOINT_INSN)
		return true;
	/* Inside a handler: stepped, counted as missed, not run. */
	run = cookie;
	if (!t || t->in_handler) {
		if (t)
			count_missed(t, cookie);
		run = 0;
	}
	a64_insn_decode((uint32_t)word, &dec);
	if (dec.kind == A64_INSN_SIMULATE) {
		simulate_access(t, &dec, run, uc);
		return true;
	}
	/* everything else that accesses memory runs anywhere unchanged
	 * (exclusives included: see above) */
	step_in_slot(t, (uint32_t)word, run, uc);
	return true;
}

bool a64_watch_step_done(const siginfo_t *info, ucontext_t *uc)
{
	uintptr_t at = (uintptr_t)info->si_addr;
	unsigned int i;
	struct kp_wstep *st = step_ending_at(at, &i);

	if (!st)
		return false;
	/* taken at another handler's first instruction: the step's own
	 * trap's, delivered first, which ends the step */
	if ((uintptr_t)PC(uc) != at)
		return true;
	step_finish(st, i, uc);
	return true;
}

bool a64_watch_step_fault(ucontext_t *uc)
{
	struct kp_wstep *st;
	unsigned int i;

	st = step_at((uintptr_t)PC(uc), &i);
	if (!st || !__atomic_load_n(&st->active, __ATOMIC_RELAXED) ||
	    (uintptr_t)PC(uc) != slot_code(i))
		return false;
	PC(uc) = st->pc - 4;
	memcpy(&uc->uc_sigmask, &st->mask, sizeof(st->mask));
	__atomic_store_n(&st->active, 0, __ATOMIC_RELAXED);
	if (i == SPARE)
		__atomic_store_n(&spare_tid, 0, __ATOMIC_RELEASE);
	return true;
}
