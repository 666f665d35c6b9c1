/* The library's own calls on the program's threads are not the program's:
 * the loader walks of its dlclose() interposer, the locks of its fork
 * handlers and sigaction() interposer.  A probe on the libc or loader
 * function they call counts exactly the program's own calls; the
 * library's hits run no handler and count in nmissed, as a hit inside a
 * handler does.  Breakpoint and jump-optimized probes alike, and return
 * probes whose function was entered before the library's code ran. */
#include "testutil.h"

#include <kprobes/symbols.h>

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADS 5		/* dlopen()/dlclose() pairs */
#define WALKS 3		/* the program's own dl_iterate_phdr() calls */

static unsigned long entries, returns;

static int count_entry(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&entries, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Its presence keeps a probe a breakpoint (never jump-optimized). */
static void keep_breakpoint(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	(void)p;
	(void)regs;
	(void)flags;
}

/* build/tests/libkpgone.so (tests/dl/), next to this binary's directory. */
static const char *test_lib(void)
{
	static char path[PATH_MAX];
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = 0;
	snprintf(path, sizeof(path), "%s/../tests/libkpgone.so", dirname(exe));
	cr_assert_eq(access(path, R_OK), 0, "%s missing (make it)", path);
	return path;
}

static void load_and_close(int n)
{
	const char *lib = test_lib();

	for (int i = 0; i < n; i++) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

		cr_assert_not_null(h, "%s", dlerror());
		cr_assert_eq(dlclose(h), 0);
		cr_assert_null(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), "%s stays loaded", lib);
	}
}

static int walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	return 1;	/* the first object is enough */
}

static void walk(int n)
{
	for (int i = 0; i < n; i++)
		KEEP(dl_iterate_phdr(walk_cb, NULL));
}

static void *thread_main(void *arg)
{
	return arg;
}

/* The program's dlclose()s, forks and threads, then its own walks: only
 * the walks count. */
static void dlclose_then_walks(struct kprobe *kp)
{
	pthread_t th;
	pid_t pid;
	int status;

	load_and_close(LOADS);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(pthread_create(&th, NULL, thread_main, NULL), 0);
	cr_assert_eq(pthread_join(th, NULL), 0);
	walk(WALKS);
	cr_expect_eq(entries, WALKS, "%lu hits for the program's %d calls", entries, WALKS);
	/* The interposer's own walks: each one a miss. */
	cr_expect_geq(kp->nmissed, LOADS, "nmissed %lu after %d dlclose()s", kp->nmissed, LOADS);
}

Test(libcalls, dlclose_breakpoint)
{
	struct kprobe kp = { .symbol_name = "dl_iterate_phdr", .pre_handler = count_entry,
			     .post_handler = keep_breakpoint };

	cr_assert_eq(register_kprobe(&kp), 0);
	kprobes_optimize_now();
	cr_assert_eq(kp.flags & KPROBE_FLAG_OPTIMIZED, 0);
	entries = 0;
	dlclose_then_walks(&kp);
	unregister_kprobe(&kp);
}

Test(libcalls, dlclose_optimized)
{
	struct kprobe kp = { .symbol_name = "dl_iterate_phdr", .pre_handler = count_entry };

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(kp.flags & KPROBE_FLAG_OPTIMIZED, "dl_iterate_phdr not jump-optimized");
	entries = 0;
	dlclose_then_walks(&kp);
	unregister_kprobe(&kp);
}

static struct kretprobe *walk_rp;
static unsigned long outer_returns;

static int count_return_of(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	if (ri->rp == walk_rp)
		__atomic_fetch_add(&returns, 1, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&outer_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Entered before the dlclose() interposer's mark goes up, returns after
 * it is down.  (Not from a dl_iterate_phdr() callback: the loader's lock
 * held there, a dlclose() would wait for the library's registry lock,
 * which a registration or the optimizer may hold while it waits for the
 * loader's.) */
static TEST_FN void close_in_frame(void)
{
	load_and_close(1);
	__asm__ volatile("");
}

static void walks_around_closes(struct kretprobe *walks, struct kretprobe *outer)
{
	unsigned long missed;

	walk_rp = walks;
	cr_assert_eq(register_kretprobe(walks), 0);
	cr_assert_eq(register_kretprobe(outer), 0);
	kprobes_optimize_now();
	entries = returns = outer_returns = 0;
	missed = walks->kp.nmissed;
	for (int i = 0; i < WALKS; i++) {
		close_in_frame();
		walk(1);
	}
	load_and_close(LOADS);
	cr_expect_eq(returns, WALKS, "%lu returns for the program's %d calls", returns, WALKS);
	cr_expect_eq(outer_returns, WALKS, "%lu returns of the closing frame, %d calls",
		     outer_returns, WALKS);
	cr_expect_geq(walks->kp.nmissed - missed, LOADS + WALKS, "kp.nmissed %lu",
		      walks->kp.nmissed);
	unregister_kretprobe(outer);
	unregister_kretprobe(walks);
}

/* Return probes without entry handlers (the fast paths when optimized). */
Test(libcalls, return_probe_entered_before)
{
	struct kretprobe walks = { .kp.symbol_name = "dl_iterate_phdr",
				   .handler = count_return_of, .maxactive = 8 };
	struct kretprobe outer = { .kp.addr = (kprobe_opcode_t *)close_in_frame,
				   .handler = count_return_of, .maxactive = 8 };

	walks_around_closes(&walks, &outer);
}

/* The same with entry handlers (the generic return-probe path). */
static int rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	if (ri->rp == walk_rp)
		__atomic_fetch_add(&entries, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(libcalls, return_probe_with_entry)
{
	struct kretprobe walks = { .kp.symbol_name = "dl_iterate_phdr", .handler = count_return_of,
				   .entry_handler = rp_entry, .maxactive = 8 };
	struct kretprobe outer = { .kp.addr = (kprobe_opcode_t *)close_in_frame,
				   .handler = count_return_of, .entry_handler = rp_entry,
				   .maxactive = 8 };

	walks_around_closes(&walks, &outer);
	cr_expect_eq(entries, WALKS, "%lu entries for the program's %d calls", entries, WALKS);
}

static void handler(int sig)
{
	(void)sig;
}

/* pthread_mutex_lock() is what the fork handlers and the sigaction()
 * interposer call; glibc's fork() and sigaction() take their locks without
 * it (its pthread_create() does call it).  The program's own calls only. */
static void mutex_calls_counted(struct kprobe *kp, bool optimized)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct sigaction sa = { .sa_handler = handler };
	pid_t pid;
	int status;

	cr_assert_eq(register_kprobe(kp), 0);
	kprobes_optimize_now();
	cr_assert_eq(!!(kp->flags & KPROBE_FLAG_OPTIMIZED), optimized);
	/* From here on only the program's calls. */
	entries = 0;
	for (int i = 0; i < 2; i++) {
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0)
			_exit(0);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
	}
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	cr_assert_eq(sigaction(SIGUSR1, NULL, &sa), 0);
	cr_assert_eq(sigaction(SIGSEGV, NULL, &sa), 0);
	pthread_mutex_lock(&m);
	pthread_mutex_unlock(&m);
	cr_expect_eq(entries, 1, "%lu hits for the program's one call", entries);
	cr_expect_gt(kp->nmissed, 0);
	unregister_kprobe(kp);
}

Test(libcalls, fork_thread_sigaction_breakpoint)
{
	struct kprobe kp = { .symbol_name = "pthread_mutex_lock", .pre_handler = count_entry,
			     .post_handler = keep_breakpoint };

	mutex_calls_counted(&kp, false);
}

Test(libcalls, fork_thread_sigaction_optimized)
{
	struct kprobe kp = { .symbol_name = "pthread_mutex_lock", .pre_handler = count_entry };

	mutex_calls_counted(&kp, true);
}

/* kprobes_objects_foreach(): the walk is the library's, the caller's
 * function is the caller's, and its calls count. */
static TEST_FN int callers_own(int x)
{
	__asm__ volatile("");
	return x + 1;
}

static int foreach_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	KEEP(callers_own(*(int *)arg));
	++*(int *)arg;
	return 0;
}

Test(libcalls, objects_foreach_callback_is_the_callers)
{
	struct kprobe walks = { .symbol_name = "dl_iterate_phdr", .pre_handler = count_entry,
				.post_handler = keep_breakpoint };
	struct kprobe own = { .addr = (kprobe_opcode_t *)callers_own,
			      .pre_handler = count_entry, .post_handler = keep_breakpoint };
	int calls = 0;

	cr_assert_eq(register_kprobe(&walks), 0);
	cr_assert_eq(register_kprobe(&own), 0);
	entries = 0;
	cr_assert_eq(kprobes_objects_foreach(foreach_cb, &calls), 0);
	cr_assert_gt(calls, 0);
	/* the callback's calls, not the library's walk */
	cr_expect_eq(entries, (unsigned long)calls, "%lu hits for %d calls", entries, calls);
	cr_expect_eq(own.nmissed, 0);
	unregister_kprobe(&own);
	unregister_kprobe(&walks);
}
