/* The library's own calls on the program's threads are not the program's:
 * the loader walks of its dlclose() interposer, the locks of its fork
 * handlers and sigaction() interposer.  A probe on the libc or loader
 * function they call counts exactly the program's own calls; the
 * library's hits run no handler and count in nmissed, as a hit inside a
 * handler does.  Breakpoint and jump-optimized probes alike, and return
 * probes whose function was entered before the library's code ran. */
#include "testutil.h"

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

static int count_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&returns, 1, __ATOMIC_RELAXED);
	return 0;
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

/* The program's callback closes objects inside its own dl_iterate_phdr():
 * that call was entered before the library's code ran, and its return
 * fires when it returns. */
static int closing_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	load_and_close(1);
	return 1;
}

Test(libcalls, return_probe_entered_before)
{
	struct kretprobe rp = { .kp.symbol_name = "dl_iterate_phdr", .handler = count_return,
				.entry_handler = NULL, .maxactive = 8 };

	unsigned long missed;

	cr_assert_eq(register_kretprobe(&rp), 0);
	/* From here on (registration walks the loader's list itself). */
	returns = 0;
	missed = rp.kp.nmissed;
	for (int i = 0; i < WALKS; i++)
		KEEP(dl_iterate_phdr(closing_cb, NULL));
	load_and_close(LOADS);
	cr_expect_eq(returns, WALKS, "%lu returns for the program's %d calls", returns, WALKS);
	cr_expect_geq(rp.kp.nmissed - missed, LOADS + WALKS, "kp.nmissed %lu", rp.kp.nmissed);
	unregister_kretprobe(&rp);
}

/* The same with an entry handler (the generic return-probe path). */
static int rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&entries, 1, __ATOMIC_RELAXED);
	return 0;
}

Test(libcalls, return_probe_with_entry)
{
	struct kretprobe rp = { .kp.symbol_name = "dl_iterate_phdr", .handler = count_return,
				.entry_handler = rp_entry, .maxactive = 8 };

	cr_assert_eq(register_kretprobe(&rp), 0);
	entries = returns = 0;
	for (int i = 0; i < WALKS; i++)
		KEEP(dl_iterate_phdr(closing_cb, NULL));
	cr_expect_eq(entries, WALKS, "%lu entries for the program's %d calls", entries, WALKS);
	cr_expect_eq(returns, WALKS, "%lu returns for the program's %d calls", returns, WALKS);
	unregister_kretprobe(&rp);
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
