/* fork() while another thread of libkprobes walks the dynamic loader's
 * object list (registering a return probe decodes its handler, which looks
 * symbols up).  glibc leaves the loader's lock held in such a child, so the
 * child's own registration would wait for ever unless libkprobes keeps its
 * threads out of the loader across fork(); its own locks likewise.
 *
 * A binary of its own: run next to another forking test, this one makes
 * Criterion's runner (not a test process) leak under AddressSanitizer. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(fork_loader, .timeout = 30 * KP_TEST_SLOWDOWN);

long fl_fn(long x);
TEST_FN long fl_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + 3;
}

long fl_ret(long x);
TEST_FN long fl_ret(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 11;
}

static long (*volatile call_fn)(long) = fl_fn;
static volatile int churn_stop;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int empty_ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return 0;
}

static void *register_return_probes(void *arg)
{
	while (!churn_stop) {
		struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)fl_ret,
					.handler = empty_ret_handler };

		if (register_kretprobe(&rp) == 0)
			unregister_kretprobe(&rp);
	}
	return NULL;
}

Test(fork_loader, children_register_while_another_thread_registers)
{
	pthread_t t;
	int hung = 0, failed = 0, forks = 0;
	double start = now_s(), slowest = 0;

	/* At least 3 s and 12 forks: a loaded machine (ASan, parallel
	 * builds) may fork slowly, and a handful of forks proves little. */
	cr_assert_eq(pthread_create(&t, NULL, register_return_probes, NULL), 0);
	while ((now_s() < start + 3.0 || forks < 12) && now_s() < start + 20.0 * KP_TEST_SLOWDOWN) {
		double t0 = now_s();
		pid_t pid = fork();
		int status;

		cr_assert_geq(pid, 0);
		if (pid == 0) {
			struct kprobe kp = { .symbol_name = "fl_fn" };

			alarm(5 * KP_TEST_SLOWDOWN);	/* a hung child ends here */
			if (register_kprobe(&kp))
				_exit(1);
			unregister_kprobe(&kp);
			_exit(call_fn(3) == 24 ? 0 : 2);
		}
		forks++;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (now_s() - t0 > slowest)
			slowest = now_s() - t0;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
			hung++;
		else if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	churn_stop = 1;
	pthread_join(t, NULL);
	cr_log_info("%d fork children in %.1f s, the slowest %.2f s", forks, now_s() - start,
		    slowest);
	cr_expect_eq(hung, 0, "%d of %d fork children hung", hung, forks);
	cr_expect_eq(failed, 0, "%d of %d fork children failed", failed, forks);
	cr_expect_geq(forks, 12);
}
