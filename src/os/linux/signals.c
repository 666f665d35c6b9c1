/* Ownership of SIGTRAP and the fault signals; interposition of the calls
 * that install handlers or block signals. */
#include "os/linux/signals.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os/linux/loader.h"
#include "os/linux/sys.h"
#include "os/linux/threads.h"

#define KP_EXPORT __attribute__((visibility("default")))
#define RING 8

/* The program's dispositions of owned signals, published lock-free through
 * a small ring so a handler never reads a half-written entry. */
struct prog_disposition {
	struct sigaction act[RING];
	unsigned int cur;
	bool owned;
	bool wrapped;		/* the kernel calls frame_wrapper for it */
};

static struct prog_disposition prog[NSIG];

/* Signal sets by hand: these run on the program's threads, and a call of
 * libc's sigaddset() there would show up as the program's own (a probe on
 * it would count it). */
static void set_empty(sigset_t *set)
{
	memset(set, 0, sizeof(*set));
}

static void set_add(sigset_t *set, int sig)
{
	set->__val[(sig - 1) / (8 * sizeof(unsigned long))] |=
		1UL << ((sig - 1) % (8 * sizeof(unsigned long)));
}

static bool set_has(const sigset_t *set, int sig)
{
	return set->__val[(sig - 1) / (8 * sizeof(unsigned long))] &
	       (1UL << ((sig - 1) % (8 * sizeof(unsigned long))));
}

static void set_del(sigset_t *set, int sig)
{
	set->__val[(sig - 1) / (8 * sizeof(unsigned long))] &=
		~(1UL << ((sig - 1) % (8 * sizeof(unsigned long))));
}
static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*attr_sigmask_fn)(pthread_attr_t *, const sigset_t *);

static sigaction_fn real_sigaction;
static sigmask_fn real_sigprocmask, real_pthread_sigmask;
static attr_sigmask_fn real_attr_setsigmask;

static void *next_symbol(const char *name)
{
	return kp_next_symbol(name, LIBC_SO);
}

/* For the fork handlers (src/core/fork.c): a child never inherits prog_lock
 * held by a thread it does not have (it may well call sigaction() first
 * thing). */
void kp_sig_fork_lock(void)
{
	pthread_mutex_lock(&prog_lock);
}

void kp_sig_fork_unlock(void)
{
	pthread_mutex_unlock(&prog_lock);
}

static void resolve_real(void)
{
	struct kp_thread *t;

	if (real_sigaction)
		return;
	t = kp_lib_code_begin();
	real_sigprocmask = (sigmask_fn)next_symbol("sigprocmask");
	real_pthread_sigmask = (sigmask_fn)next_symbol("pthread_sigmask");
	real_attr_setsigmask = (attr_sigmask_fn)next_symbol("pthread_attr_setsigmask_np");
	__atomic_store_n(&real_sigaction, (sigaction_fn)next_symbol("sigaction"),
			 __ATOMIC_RELEASE);
	kp_lib_code_end(t);
}

bool kp_sig_is_owned(int sig)
{
	return sig > 0 && sig < NSIG && __atomic_load_n(&prog[sig].owned, __ATOMIC_ACQUIRE);
}

static const struct sigaction *prog_current(int sig)
{
	unsigned int i = __atomic_load_n(&prog[sig].cur, __ATOMIC_ACQUIRE);

	return &prog[sig].act[i % RING];
}

/* When a caught load (kp_load_nofault_sized(), asm/uaccess.h) may
 * be used instead of a system call: a blocked synchronous fault signal
 * would kill the process rather than reach the library's handler.
 * (os/linux/memory.h, kp_load_nofault_usable().)
 *
 * Whether the library's fault handler owns SIGSEGV and SIGBUS: one flag,
 * one load for a handler. */
bool kp_nofault_loads_ok;
/* > 0 while this thread runs a program signal handler whose mask blocks
 * SIGSEGV or SIGBUS (a handler left by longjmp keeps it raised: the
 * thread then stays on the system-call path, never the unsafe one). */
__thread int kp_fault_masked_depth __attribute__((tls_model("initial-exec")));
/* This thread's own mask: KP_MASK_UNKNOWN until first asked (a new thread
 * inherits its creator's mask), then whether it blocks SIGSEGV or SIGBUS,
 * kept current by the interposed sigprocmask() and pthread_sigmask(). */
__thread int kp_thread_mask_state __attribute__((tls_model("initial-exec")));

static void update_nofault_loads(void)
{
	bool ok = __atomic_load_n(&prog[SIGSEGV].owned, __ATOMIC_ACQUIRE) &&
		  __atomic_load_n(&prog[SIGBUS].owned, __ATOMIC_ACQUIRE);

	__atomic_store_n(&kp_nofault_loads_ok, ok, __ATOMIC_RELEASE);
}

/* SIGTRAP must stay deliverable everywhere: never let a mask block it. */
static void strip_trap(sigset_t *set)
{
	set_del(set, SIGTRAP);
}

/* Bit tests, not sigismember(): handlers reach this (through
 * kp_thread_mask_refresh), and the library's handler analysis must see
 * every instruction they may run. */
static bool blocks_faults(const sigset_t *set)
{
	return set_has(set, SIGSEGV) || set_has(set, SIGBUS);
}

static long raw_sigmask(int how, const sigset_t *set, sigset_t *old);

/* Reads this thread's mask (one system call) into kp_thread_mask_state;
 * async-signal-safe.  Returns the state. */
int kp_thread_mask_refresh(void)
{
	sigset_t cur;
	int state = KP_MASK_UNKNOWN;

	if (!raw_sigmask(SIG_BLOCK, NULL, &cur))
		state = blocks_faults(&cur) ? KP_MASK_BLOCKS_FAULTS : KP_MASK_CLEAR;
	kp_thread_mask_state = state;
	return state;
}

static void prog_publish(int sig, const struct sigaction *act)
{
	unsigned int next = (prog[sig].cur + 1) % RING;

	prog[sig].act[next] = *act;
	strip_trap(&prog[sig].act[next].sa_mask);
	__atomic_store_n(&prog[sig].cur, next, __ATOMIC_RELEASE);
}

int kp_sig_own(int sig, kp_sig_handler_t fn, int extra_flags, bool block_others)
{
	static const int sync_sigs[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	struct sigaction sa, old;

	resolve_real();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | extra_flags;
	set_empty(&sa.sa_mask);
	if (block_others) {
		memset(&sa.sa_mask, 0xff, sizeof(sa.sa_mask));
		for (unsigned int i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
			set_del(&sa.sa_mask, sync_sigs[i]);
	}
	pthread_mutex_lock(&prog_lock);
	if (prog[sig].owned) {
		pthread_mutex_unlock(&prog_lock);
		return 0;
	}
	if (real_sigaction(sig, &sa, &old)) {
		pthread_mutex_unlock(&prog_lock);
		return -errno;
	}
	/* A handler the program installed through us is in the table already
	 * (the kernel's was our wrapper). */
	if (!prog[sig].wrapped)
		prog_publish(sig, &old);
	__atomic_store_n(&prog[sig].owned, true, __ATOMIC_RELEASE);
	update_nofault_loads();
	pthread_mutex_unlock(&prog_lock);
	return 0;
}

static long raw_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return kp_syscall6(SYS_rt_sigprocmask, how, (long)set, (long)old, _NSIG / 8, 0, 0);
}

/* The kernel's sigaction layout: no restorer is needed for SIG_DFL. */
static long raw_sigaction_dfl(int sig)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ksa = { SIG_DFL, 0, NULL, 0 };

	return kp_syscall6(SYS_rt_sigaction, sig, (long)&ksa, 0, 8, 0, 0);
}

/* Kernel-generated synchronous signals cannot be ignored or blocked: the
 * kernel would reset the action and kill the process. */
static bool is_forced(int sig, const siginfo_t *info)
{
	return info->si_code > 0 || (sig == SIGTRAP && info->si_code == SI_KERNEL);
}

/* Default action with uc's registers: queue the signal to this thread,
 * blocked until the handler returns, so it strikes with the program's
 * registers restored (a core dump or a debugger then sees them). */
static void deliver_default(int sig, siginfo_t *info, ucontext_t *uc)
{
	sigset_t block;

	raw_sigaction_dfl(sig);
	set_empty(&block);
	set_add(&block, sig);
	raw_sigmask(SIG_BLOCK, &block, NULL);
	set_del(&uc->uc_sigmask, sig);
	if (kp_syscall6(SYS_rt_tgsigqueueinfo, kp_getpid(), kp_gettid(), sig, (long)info, 0, 0))
		kp_syscall(SYS_tgkill, kp_getpid(), kp_gettid(), sig);
}

/* The mask the kernel would have given the program's handler: the
 * interrupted code's, plus the handler's own (not what our handler runs
 * with, which may block every asynchronous signal). */
static void program_mask(int sig, const struct sigaction *a, const ucontext_t *uc, sigset_t *m)
{
	const unsigned long *x = (const unsigned long *)&uc->uc_sigmask;
	const unsigned long *y = (const unsigned long *)&a->sa_mask;
	unsigned long *z = (unsigned long *)m;

	for (size_t i = 0; i < sizeof(*m) / sizeof(unsigned long); i++)
		z[i] = x[i] | y[i];
	if (!(a->sa_flags & SA_NODEFER))
		set_add(m, sig);
	strip_trap(m);
}

static void call_program_handler(int sig, const struct sigaction *a,
				 siginfo_t *info, ucontext_t *uc)
{
	sigset_t mask, old;
	unsigned int lib;

	program_mask(sig, a, uc, &mask);
	if (a->sa_flags & SA_RESETHAND) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		prog_publish(sig, &dfl);
	}
	bool masked = blocks_faults(&mask);

	/* Recorded before any census signal can get in (ours block it). */
	kp_sigframe_push(uc);
	kp_fault_masked_depth += masked;
	raw_sigmask(SIG_SETMASK, &mask, &old);
	lib = kp_lib_code_suspend();
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, info, uc);
	else
		a->sa_handler(sig);
	kp_lib_code_resume(lib);
	/* Our mask (census blocked) first: a census between forgetting the
	 * frame and the sigreturn would not see where the thread goes. */
	raw_sigmask(SIG_SETMASK, &old, NULL);
	kp_sigframe_pop();
	kp_fault_masked_depth -= masked;
}

/* Lets the census signal in again, unless the program itself blocks it
 * here (the interrupted code's mask or the handler's); true if it did. */
static bool census_unblock(int sig, const struct sigaction *a, const ucontext_t *uc)
{
	int cs = kp_census_signal();
	sigset_t m;

	if (!cs || sig == cs || set_has(&uc->uc_sigmask, cs) || set_has(&a->sa_mask, cs))
		return false;
	set_empty(&m);
	set_add(&m, cs);
	raw_sigmask(SIG_UNBLOCK, &m, NULL);
	return true;
}

/* Blocks the census signal again until the sigreturn, which puts the
 * interrupted code's mask back. */
static void census_block(void)
{
	sigset_t m;

	set_empty(&m);
	set_add(&m, kp_census_signal());
	raw_sigmask(SIG_BLOCK, &m, NULL);
}

/* What the kernel calls for every other signal the program handles: its
 * handler, with the place it interrupted recorded for the census (code is
 * never patched under a thread that will return there).  The kernel has
 * applied the program's mask and flags already. */
static void frame_wrapper(int sig, siginfo_t *info, void *ctx)
{
	struct sigaction a = *prog_current(sig);
	bool masked, unblocked;
	unsigned int lib;

	if (a.sa_flags & SA_RESETHAND) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		prog_publish(sig, &dfl);
		__atomic_store_n(&prog[sig].wrapped, false, __ATOMIC_RELEASE);
	}
	if (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN)
		return;		/* changed under a signal in flight */
	/* The census signal is blocked on entry (see wrap_sigaction): the
	 * frame is recorded before a census can ask where the thread is. */
	kp_sigframe_push(ctx);
	unblocked = census_unblock(sig, &a, ctx);
	/* The kernel delivered it with the handler's mask. */
	masked = blocks_faults(&a.sa_mask);
	kp_fault_masked_depth += masked;
	/* The program's code, even when it interrupted the library's. */
	lib = kp_lib_code_suspend();
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, info, ctx);
	else
		a.sa_handler(sig);
	kp_lib_code_resume(lib);
	kp_fault_masked_depth -= masked;
	/* Once the frame is forgotten the thread is on its way back to the
	 * place it records: a census must not ask it before it is there. */
	if (unblocked)
		census_block();
	kp_sigframe_pop();
}

static bool is_handler(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

/* sigaction() for a signal the library does not own: handlers go through
 * frame_wrapper, the program's own action is kept in the table. */
static int wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	struct sigaction k, old;
	struct kp_thread *t;
	bool was_wrapped;
	int ret = 0;

	if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return real_sigaction(sig, act, oact);
	/* The lock and the look at the current action are the library's
	 * calls; the change itself is the program's. */
	t = kp_lib_code_begin();
	pthread_mutex_lock(&prog_lock);
	was_wrapped = prog[sig].wrapped;
	if (was_wrapped)
		old = *prog_current(sig);
	else
		ret = real_sigaction(sig, NULL, &old);
	kp_lib_code_end(t);
	if (!ret && act) {
		k = *act;
		strip_trap(&k.sa_mask);
		if (is_handler(act)) {
			/* The table first: a signal already on its way finds
			 * the new handler. */
			prog_publish(sig, act);
			__atomic_store_n(&prog[sig].wrapped, true, __ATOMIC_RELEASE);
			k.sa_sigaction = frame_wrapper;
			k.sa_flags |= SA_SIGINFO;
			if (kp_census_signal())
				set_add(&k.sa_mask, kp_census_signal());
		}
		ret = real_sigaction(sig, &k, NULL);
		t = kp_lib_code_begin();
		if (ret) {
			/* Nothing changed: the table as it was. */
			if (was_wrapped)
				prog_publish(sig, &old);
			__atomic_store_n(&prog[sig].wrapped, was_wrapped, __ATOMIC_RELEASE);
		} else if (!is_handler(act)) {
			__atomic_store_n(&prog[sig].wrapped, false, __ATOMIC_RELEASE);
		}
		kp_lib_code_end(t);
	}
	t = kp_lib_code_begin();
	pthread_mutex_unlock(&prog_lock);
	kp_lib_code_end(t);
	if (!ret && oact)
		*oact = old;
	return ret;
}

/* Uses raw system calls only, so the program's errno is left alone. */
void kp_sig_forward(int sig, siginfo_t *info, void *ctx)
{
	const struct sigaction *a = prog_current(sig);
	struct sigaction copy = *a;
	ucontext_t *uc = ctx;

	if (copy.sa_handler == SIG_IGN) {
		if (!is_forced(sig, info))
			return;
		copy.sa_handler = SIG_DFL;
	}
	if (copy.sa_handler == SIG_DFL) {
		if (sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH)
			return;
		deliver_default(sig, info, uc);
		return;
	}
	call_program_handler(sig, &copy, info, uc);
}

/* ---- interposed functions ---- */

KP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	struct kp_thread *t;

	resolve_real();
	if (!kp_sig_is_owned(sig))
		return wrap_sigaction(sig, act, oact);
	if (act && (act->sa_flags & SA_SIGINFO ? 0 : act->sa_handler == SIG_ERR)) {
		errno = EINVAL;
		return -1;
	}
	t = kp_lib_code_begin();
	pthread_mutex_lock(&prog_lock);
	if (oact)
		*oact = *prog_current(sig);
	if (act)
		prog_publish(sig, act);
	pthread_mutex_unlock(&prog_lock);
	kp_lib_code_end(t);
	return 0;
}

static sighandler_t install_simple(int sig, sighandler_t h, int flags, bool mask_self)
{
	struct sigaction sa, old;

	if (sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sa.sa_flags = flags;
	set_empty(&sa.sa_mask);
	if (mask_self)
		set_add(&sa.sa_mask, sig);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

KP_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return install_simple(sig, h, SA_RESTART, true);
}

/* glibc's <signal.h> declares bsd_signal() only for older X/Open levels. */
sighandler_t bsd_signal(int sig, sighandler_t h);

KP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return install_simple(sig, h, SA_RESTART, true);
}

KP_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return install_simple(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

static int filtered_mask(sigmask_fn fn, int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;

	int ret;

	if (set && how != SIG_UNBLOCK) {
		copy = *set;
		strip_trap(&copy);
		set = &copy;
	}
	/* Unknown during the change: a handler meanwhile asks again. */
	kp_thread_mask_state = KP_MASK_UNKNOWN;
	ret = fn(how, set, old);
	if (set)
		kp_thread_mask_refresh();
	return ret;
}

KP_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	resolve_real();
	return filtered_mask(real_sigprocmask, how, set, old);
}

KP_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	resolve_real();
	return filtered_mask(real_pthread_sigmask, how, set, old);
}

KP_EXPORT int pthread_attr_setsigmask_np(pthread_attr_t *attr, const sigset_t *set)
{
	sigset_t copy;

	resolve_real();
	if (!real_attr_setsigmask)
		return ENOSYS;
	if (set) {
		copy = *set;
		strip_trap(&copy);
		set = &copy;
	}
	return real_attr_setsigmask(attr, set);
}
