/* The breakpoint path: SIGTRAP at a probe runs the handlers and sends the
 * thread through the instruction's slot; faults inside slots are shown to
 * the program at the probed address.  Async-signal-safe throughout: no
 * locks, no allocation, no calls into code that could itself be probed
 * except through the re-entrance rule. */
#include <asm/prctl.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "arch/x86_64/regs.h"
#include "arch/x86_64/text_poke.h"
#include "arch/x86_64/unwind.h"
#include "arch/x86_64/xol.h"
#include "core/arch_api.h"
#include "os/linux/hwbreak.h"
#include "os/linux/memory.h"
#include "os/linux/signals.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

#define GREG(uc, r) ((uc)->uc_mcontext.gregs[r])

static unsigned long seg_base(uint8_t seg)
{
	unsigned long base = 0;

	if (seg)
		syscall(SYS_arch_prctl, seg == 'f' ? ARCH_GET_FS : ARCH_GET_GS, &base);
	return base;
}

/* Target of an indirect branch; sp_adjust corrects for a return address our
 * slot code already pushed. */
static int eval_indirect(const struct ind_operand *o, const struct pt_regs *regs,
			 uintptr_t next, long sp_adjust, uintptr_t *out)
{
	const int sp = (int)(offsetof(struct pt_regs, sp) / sizeof(unsigned long));
	uintptr_t ea;

	if (!o->is_mem) {
		*out = regs_get(regs, o->reg);
		return 0;
	}
	ea = (uintptr_t)o->disp + seg_base(o->seg);
	if (o->rip_rel)
		ea += next;
	if (o->base >= 0)
		ea += regs_get(regs, o->base) + (o->base == sp ? sp_adjust : 0);
	if (o->index >= 0)
		ea += regs_get(regs, o->index) * o->scale;
	return kp_mem_read_nofault(ea, out, sizeof(*out));
}

/* A target the CPU would refuse (#GP at the branch itself). */
static bool canonical(uintptr_t a)
{
	return (uintptr_t)((intptr_t)(a << 16) >> 16) == a;
}

/* Emulates a branch for a probe with post handlers: 0, or -EFAULT when the
 * branch would fault (the caller then runs the real instruction, whose
 * fault is reported at the probed address). */
static int emulate_branch(const struct arch_insn *ai, uintptr_t addr, struct pt_regs *r)
{
	uintptr_t next = addr + ai->len, tgt;
	bool zf = r->flags & 0x40;

	switch (ai->klass) {
	case IC_JMP_REL:
		r->ip = ai->target;
		return 0;
	case IC_JCC:
		r->ip = insn_cond_true(ai->cc, r->flags) ? ai->target : next;
		return 0;
	case IC_LOOP:
		if (ai->loop_op == 0xe3) {
			unsigned long c = ai->addr32 ? (uint32_t)r->cx : r->cx;

			r->ip = c == 0 ? ai->target : next;
			return 0;
		}
		r->cx--;
		if (ai->loop_op == 0xe2)
			r->ip = r->cx ? ai->target : next;
		else if (ai->loop_op == 0xe1)
			r->ip = (r->cx && zf) ? ai->target : next;
		else
			r->ip = (r->cx && !zf) ? ai->target : next;
		return 0;
	case IC_RET:
		if (kp_mem_read_nofault(r->sp, &tgt, sizeof(tgt)) || !canonical(tgt))
			return -EFAULT;
		r->ip = tgt;
		r->sp += 8 + ai->ret_imm;
		return 0;
	case IC_JMP_IND:
		if (eval_indirect(&ai->ind, r, next, 0, &tgt) || !canonical(tgt))
			return -EFAULT;
		r->ip = tgt;
		return 0;
	default:
		return -EINVAL;
	}
}

/* Nothing before this point touches errno (raw system calls only), so a
 * probe on __errno_location() or any libc function cannot recurse: hits
 * from here on count as missed. */
static int handlers_begin(struct kp_thread *t)
{
	t->in_handler++;
	return errno;
}

static void handlers_end(struct kp_thread *t, int saved_errno)
{
	errno = saved_errno;
	t->in_handler--;
}

/* While handlers run for regs, kprobes_vector_reg() reads the program's
 * vector registers from the signal frame: the kernel saved them there and
 * puts them back from there when the handler returns.  Handlers run only
 * outside any other hit's handlers, so there is no outer note to keep. */
static void vec_note(struct kp_thread *t, const struct pt_regs *regs, const ucontext_t *uc)
{
	const unsigned char *fp = (const unsigned char *)uc->uc_mcontext.fpregs;
	uint32_t magic;

	if (!fp)
		return;
	memcpy(&magic, fp + KP_VEC_SIG_MAGIC_OFF, sizeof(magic));
	t->vec_area = fp;
	t->vec_layout = magic == KP_VEC_SIG_MAGIC ? KP_VEC_XSAVE : KP_VEC_FXSAVE;
	__atomic_store_n(&t->vec_regs, regs, __ATOMIC_RELAXED);
}

static void vec_forget(struct kp_thread *t)
{
	__atomic_store_n(&t->vec_regs, NULL, __ATOMIC_RELAXED);
}

static void run_post(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	struct pt_regs regs;
	unsigned long ip = GREG(uc, REG_RIP);
	int e;

	regs_from_ucontext(&regs, uc);
	e = handlers_begin(t);
	vec_note(t, &regs, uc);
	kp_run_post_handlers(pp, &regs);
	vec_forget(t);
	handlers_end(t, e);
	regs.ip = ip;
	regs_to_ucontext(&regs, uc);
}

/* Where a hit without post handlers continues: the slot, or, once the
 * probepoint is (being) optimized, the detour's copied instructions — the
 * slot jumps back into the middle of the region the jump replaces. */
static uintptr_t resume_boosted(const struct kp_probepoint *pp)
{
	const struct xol_slot *s = pp->ainsn.slot;

	if (__atomic_load_n(&pp->opt_state, __ATOMIC_ACQUIRE) >= OPT_PREPARED)
		return arch_detour_resume(pp);
	return s->code + s->boost_off;
}

static void resume_probed(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc);

/* A breakpoint at pp was hit. */
static void probe_hit(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	struct pt_regs regs;

	int e;

	if (t->in_handler || t->nest > 1) {
		/* Hit from inside a handler or the trap path: no handlers,
		 * just execute. */
		kp_count_missed(pp);
		GREG(uc, REG_RIP) = (greg_t)resume_boosted(pp);
		return;
	}
	regs_from_ucontext(&regs, uc);
	e = handlers_begin(t);
	vec_note(t, &regs, uc);
	if (kp_run_pre_handlers(pp, &regs)) {
		/* The handler changed the path: resume where it said. */
		vec_forget(t);
		handlers_end(t, e);
		regs_to_ucontext(&regs, uc);
		return;
	}
	vec_forget(t);
	handlers_end(t, e);
	regs_to_ucontext(&regs, uc);
	resume_probed(t, pp, uc);
}

/* Runs the probed instruction of pp (out of line), with post handlers. */
static void resume_probed(struct kp_thread *t, struct kp_probepoint *pp, ucontext_t *uc)
{
	struct xol_slot *s = pp->ainsn.slot;
	struct pt_regs regs;
	bool post;

	post = kp_probepoint_has_post(pp) || !__atomic_load_n(&kp_knob_boost, __ATOMIC_RELAXED);
	if (!post) {
		GREG(uc, REG_RIP) = (greg_t)resume_boosted(pp);
		return;
	}
	if (s->post_off != XOL_NONE) {
		GREG(uc, REG_RIP) = (greg_t)(s->code + s->post_off);
		return;
	}
	regs_from_ucontext(&regs, uc);
	if (emulate_branch(&pp->ainsn, pp->addr, &regs)) {
		GREG(uc, REG_RIP) = (greg_t)(s->code + s->boost_off);
		return;
	}
	regs_to_ucontext(&regs, uc);
	run_post(t, pp, uc);
}

/* The int3 that ends a slot's post code: the instruction has run. */
static bool slot_exit(struct kp_thread *t, struct xol_slot *s, uintptr_t bp, ucontext_t *uc)
{
	struct kp_probepoint *pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
	const struct slot_exit *e = NULL;
	uintptr_t resume;

	for (int i = 0; i < s->nexits; i++)
		if (s->code + s->exits[i].off == bp)
			e = &s->exits[i];
	if (!pp || !e)
		return false;
	resume = e->resume;
	if (e->ind) {
		struct pt_regs regs;

		regs_from_ucontext(&regs, uc);
		if (eval_indirect(&pp->ainsn.ind, &regs, pp->addr + pp->ainsn.len, 8, &resume) ||
		    !canonical(resume)) {
			/* Let the real instruction fault: undo our push first. */
			GREG(uc, REG_RSP) += 8;
			GREG(uc, REG_RIP) = (greg_t)(s->code + s->boost_off);
			return true;
		}
	}
	if (pp->ainsn.klass == IC_SYSCALL && (uintptr_t)GREG(uc, REG_RCX) == bp)
		GREG(uc, REG_RCX) = (greg_t)resume;
	GREG(uc, REG_RIP) = (greg_t)resume;
	if (!t->in_handler && kp_probepoint_has_post(pp))
		run_post(t, pp, uc);
	return true;
}

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
		resume_probed(t, pp, uc);
	else
		GREG(uc, REG_RIP) = (greg_t)addr;
}

/* A static-key site being rewritten: continue as its key now says, or,
 * when the rewrite is over (the int3 gone, maybe back for the next one),
 * run the site again.  Always ours: the byte is read once. */
static bool jump_label_hit(uintptr_t bp, ucontext_t *uc)
{
	const struct kp_jl_site *s = kp_jl_site_at(bp);

	if (!s)
		return false;
	if (*(volatile uint8_t *)bp != 0xcc)
		GREG(uc, REG_RIP) = (greg_t)bp;
	else if (kp_jl_site_jumps(s))
		GREG(uc, REG_RIP) = (greg_t)s->target;
	else
		GREG(uc, REG_RIP) = (greg_t)(bp + arch_jump_label_len());
	return true;
}

static bool trap_dispatch(struct kp_thread *t, uintptr_t bp, ucontext_t *uc)
{
	struct xol_slot *s = xol_slot_of(bp);
	struct kp_probepoint *pp;
	uintptr_t resume;

	if (bp == (uintptr_t)kp_jprobe_return_trap && t->jprobe_pp) {
		jprobe_return_hit(t, uc);
		return true;
	}
	if (s)
		return slot_exit(t, s, bp, uc);
	for (bool int3_seen = false;; int3_seen = true) {
		pp = kp_probepoint_lookup(bp);
		if (pp) {
			probe_hit(t, pp, uc);
			return true;
		}
		if (text_poke_trap(bp, &resume)) {
			GREG(uc, REG_RIP) = (greg_t)resume;
			return true;
		}
		if (jump_label_hit(bp, uc))
			return true;
		if (*(volatile uint8_t *)bp != 0xcc) {
			/* The probe went away after this thread trapped: run
			 * the original instruction that is back in place. */
			GREG(uc, REG_RIP) = (greg_t)bp;
			return true;
		}
		/* An int3 and no probepoint: the program's own, unless the
		 * probe this thread trapped on went away and another one was
		 * put at bp since the lookup (a probepoint is published
		 * before its int3 is written): look again.  Its removal
		 * cannot complete while this thread is in its section. */
		if (int3_seen)
			return false;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	}
}

/* The kernel keeps EFLAGS.AC (alignment checking) set in a signal handler
 * when the program had it set; the library's C code would then fault on its
 * first unaligned access.  The program's flag stays in the context. */
static inline void clear_alignment_check(void)
{
	__asm__ volatile("lea -128(%%rsp), %%rsp\n\tpushfq\n\t"
			 "andl $~0x40000, (%%rsp)\n\tpopfq\n\tlea 128(%%rsp), %%rsp"
			 ::: "memory", "cc");
}

/* A watchpoint's trap (si_code TRAP_PERF): the access is done, the thread
 * is at the next instruction.  True when the trap is ours (run, counted as
 * missed, or stale), false for the program's own perf events. */
static bool watch_trap(const siginfo_t *info, ucontext_t *uc)
{
	uint64_t cookie = kp_siginfo_perf_data(info);
	struct kp_thread *t;
	struct wprobe *wp;
	struct pt_regs regs;
	int e;

	if (!kp_wprobe_cookie_ours(cookie))
		return false;
	t = kp_thread_self();
	if (!t)
		return true;
	kp_read_enter(t);
	wp = kp_wprobe_of_cookie(cookie);
	if (!wp || (__atomic_load_n(&wp->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED) ||
	    !__atomic_load_n(&kp_knob_enabled, __ATOMIC_RELAXED))
		goto out;
	/* Inside a handler, or a trap the kernel could only deliver late
	 * (SIGTRAP was blocked): the registers are not those of the access. */
	if (t->in_handler || (kp_siginfo_perf_flags(info) & KP_TRAP_PERF_FLAG_ASYNC)) {
		__atomic_add_fetch(&wp->nmissed, 1, __ATOMIC_RELAXED);
		goto out;
	}
	if (wp->handler) {
		/* The census sees where the program will return. */
		kp_sigframe_push(uc);
		regs_from_ucontext(&regs, uc);
		e = handlers_begin(t);
		wp->handler(wp, &regs);
		handlers_end(t, e);
		regs_to_ucontext(&regs, uc);
		kp_sigframe_pop();
	}
out:
	kp_read_exit(t);
	return true;
}

/* x86-64 watchpoints trap after the access: nothing to prepare. */
int arch_wprobe_prepare(void)
{
	return 0;
}

int arch_wprobe_after_fork_child(void)
{
	return 0;
}

static void trap_handler(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	struct kp_thread *t;
	bool ours = false;

	clear_alignment_check();
	if (info->si_code == SI_KERNEL) {
		t = kp_thread_self();
		if (t) {
			void *outer = t->trap_ctx;

			kp_read_enter(t);
			/* The census reads trap_ctx of a thread stopped in here:
			 * where it trapped, then where it is sent. */
			__atomic_store_n(&t->trap_ctx, uc, __ATOMIC_RELEASE);
			__atomic_store_n(&t->trap_depth, t->trap_depth + 1, __ATOMIC_RELEASE);
			ours = trap_dispatch(t, (uintptr_t)GREG(uc, REG_RIP) - 1, uc);
			__atomic_store_n(&t->resume_ip, (uintptr_t)GREG(uc, REG_RIP), __ATOMIC_RELEASE);
			__atomic_store_n(&t->trap_depth, t->trap_depth - 1, __ATOMIC_RELEASE);
			__atomic_store_n(&t->trap_ctx, outer, __ATOMIC_RELEASE);
			kp_read_exit(t);
		}
	} else if (info->si_code == TRAP_PERF) {
		ours = watch_trap(info, uc);
	}
	if (!ours)
		kp_sig_forward(sig, info, ctx);
}

static int trap_number(int sig, const siginfo_t *info)
{
	switch (sig) {
	case SIGFPE: return 0;		/* #DE (also #MF/#XM) */
	case SIGILL: return 6;		/* #UD */
	case SIGBUS: return 17;		/* #AC */
	default: return info->si_code == SI_KERNEL ? 13 : 14;	/* #GP / #PF */
	}
}

/* A fault inside a slot happened, for the program, at the probed address. */
static bool fault_in_slot(struct kp_thread *t, struct xol_slot *s, int sig,
			  siginfo_t *info, ucontext_t *uc)
{
	struct kp_probepoint *pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
	uintptr_t ip = (uintptr_t)GREG(uc, REG_RIP);
	struct pt_regs regs;
	int handled = 0;

	if (!pp)
		return false;
	if (s->fault_sp_off != XOL_NONE && ip == s->code + s->fault_sp_off)
		GREG(uc, REG_RSP) += 8;
	GREG(uc, REG_RIP) = (greg_t)pp->addr;
	if (sig != SIGSEGV && sig != SIGBUS && (uintptr_t)info->si_addr == ip)
		info->si_addr = (void *)pp->addr;
	if (!t->in_handler) {
		int e;

		regs_from_ucontext(&regs, uc);
		e = handlers_begin(t);
		handled = kp_run_fault_handlers(pp, &regs, trap_number(sig, info));
		handlers_end(t, e);
		if (handled)
			regs_to_ucontext(&regs, uc);
	}
	return handled;
}

/* A fault in a detour's copied instruction: at that instruction's address. */
static bool fault_in_detour(struct kp_thread *t, int sig, siginfo_t *info, ucontext_t *uc,
			    uintptr_t *orig_out, uintptr_t *copy_out)
{
	uintptr_t ip = (uintptr_t)GREG(uc, REG_RIP), orig, copy;
	struct kp_probepoint *pp;
	struct pt_regs regs;
	int handled = 0;

	if (!arch_detour_fault_addr(ip, &orig, &copy, &pp))
		return false;
	/* Past the first copied instruction, orig lies inside the installed
	 * jump: resuming there must go back to the copy instead. */
	if (orig != pp->addr) {
		*orig_out = orig;
		*copy_out = copy;
	}
	GREG(uc, REG_RIP) = (greg_t)orig;
	if (sig != SIGSEGV && sig != SIGBUS && (uintptr_t)info->si_addr == ip)
		info->si_addr = (void *)orig;
	if (!t->in_handler) {
		int e;

		regs_from_ucontext(&regs, uc);
		e = handlers_begin(t);
		handled = kp_run_fault_handlers(pp, &regs, trap_number(sig, info));
		handlers_end(t, e);
		if (handled)
			regs_to_ucontext(&regs, uc);
	}
	return handled;
}

static void fault_handler(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	struct xol_slot *s;
	struct kp_thread *t;
	uintptr_t orig = 0, copy = 0;
	bool handled = false;

	/* the stack unwinder's fault-safe load: no business of the program's */
	if (arch_unwind_fixup(uc))
		return;
	s = xol_slot_of((uintptr_t)GREG(uc, REG_RIP));
	t = kp_thread_self();
	clear_alignment_check();
	if (t && !s) {
		kp_read_enter(t);
		handled = fault_in_detour(t, sig, info, uc, &orig, &copy);
		kp_read_exit(t);
	} else if (t) {
		kp_read_enter(t);
		handled = fault_in_slot(t, s, sig, info, uc);
		kp_read_exit(t);
	}
	if (!handled)
		kp_sig_forward(sig, info, ctx);
	if (copy && (uintptr_t)GREG(uc, REG_RIP) == orig)
		GREG(uc, REG_RIP) = (greg_t)copy;
}

int arch_init(void)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	int err;

	kp_os_upcall_set(ip_bound_for_detour, arch_ip_bound_for_detour);
	err = kp_sig_own(SIGTRAP, trap_handler, 0, true);
	arch_fpu_init();

	for (unsigned int i = 0; !err && i < sizeof(faults) / sizeof(faults[0]); i++)
		err = kp_sig_own(faults[i], fault_handler, SA_ONSTACK, true);
	return err;
}
