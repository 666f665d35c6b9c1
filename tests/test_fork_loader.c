/* fork() while another thread of libkprobes walks the dynamic loader's
 * object list (registering a return probe decodes its handler, which looks
 * symbols up).  glibc leaves the loader's lock held in such a child, so the
 * child's own registration would wait for ever unless libkprobes keeps its
 * threads out of the loader across fork(); its own locks likewise.
 *
 * A binary of its own: run next to another forking test, this one makes
 * Criterion's runner (not a test process) leak under AddressSanitizer. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* Where a fork child is, in a page it shares with the parent: a child that
 * hangs says in which step, and the parent records where each of its
 * threads waits (system call and user instruction pointer, from /proc)
 * before the child's alarm ends it. */
enum child_step { STEP_FORKED, STEP_REGISTER, STEP_UNREGISTER, STEP_CALL, STEP_DONE };

static const char *const step_names[] = { "after fork()", "in register_kprobe()",
					  "in unregister_kprobe()", "calling the function",
					  "exiting" };

/* The child has the parent's mappings: an address in a /proc syscall line
 * (the call's first argument, a futex word say, and the instruction
 * pointer that ends the line) names the same object and offset here. */
static void describe(char *out, size_t size, const char *text)
{
	void *addr = (void *)strtoul(text, NULL, 16);
	Dl_info info;

	out[0] = 0;
	if (addr && dladdr(addr, &info) && info.dli_fname)
		snprintf(out, size, " %s+%#lx", info.dli_fname,
			 (unsigned long)((char *)addr - (char *)info.dli_fbase));
}

static void describe_syscall_line(char *out, size_t size, const char *line)
{
	const char *arg = strchr(line, ' '), *ip = strrchr(line, ' ');
	char a[160], i[160];

	describe(a, sizeof(a), arg ? arg + 1 : "");
	describe(i, sizeof(i), ip ? ip + 1 : "");
	snprintf(out, size, "%s%s%s%s", a[0] ? " arg1:" : "", a, i[0] ? " ip:" : "", i);
}

static void note_child_threads(pid_t pid, char *out, size_t size)
{
	char path[64];
	struct dirent *de;
	size_t used = 0;
	DIR *d;

	out[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && used + 1 < size) {
		char buf[160] = "", where[400];
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/syscall", pid, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		describe_syscall_line(where, sizeof(where), buf);
		used += (size_t)snprintf(out + used, size - used, " [%s: %s%s]", de->d_name, buf,
					 where);
	}
	closedir(d);
}

/* Waits for the child; one still there after hang_s is reported. */
static int wait_child(pid_t pid, double hang_s, volatile int *step, char *note, size_t size)
{
	double t0 = now_s();
	int status;
	pid_t r;

	note[0] = 0;
	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (!note[0] && now_s() - t0 > hang_s) {
			int at = *step;

			snprintf(note, size, "%s, threads:", step_names[at]);
			note_child_threads(pid, note + strlen(note), size - strlen(note));
		}
		usleep(1000);
	}
	cr_assert_eq(r, pid);
	if (!note[0])
		snprintf(note, size, "%s", step_names[*step]);
	return status;
}

Test(fork_loader, children_register_while_another_thread_registers)
{
	volatile int *step = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				  -1, 0);
	char note[1024];
	pthread_t t;
	int hung = 0, failed = 0, forks = 0;
	double start = now_s(), slowest = 0;

	cr_assert_neq(step, MAP_FAILED);
	/* At least 3 s and 12 forks: a loaded machine (ASan, parallel
	 * builds) may fork slowly, and a handful of forks proves little. */
	cr_assert_eq(pthread_create(&t, NULL, register_return_probes, NULL), 0);
	while ((now_s() < start + 3.0 || forks < 12) && now_s() < start + 20.0 * KP_TEST_SLOWDOWN) {
		double t0 = now_s();
		pid_t pid;
		int status;

		*step = STEP_FORKED;
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			struct kprobe kp = { .symbol_name = "fl_fn" };

			alarm(5 * KP_TEST_SLOWDOWN);	/* a hung child ends here */
			*step = STEP_REGISTER;
			if (register_kprobe(&kp))
				_exit(1);
			*step = STEP_UNREGISTER;
			unregister_kprobe(&kp);
			*step = STEP_CALL;
			if (call_fn(3) != 24)
				_exit(2);
			*step = STEP_DONE;
			_exit(0);
		}
		forks++;
		status = wait_child(pid, 4.5 * KP_TEST_SLOWDOWN, step, note, sizeof(note));
		if (now_s() - t0 > slowest)
			slowest = now_s() - t0;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			cr_log_error("fork child %d of %d hung %s", forks, pid, note);
			hung++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status))
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
