/*
 * The optimizer: decides which probepoints take a jump instead of the
 * breakpoint, and installs or removes the jumps, like the Kprobes
 * optimizer.  Candidates queue up; a background thread waits a moment so
 * that registrations batch, builds their detours, makes sure no thread is
 * inside a region being replaced (or in its slot, which jumps back into
 * it), then installs all the jumps with two core synchronizations.
 * Unoptimization is immediate and synchronous.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "os/linux/memory.h"
#include "os/linux/sys.h"
#include "elf/sections.h"
#include "elf/symbols.h"
#include "os/linux/threads.h"

#define OPT_DELAY_NS 5000000L	/* batch registrations for this long */
#define RETRY_NS 10000000L	/* a thread sat in a region: try again */

static struct kp_probepoint *queue;
static pthread_cond_t kick = PTHREAD_COND_INITIALIZER;
static pid_t thread_pid;
/* The thread answers the census (has unblocked its signal). */
static bool thread_ready;
pid_t kp_optimizer_tid;

int kp_function_bounds(uintptr_t addr, uintptr_t *start, size_t *size)
{
	struct ksym s;

	if (ksym_lookup_addr(addr, &s))
		return -ENOENT;
	*start = s.addr;
	*size = s.size;
	return 0;
}

/* Another armed probe inside pp's region, or pp inside another's jump. */
static bool region_conflict(const struct kp_probepoint *pp)
{
	uint8_t len = arch_opt_region_len(pp);

	for (uintptr_t k = 1; k < len; k++) {
		const struct kp_probepoint *o = kp_probepoint_lookup(pp->addr + k);

		if (o && o->armed)
			return true;
	}
	for (uintptr_t k = 1; k < ARCH_OPT_JUMP_LEN; k++) {
		const struct kp_probepoint *o = kp_probepoint_lookup(pp->addr - k);

		if (o && o->opt_state != OPT_NONE && arch_opt_region_len(o) > k)
			return true;
	}
	return false;
}

static bool want_optimized(struct kp_probepoint *pp)
{
	if (!kp_knob_optimize || !kp_knob_enabled || !pp->armed || pp->gone || !pp->probes)
		return false;
	/* Disabled members of an aggregate do not run: they do not count. */
	if (pp->nunoptimizable)
		return false;
	if (arch_opt_analyse_pp(pp))
		return false;
	return !region_conflict(pp);
}

static void set_flags(struct kp_probepoint *pp, bool optimized)
{
	for (struct kprobe *p = pp->probes; p; p = p->__next) {
		if (optimized)
			__atomic_or_fetch(&p->flags, KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
		else
			__atomic_and_fetch(&p->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
	}
}

static void queue_remove(struct kp_probepoint *pp)
{
	for (struct kp_probepoint **l = &queue; *l; l = &(*l)->opt_next)
		if (*l == pp) {
			*l = pp->opt_next;
			break;
		}
	pp->opt_next = NULL;
}

static void *optimizer_main(void *arg);

static void kick_optimizer(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;

	if (thread_pid == kp_getpid()) {
		pthread_cond_signal(&kick);
		return;
	}
	/* The optimizer thread takes no signal of the program's; SIGTRAP
	 * and the fault signals stay deliverable (its libc calls may hit
	 * probes), with or without the sigprocmask interposers. */
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	__atomic_store_n(&thread_ready, false, __ATOMIC_RELEASE);
	if (pthread_create(&t, &attr, optimizer_main, NULL) == 0) {
		thread_pid = kp_getpid();
		pthread_setname_np(t, "kprobes-opt");
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Back to a plain breakpoint, for a batch of probepoints.  Cannot fail:
 * without memory for the batch, one probepoint at a time (a core
 * synchronization each), never a state that says "breakpoint" over a jump
 * still installed. */
static void unoptimize_batch(struct kp_probepoint **pps, int n)
{
	struct kp_probepoint *one[1];
	struct kp_probepoint **jumped = n == 1 ? one : calloc((size_t)n + 1, sizeof(*jumped));
	int nj = 0;

	if (!jumped) {
		for (int i = 0; i < n; i++)
			unoptimize_batch(&pps[i], 1);
		return;
	}
	for (int i = 0; i < n; i++) {
		/* Prepared ones whose census failed wait in the queue too. */
		if (pps[i]->opt_state == OPT_QUEUED || pps[i]->opt_state == OPT_PREPARED)
			queue_remove(pps[i]);
		if (pps[i]->opt_state == OPT_OPTIMIZED)
			jumped[nj++] = pps[i];
	}
	if (nj)
		arch_unoptimize(jumped, nj);
	for (int i = 0; i < n; i++) {
		bool was_optimized = pps[i]->opt_state == OPT_OPTIMIZED;

		__atomic_store_n(&pps[i]->opt_state, OPT_NONE, __ATOMIC_RELEASE);
		/* Only an installed jump set the flags: a queued aggregate
		 * of many probes costs nothing to take back. */
		if (was_optimized)
			set_flags(pps[i], false);
	}
	if (jumped != one)
		free(jumped);
}

void kp_optimizer_unoptimize(struct kp_probepoint *pp)
{
	if (pp->opt_state != OPT_NONE)
		unoptimize_batch(&pp, 1);
}

void kp_optimizer_forget_batch(struct kp_probepoint **pps, int n)
{
	unoptimize_batch(pps, n);
}

/* The code of pp was unmapped: drop it from the optimizer's view without
 * touching that memory. */
void kp_optimizer_forget_gone(struct kp_probepoint *pp)
{
	if (pp->opt_state == OPT_QUEUED || pp->opt_state == OPT_PREPARED)
		queue_remove(pp);
	arch_opt_forget_gone(&pp->ainsn);
	__atomic_store_n(&pp->opt_state, OPT_NONE, __ATOMIC_RELEASE);
}


/* A new probe at addr must not land inside an installed jump. */
void kp_optimizer_region_conflicts(uintptr_t addr)
{
	for (uintptr_t k = 1; k < ARCH_OPT_JUMP_LEN; k++) {
		struct kp_probepoint *o = kp_probepoint_lookup(addr - k);

		if (o && o->opt_state != OPT_NONE && arch_opt_region_len(o) > k)
			kp_optimizer_unoptimize(o);
	}
}

/* Probepoints whose region could reach addr: a change at addr (a probe
 * leaving, disarmed) may let them be optimized now. */
void kp_optimizer_reevaluate_near(uintptr_t addr)
{
	for (uintptr_t k = 1; k < ARCH_MAX_OPTIMIZED_LENGTH; k++) {
		struct kp_probepoint *o = kp_probepoint_lookup(addr - k);

		if (o && o->opt_state == OPT_NONE)
			kp_optimizer_reevaluate(o);
	}
}

/* The jump analysis of probepoints about to be armed, done while nothing
 * of theirs is armed yet: it is kept with the probepoint, and the
 * reevaluation after arming finds it done.  Done after arming, the
 * analysis's own calls into code being probed (the allocator, the
 * loader's object walk, locks: with every function of libc probed, all
 * of them) would each take the breakpoint of one armed before. */
void kp_optimizer_analyse_ahead(struct kp_probepoint **pps, int n)
{
	if (!kp_knob_optimize)
		return;
	for (int i = 0; i < n; i++)
		if (!pps[i]->gone && !pps[i]->nunoptimizable)
			arch_opt_analyse_pp(pps[i]);
}

void kp_optimizer_reevaluate(struct kp_probepoint *pp)
{
	bool want = want_optimized(pp);

	if (!want) {
		kp_optimizer_unoptimize(pp);
		return;
	}
	if (pp->opt_state == OPT_NONE) {
		bool idle = !queue;

		pp->opt_state = OPT_QUEUED;
		pp->opt_next = queue;
		queue = pp;
		/* The thread waits only on an empty queue (under the lock
		 * held here): one kick per batch of probepoints, not one
		 * each (the kick calls into libc, which may be probed), and
		 * one whenever the thread is not there to take them. */
		if (idle || thread_pid != kp_getpid())
			kick_optimizer();
	}
}

/* Detours for the batch; trapping threads go through them from now on. */
static int prepare_batch(struct kp_probepoint **pps, int n)
{
	int m = 0;

	for (int i = 0; i < n; i++) {
		struct kp_probepoint *pp = pps[i];

		pp->opt_next = NULL;
		if (!want_optimized(pp)) {
			__atomic_store_n(&pp->opt_state, OPT_NONE, __ATOMIC_RELEASE);
			continue;
		}
		if (arch_detour_build(pp)) {
			pp->opt_state = OPT_NONE;
			continue;
		}
		if (pp->opt_state != OPT_PREPARED)
			__atomic_store_n(&pp->opt_state, OPT_PREPARED, __ATOMIC_RELEASE);
		pps[m++] = pp;
	}
	return m;
}

/* Installs the jumps of the pps no thread is in; returns how many could
 * not be done yet.  Halves the batch to find the ones a thread sits in.
 * An empty batch is done: a census for it could still fail (a thread in
 * a trap handler cannot answer) and would be halved forever. */
static int install_batch(struct kp_probepoint **pps, int n)
{
	uintptr_t (*ranges)[2];
	int nr = 0, left;

	if (n <= 0)
		return 0;
	ranges = calloc((size_t)n * ARCH_OPT_CENSUS_MAX + 1, sizeof(*ranges));
	if (!ranges)
		return n;
	for (int i = 0; i < n; i++)
		nr += arch_opt_census_ranges(pps[i], ranges + nr);
	if (kp_threads_outside((const uintptr_t (*)[2])ranges, nr)) {
		free(ranges);
		if (arch_optimize(pps, n))
			return n;
		for (int i = 0; i < n; i++) {
			__atomic_store_n(&pps[i]->opt_state, OPT_OPTIMIZED, __ATOMIC_RELEASE);
			set_flags(pps[i], true);
		}
		return 0;
	}
	free(ranges);
	if (n == 1)
		return 1;
	left = install_batch(pps, n / 2);
	return left + install_batch(pps + n / 2, n - n / 2);
}

static unsigned long long objects_gen;

/* Takes the probepoints of unloaded objects out of a batch. */
static int drop_gone(struct kp_probepoint **pps, int n)
{
	int m = 0;

	for (int i = 0; i < n; i++)
		if (!pps[i]->gone)
			pps[m++] = pps[i];
	return m;
}

/* One optimizer pass over the queue; returns how many wait for a retry. */
static int optimizer_pass(void)
{
	struct kp_probepoint **pps;
	int n = 0, left;

	for (struct kp_probepoint *pp = queue; pp; pp = pp->opt_next)
		n++;
	if (!n)
		return 0;
	pps = calloc((size_t)n, sizeof(*pps));
	if (!pps)
		return n;
	n = 0;
	for (struct kp_probepoint *pp = queue; pp; pp = pp->opt_next)
		pps[n++] = pp;
	queue = NULL;
	kp_mem_batch_begin();
	n = prepare_batch(pps, n);
	/* Threads that saw "not optimized" in the trap handler are past it. */
	kp_synchronize();
	/* An object unloaded since (dlclose() not yet returned to its
	 * interposer) must not have jumps written over whatever is mapped
	 * there now. */
	if (ksec_generation() != objects_gen) {
		objects_gen = ksec_generation();
		kp_objects_unloaded_locked();
		n = drop_gone(pps, n);
	}
	left = install_batch(pps, n);
	/* Keep the ones still waiting queued. */
	for (int i = 0; i < n; i++)
		if (pps[i]->opt_state == OPT_PREPARED) {
			pps[i]->opt_next = queue;
			queue = pps[i];
		}
	kp_mem_batch_end();
	free(pps);
	return left;
}

int kp_optimizer_flush(void)
{
	return optimizer_pass();
}

void kp_optimizer_wait_ready(void)
{
	struct timespec ts = { 0, 100000 };

	for (int i = 0; i < 2000; i++) {
		if (__atomic_load_n(&thread_pid, __ATOMIC_ACQUIRE) != getpid() ||
		    __atomic_load_n(&thread_ready, __ATOMIC_ACQUIRE))
			return;
		nanosleep(&ts, NULL);
	}
}

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	nanosleep(&ts, NULL);
}

static void *optimizer_main(void *arg)
{
	sigset_t census;
	pid_t me;

	/* Before any call a probe could be on: whoever looks for it by id
	 * (without a system call) finds it from its very first hit. */
	__atomic_store_n(&kp_optimizer_tid, kp_gettid(), __ATOMIC_RELEASE);
	/* Probes hit by this thread's own libc calls run no handlers: from
	 * its first call on (getpid() included), or a probe on getpid() or
	 * sigemptyset() would count this thread's call as the program's. */
	if (kp_thread_current())
		kp_thread_current()->in_handler = 1;
	me = getpid();
	/* Every signal of the program stays blocked here, but the census
	 * must get an answer from this thread too. */
	sigemptyset(&census);
	sigaddset(&census, kp_census_signal());
	pthread_sigmask(SIG_UNBLOCK, &census, NULL);
	__atomic_store_n(&thread_ready, true, __ATOMIC_RELEASE);

	pthread_mutex_lock(&kp_registry_lock);
	while (thread_pid == me) {
		while (!queue && thread_pid == me)
			pthread_cond_wait(&kick, &kp_registry_lock);
		pthread_mutex_unlock(&kp_registry_lock);
		sleep_ns(OPT_DELAY_NS);
		pthread_mutex_lock(&kp_registry_lock);
		if (optimizer_pass()) {
			pthread_mutex_unlock(&kp_registry_lock);
			sleep_ns(RETRY_NS);
			pthread_mutex_lock(&kp_registry_lock);
		}
	}
	pthread_mutex_unlock(&kp_registry_lock);
	return NULL;
}

void kp_optimizer_stop(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	if (thread_pid == getpid()) {
		thread_pid = 0;		/* its loop ends at the next check */
		pthread_cond_signal(&kick);
	}
	pthread_mutex_unlock(&kp_registry_lock);
}

/* In a fork child: the optimizer thread is the parent's (the next request
 * starts one); its condition variable may have been in use there. */
void kp_optimizer_after_fork_child(void)
{
	pthread_cond_init(&kick, NULL);
}
