/* The breakpoint path (arm64): a BRK at a probe raises SIGTRAP with the pc
 * at the BRK itself; the handlers run and the thread goes on through the
 * instruction's slot, or the instruction is simulated; faults inside slots
 * are shown to the program at the probed address.  Async-signal-safe
 * throughout: no locks, no allocation, no calls into code that could
 * itself be probed except through the re-entrance rule. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#include "arch/arch.h"
#include "arch/arm64/insn.h"
#include "arch/arm64/optimize.h"
#include "arch/arm64/regs.h"
#include "arch/arm64/text_poke.h"
#include "arch/arm64/trap.h"
#include "arch/arm64/unwind.h"
#include "arch/arm64/xol.h"
#include "core/arch_api.h"
#include "os/linux/hwbreak.h"
#include "os/linux/signals.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

/* Our BRKs: the probe's, and the slots' two exits. */
static bool our_brk(uint32_t w)
{
	return w == ARCH_BREAKPOINT_INSN || w == A64_BRK(A64_BRK_XOL_EXIT_IMM) ||
	       w == A64_BRK(A64_BRK_XOL_POST_IMM);
}

/* While handlers run for regs, kprobes_vector_reg() reads the program's
 * V registers from the signal frame's FP/SIMD record: the kernel saved
 * them there and puts them back from there when the handler returns.
 * Handlers run only outside any other hit's handlers, so there is no
 * outer note to keep. */
static void vec_note(struct kp_thread *t, const struct pt_regs *regs, const ucontext_t *uc)
{
	const void *vregs = a64_sigframe_vregs(uc);

	if (!vregs)
		return;
	t->vec_area = vregs;
	t->vec_layout = KP_VEC_FPSIMD;
	__atomic_store_n(&t->vec_regs, regs, __ATOMIC_RELAXED);
}

static void vec_forget(struct kp_thread *t)
{
	__atomic_store_n(&t->vec_regs, NULL, __ATOMIC_RELAXED);
}

static void run_post(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	struct pt_regs regs;
	unsigned long pc = PC(uc);
	int e;

	regs_from_ucontext(&regs, uc);
	e = a64_handlers_begin(t);
	vec_note(t, &regs, uc);
	kp_run_post_handlers(pp, &regs);
	vec_forget(t);
	a64_handlers_end(t, e);
	regs.pc = pc;
	regs_to_ucontext(&regs, uc);
}

static int trap_number(int sig)
{
	/* the kernel's ESR exception classes: data abort, instruction abort,
	 * unknown (undefined instruction), FP exception */
	switch (sig) {
	case SIGILL: return 0x00;
	case SIGFPE: return 0x2c;
	case SIGBUS: return 0x24;
	default: return 0x24;
	}
}

/* A simulated literal load that cannot read its literal: the instruction
 * would fault at the probed address.  The fault handlers run, then the
 * program gets the SIGSEGV the instruction would have raised. */
static void simulated_fault(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	siginfo_t info;
	struct pt_regs regs;
	int handled = 0;

	PC(uc) = pp->addr;
	if (!t->in_handler) {
		int e;

		regs_from_ucontext(&regs, uc);
		e = a64_handlers_begin(t);
		handled = kp_run_fault_handlers(pp, &regs, trap_number(SIGSEGV));
		a64_handlers_end(t, e);
		if (handled) {
			regs_to_ucontext(&regs, uc);
			return;
		}
	}
	memset(&info, 0, sizeof(info));
	info.si_signo = SIGSEGV;
	info.si_code = SEGV_MAPERR;
	info.si_addr = (void *)pp->addr;
	kp_sig_forward(SIGSEGV, &info, uc);
}

/* Runs the probed instruction of pp: out of line in its slot (the post
 * entry when post handlers are to run), or simulated here followed by the
 * post handlers. */
static void resume_probed(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc,
			  bool post)
{
	const struct arch_insn *ai = &pp->ainsn;
	struct pt_regs regs;

	if (ai->slot) {
		PC(uc) = ai->slot->code + (post ? XOL_POST_OFF : XOL_BOOST_OFF);
		return;
	}
	regs_from_ucontext(&regs, uc);
	regs.pc = pp->addr;
	if (a64_insn_simulate(&ai->dec, &regs)) {
		simulated_fault(t, pp, uc);
		return;
	}
	regs_to_ucontext(&regs, uc);
	if (post)
		run_post(t, pp, uc);
}

static bool wants_post(const struct kp_probepoint *pp)
{
	return kp_probepoint_has_post(pp);
}

/* A BRK at pp was hit. */
static void probe_hit(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	struct pt_regs regs;
	int e;

	if (t->in_handler || t->nest > 1) {
		/* Hit from inside a handler or the trap path: no handlers,
		 * just execute. */
		kp_count_missed(pp);
		resume_probed(t, pp, uc, false);
		return;
	}
	regs_from_ucontext(&regs, uc);
	e = a64_handlers_begin(t);
	vec_note(t, &regs, uc);
	if (kp_run_pre_handlers(pp, &regs)) {
		/* The handler changed the path: resume where it said. */
		vec_forget(t);
		a64_handlers_end(t, e);
		regs_to_ucontext(&regs, uc);
		return;
	}
	vec_forget(t);
	a64_handlers_end(t, e);
	regs_to_ucontext(&regs, uc);
	resume_probed(t, pp, uc, wants_post(pp));
}

/* A slot's exit BRK: the instruction has run. */
static bool slot_exit(struct kp_thread *t, struct xol_slot *s, uintptr_t pc, ucontext_t *uc)
{
	struct kp_probepoint *pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
	bool post = pc == s->code + XOL_POST_OFF + 4;

	if (!pp || (!post && pc != s->code + XOL_BOOST_OFF + 4))
		return false;
	PC(uc) = pp->addr + 4;
	if (post && !t->in_handler && wants_post(pp))
		run_post(t, pp, uc);
	return true;
}

uintptr_t arch_jprobe_restore(struct kp_thread *t, ucontext_t *uc);
extern char kp_jprobe_return_trap[];

/* jprobe_return(): back to the probed function's own state, then run the
 * probed instruction (out of line, or in place if the probe is gone). */
static void jprobe_return_hit(struct kp_thread *t, ucontext_t *uc)
{
	uintptr_t addr = arch_jprobe_restore(t, uc);
	struct kp_probepoint *pp = kp_probepoint_lookup(addr);

	t->jprobe_pp = NULL;
	t->in_handler--;
	if (pp)
		resume_probed(t, pp, uc, wants_post(pp));
	else
		PC(uc) = addr;
}

/*
 * The probe at pc went away after this thread trapped, and the word there
 * is the program's again: the thread runs it.  A thread that comes back
 * here for the same pc still runs a copy of the code older than memory —
 * seen under emulation, where after many probes came and went at a word,
 * a thread went on executing the BRK that memory no longer held, for
 * ever.  The word is then written again as it is, which makes every copy
 * current; under the registry lock, which every writer of probes' words
 * holds, so that the write cannot undo a probe armed meanwhile (when the
 * lock is busy, the thread traps again and tries again).
 */
static void refetch(struct kp_thread *t, uintptr_t pc)
{
	int saved_errno;

	if (t->refetch_pc != pc) {
		t->refetch_pc = pc;
		return;
	}
	if (!kp_registry_trylock())
		return;
	saved_errno = errno;
	if (!kp_probepoint_lookup(pc) && *(volatile uint32_t *)pc != ARCH_BREAKPOINT_INSN &&
	    !text_refresh_word(pc))
		t->refetch_pc = 0;
	errno = saved_errno;
	kp_registry_unlock();
}

static bool trap_dispatch(struct kp_thread *t, uintptr_t pc, ucontext_t *uc)
{
	struct xol_slot *s;
	struct kp_probepoint *pp;

	if (pc == (uintptr_t)kp_jprobe_return_trap && t->jprobe_pp) {
		jprobe_return_hit(t, uc);
		return true;
	}
	s = xol_slot_of(pc);
	if (s)
		return slot_exit(t, s, pc, uc);
	for (bool seen = false;; seen = true) {
		pp = kp_probepoint_lookup(pc);
		if (pp) {
			t->refetch_pc = 0;
			probe_hit(t, pp, uc);
			return true;
		}
		if (*(volatile uint32_t *)pc != ARCH_BREAKPOINT_INSN) {
			/* The probe went away after this thread trapped (or
			 * this is not our BRK: then the word at pc is the
			 * program's own, and it traps again, the program's). */
			if (!our_brk(*(volatile uint32_t *)pc) &&
			    (*(volatile uint32_t *)pc & 0xffe0001fu) == 0xd4200000u)
				return false;
			PC(uc) = pc;
			refetch(t, pc);
			return true;
		}
		/* Our BRK and no probepoint: a probe that went away and
		 * another put at pc since the lookup (a probepoint is
		 * published before its BRK is written): look again. */
		if (seen)
			return false;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	}
}

/* One trap at pc, for the census: where the thread trapped, then where it
 * is sent.  False when it is not ours. */
static bool trap_at(uintptr_t pc, ucontext_t *uc)
{
	struct kp_thread *t = kp_thread_self();
	void *outer;
	bool ours;

	if (!t)
		return false;
	outer = t->trap_ctx;
	kp_read_enter(t);
	__atomic_store_n(&t->trap_ctx, uc, __ATOMIC_RELEASE);
	__atomic_store_n(&t->trap_depth, t->trap_depth + 1, __ATOMIC_RELEASE);
	ours = trap_dispatch(t, pc, uc);
	__atomic_store_n(&t->resume_ip, (uintptr_t)PC(uc), __ATOMIC_RELEASE);
	__atomic_store_n(&t->trap_depth, t->trap_depth - 1, __ATOMIC_RELEASE);
	__atomic_store_n(&t->trap_ctx, outer, __ATOMIC_RELEASE);
	kp_read_exit(t);
	return ours;
}

static void trap_handler(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t pc = (uintptr_t)PC(uc);
	bool ours = false;

	/* A BRK reports TRAP_BRKPT with the pc at the BRK.  Our BRKs carry
	 * our immediates; a probe removed since the trap has the original
	 * word back, which trap_dispatch() tells from a foreign BRK. */
	if (info->si_code == TRAP_BRKPT && !(pc & 3))
		ours = trap_at(pc, uc);
	else if (info->si_code == TRAP_PERF)
		ours = a64_watch_trap(info, uc);
	if (!ours)
		kp_sig_forward(sig, info, ctx);
}

/* A fault inside a slot happened, for the program, at the probed address. */
static bool fault_in_slot(struct kp_thread *t, struct xol_slot *s, int sig,
			  siginfo_t *info, ucontext_t *uc)
{
	struct kp_probepoint *pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
	uintptr_t pc = (uintptr_t)PC(uc);
	struct pt_regs regs;
	int handled = 0;

	if (!pp)
		return false;
	PC(uc) = pp->addr;
	if (sig != SIGSEGV && sig != SIGBUS && (uintptr_t)info->si_addr == pc)
		info->si_addr = (void *)pp->addr;
	if (!t->in_handler) {
		int e;

		regs_from_ucontext(&regs, uc);
		e = a64_handlers_begin(t);
		handled = kp_run_fault_handlers(pp, &regs, trap_number(sig));
		a64_handlers_end(t, e);
		if (handled)
			regs_to_ucontext(&regs, uc);
	}
	return handled;
}

/* A fault in a detour's copy of the probed instruction: every register
 * is the program's there, so it happened, for the program, at the probed
 * address (after the probe's fault handlers, as for a slot).  False when
 * ip is not in one, or the program is to see the fault. */
static bool fault_in_detour(struct kp_thread *t, int sig, siginfo_t *info, ucontext_t *uc)
{
	uintptr_t pc = (uintptr_t)PC(uc);
	struct kp_probepoint *pp = a64_detour_copy_owner(pc);
	struct pt_regs regs;
	int handled = 0;

	if (!pp)
		return false;
	PC(uc) = pp->addr;
	if (sig != SIGSEGV && sig != SIGBUS && (uintptr_t)info->si_addr == pc)
		info->si_addr = (void *)pp->addr;
	if (!t->in_handler) {
		int e;

		regs_from_ucontext(&regs, uc);
		e = a64_handlers_begin(t);
		handled = kp_run_fault_handlers(pp, &regs, trap_number(sig));
		a64_handlers_end(t, e);
		if (handled)
			regs_to_ucontext(&regs, uc);
	}
	return handled;
}

/* PSTATE.BTYPE: the branch type a Branch Target Identification check
 * was made for. */
#define PSTATE_BTYPE 0xc00UL

static void fault_handler(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t pc = (uintptr_t)PC(uc);
	struct xol_slot *s;
	struct kp_thread *t;
	bool handled = false;

	/* the caught loads' fault: no business of the program's */
	if ((sig == SIGSEGV || sig == SIGBUS) && arch_unwind_fixup(uc))
		return;
	/* An indirect branch to a probed landing pad (BTI C, PACIASP) on a
	 * guarded page meets our BRK, which is no landing pad: the Branch
	 * Target exception comes before the BRK would trap.  The landing
	 * pad was there: the probe is hit as if the check had passed. */
	if (sig == SIGILL && info->si_code == ILL_ILLOPC && !(pc & 3) &&
	    (uc->uc_mcontext.pstate & PSTATE_BTYPE) &&
	    *(volatile uint32_t *)pc == ARCH_BREAKPOINT_INSN && kp_probepoint_lookup(pc)) {
		uc->uc_mcontext.pstate &= ~PSTATE_BTYPE;
		if (trap_at(pc, uc))
			return;
	}
	/* The same for an optimized probe's B: taken again with BTYPE
	 * cleared, it goes to the detour (one signal per such call, as the
	 * BRK costs). */
	if (sig == SIGILL && info->si_code == ILL_ILLOPC && !(pc & 3) &&
	    (uc->uc_mcontext.pstate & PSTATE_BTYPE) && a64_detour_jump_at(pc)) {
		uc->uc_mcontext.pstate &= ~PSTATE_BTYPE;
		return;
	}
	/* The end of a watchpoint's step; a fault of the access it steps,
	 * which the program sees at the access */
	if (sig == SIGILL && info->si_code == ILL_ILLOPC && a64_watch_step_done(info, uc))
		return;
	if ((sig == SIGSEGV || sig == SIGBUS) && a64_watch_step_fault(uc)) {
		kp_sig_forward(sig, info, ctx);
		return;
	}
	s = xol_slot_of(pc);
	t = kp_thread_self();
	if (t && s) {
		kp_read_enter(t);
		handled = fault_in_slot(t, s, sig, info, uc);
		kp_read_exit(t);
	} else if (t) {
		kp_read_enter(t);
		handled = fault_in_detour(t, sig, info, uc);
		kp_read_exit(t);
	}
	if (!handled)
		kp_sig_forward(sig, info, ctx);
}

int arch_init(void)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	int err;

	kp_os_upcall_set(ip_bound_for_detour, a64_ip_bound_for_detour);
	err = kp_sig_own(SIGTRAP, trap_handler, 0, true);
	for (unsigned int i = 0; !err && i < sizeof(faults) / sizeof(faults[0]); i++)
		err = kp_sig_own(faults[i], fault_handler, SA_ONSTACK, true);
	return err;
}
