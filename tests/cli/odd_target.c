/* Odd processes for attach mode (tests/test_cli.c attaches kprobe to them):
 * each prints what it saw, so that any harm shows in its output or status.
 *
 *   strict N        seccomp strict mode, then N ticks of busy work
 *   filter N        a seccomp filter that kills socket(), then N ticks
 *   mainexit N      the main thread exits; another prints N ticks
 *   waiters MS      epoll_wait and sigtimedwait block for MS ms each, while
 *                   the main thread calls odd_work(); both must time out
 *   slowload LIB    a thread loads LIB, whose constructor holds the loader
 *                   lock for a while, as the main thread works
 *   trapper         on SIGUSR1 installs a SIGTRAP handler of its own and
 *                   starts a thread that blocks every signal; both threads
 *                   call odd_work() and check its results
 *   vectors N       N rounds of a loop holding values in caller-saved
 *                   registers (r8-r11, xmm0, xmm1, xmm15) across a long
 *                   spin: a thread sent through the loading stub there
 *                   must come back with all of them
 *   closeall DIR    on SIGUSR1 closes every descriptor above 2, opens 16
 *                   files of its own in DIR, works until SIGUSR2 (a minute
 *                   at most: a slow machine's sessions take their time)
 *                   and checks that they hold only what it wrote */
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) long odd_work(long i)
{
	sink += i;
	return i * 3 + 1;
}

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		sink++;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Strict mode allows read, write, _exit and sigreturn only: no clock, no
 * sleep, no exit_group. */
static int run_strict(long n)
{
	say("started\n");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
		return 3;
	for (long t = 0; t < n; t++) {
		for (long i = 0; i < 20 * 1000 * 1000; i++)
			odd_work(i);
		say("tick\n");
	}
	say("strict ok\n");
	syscall(SYS_exit, 0);
	return 0;
}

static int run_filter(long n)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { sizeof(prog) / sizeof(prog[0]), prog };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog))
		return 3;
	say("started\n");
	for (long t = 0; t < n; t++) {
		odd_work(t);
		nap_ms(10);
	}
	say("filter ok\n");
	return 0;
}

static void *ticker(void *arg)
{
	long n = (long)arg;

	for (long t = 0; t < n; t++) {
		odd_work(t);
		nap_ms(10);
	}
	say("ticker ok\n");
	exit(0);
}

static int run_mainexit(long n)
{
	pthread_t th;

	if (pthread_create(&th, NULL, ticker, (void *)n))
		return 3;
	say("started\n");
	pthread_exit(NULL);
}

static volatile sig_atomic_t got_usr1, got_usr2;

static void on_usr1(int sig)
{
	got_usr1 = 1;
}

static void on_usr2(int sig)
{
	got_usr2 = 1;
}

static long wait_ms;
static volatile int waiters_done;

static void *epoll_waiter(void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int p[2], ep = epoll_create1(0), rc;

	if (ep < 0 || pipe(p) || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev))
		say("epoll setup failed\n");
	rc = epoll_wait(ep, &out, 1, (int)wait_ms);
	say(rc == 0 ? "epoll ok\n" : rc < 0 && errno == EINTR ? "epoll EINTR\n" : "epoll odd\n");
	__atomic_fetch_add(&waiters_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *sig_waiter(void *arg)
{
	struct timespec ts = { wait_ms / 1000, (wait_ms % 1000) * 1000000 };
	sigset_t set;
	int rc;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	rc = sigtimedwait(&set, NULL, &ts);
	say(rc < 0 && errno == EAGAIN ? "sigwait ok\n" :
	    rc < 0 && errno == EINTR ? "sigwait EINTR\n" : "sigwait odd\n");
	__atomic_fetch_add(&waiters_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int run_waiters(long ms)
{
	pthread_t a, b;
	sigset_t set;

	wait_ms = ms;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&a, NULL, epoll_waiter, NULL) ||
	    pthread_create(&b, NULL, sig_waiter, NULL))
		return 3;
	nap_ms(50);
	say("started\n");
	for (long i = 0; __atomic_load_n(&waiters_done, __ATOMIC_ACQUIRE) < 2; i++) {
		odd_work(i);
		nap_ms(5);
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}

static void *loader(void *arg)
{
	void *h = dlopen(arg, RTLD_NOW);

	say(h ? "loaded\n" : "load failed\n");
	return NULL;
}

static int run_slowload(const char *lib)
{
	long sum = 0, expect = 0;
	pthread_t th;

	if (pthread_create(&th, NULL, loader, (void *)lib))
		return 3;
	for (long i = 0; i < 300; i++) {
		sum += odd_work(i);
		expect += i * 3 + 1;
		nap_ms(10);
	}
	pthread_join(th, NULL);
	say(sum == expect ? "work ok\n" : "work wrong\n");
	return 0;
}

static volatile long traps_seen;

static void on_trap(int sig)
{
	traps_seen++;
}

static void *masked_worker(void *arg)
{
	sigset_t all;
	long bad = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (long i = 0; i < 150; i++) {
		bad += odd_work(i) != i * 3 + 1;
		nap_ms(5);
	}
	return (void *)bad;
}

static int run_trapper(void)
{
	struct sigaction sa = { .sa_handler = on_trap };
	pthread_t th;
	void *bad_thread;
	long bad = 0;

	signal(SIGUSR1, on_usr1);
	say("started\n");
	for (long i = 0; !got_usr1; i++) {
		odd_work(i);
		nap_ms(5);
	}
	sigaction(SIGTRAP, &sa, NULL);
	if (pthread_create(&th, NULL, masked_worker, NULL))
		return 3;
	for (long i = 0; i < 150; i++) {
		bad += odd_work(i) != i * 3 + 1;
		nap_ms(5);
	}
	pthread_join(th, &bad_thread);
	printf("traps %ld\n", traps_seen);
	say(!bad && !bad_thread ? "work ok\n" : "work wrong\n");
	return 0;
}

/* One round: 0 when every register came back. */
#if defined(__aarch64__)
/* x9-x12, both halves of v0, v1 and v31 set, a busy loop (where an attach
 * finds the thread), then each compared. */
static long vector_round(uint64_t pattern)
{
	uint64_t bad;

	__asm__ volatile(
		"mov x9, %[p]\n"
		"add x10, %[p], #1\n"
		"add x11, %[p], #2\n"
		"add x12, %[p], #3\n"
		"fmov d0, x9\n"
		"mov v0.d[1], x9\n"
		"fmov d1, x10\n"
		"fmov d31, x11\n"
		"movz w13, #0x0900\n"
		"movk w13, #0x3d, lsl #16\n"	/* 4,000,000 */
		"1: subs w13, w13, #1\n"
		"b.ne 1b\n"
		"mov %[bad], #0\n"
		"cmp x9, %[p]\n"
		"b.ne 2f\n"
		"add x13, %[p], #1\n"
		"cmp x10, x13\n"
		"b.ne 2f\n"
		"add x13, %[p], #2\n"
		"cmp x11, x13\n"
		"b.ne 2f\n"
		"add x13, %[p], #3\n"
		"cmp x12, x13\n"
		"b.ne 2f\n"
		"fmov x13, d1\n"
		"cmp x13, x10\n"
		"b.ne 2f\n"
		"fmov x13, d31\n"
		"cmp x13, x11\n"
		"b.ne 2f\n"
		"mov x13, v0.d[1]\n"	/* the high half */
		"cmp x13, x9\n"
		"b.eq 3f\n"
		"2: mov %[bad], #2\n"
		"3:\n"
		: [bad] "=&r"(bad)
		: [p] "r"(pattern)
		: "x9", "x10", "x11", "x12", "x13", "v0", "v1", "v31", "cc");
	return (long)bad;
}
#else
static long vector_round(uint64_t pattern)
{
	uint64_t bad;

	__asm__ volatile(
		"mov %[p], %%r8\n"
		"lea 1(%[p]), %%r9\n"
		"lea 2(%[p]), %%r10\n"
		"lea 3(%[p]), %%r11\n"
		"movq %%r8, %%xmm0\n"
		"movq %%r9, %%xmm1\n"
		"movq %%r10, %%xmm15\n"
		"pshufd $0x44, %%xmm0, %%xmm0\n"
		"mov $20000000, %%ecx\n"
		"1: dec %%ecx\n"
		"jnz 1b\n"
		"xor %[bad], %[bad]\n"
		"cmp %[p], %%r8\n"
		"setne %b[bad]\n"
		"lea 1(%[p]), %%rcx\n"
		"cmp %%rcx, %%r9\n"
		"jne 2f\n"
		"lea 2(%[p]), %%rcx\n"
		"cmp %%rcx, %%r10\n"
		"jne 2f\n"
		"lea 3(%[p]), %%rcx\n"
		"cmp %%rcx, %%r11\n"
		"jne 2f\n"
		"movq %%xmm1, %%rcx\n"
		"cmp %%rcx, %%r9\n"
		"jne 2f\n"
		"movq %%xmm15, %%rcx\n"
		"cmp %%rcx, %%r10\n"
		"jne 2f\n"
		"pshufd $0xee, %%xmm0, %%xmm0\n"	/* the high half */
		"movq %%xmm0, %%rcx\n"
		"cmp %%rcx, %%r8\n"
		"je 3f\n"
		"2: or $2, %[bad]\n"
		"3:\n"
		: [bad] "=&r"(bad)
		: [p] "r"(pattern)
		: "rcx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm15", "cc");
	return (long)bad;
}
#endif

static int run_vectors(long n)
{
	long bad = 0;

	say("started\n");
	for (long i = 0; i < n; i++) {
		bad |= vector_round(0x1234567890abcdefull + (uint64_t)i * 16);
		odd_work(i);
	}
	say(bad ? "registers changed\n" : "registers ok\n");
	return 0;
}

#define OWN_FILES 16

static int check_files(const char *dir, const int *fds)
{
	for (int i = 0; i < OWN_FILES; i++) {
		char want[32], got[64], path[512];
		int fd;
		ssize_t n;

		snprintf(want, sizeof(want), "mine %d\n", i);
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, got, sizeof(got));
		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)strlen(want) || memcmp(got, want, (size_t)n)) {
			printf("file %d changed\n", i);
			return 1;
		}
		close(fds[i]);
	}
	say("files ok\n");
	return 0;
}

static int run_closeall(const char *dir)
{
	int fds[OWN_FILES];

	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	say("started\n");
	for (long i = 0; !got_usr1; i++) {
		odd_work(i);
		nap_ms(5);
	}
	syscall(SYS_close_range, 3, ~0U, 0);
	for (int i = 0; i < OWN_FILES; i++) {
		char path[512], text[32];

		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		snprintf(text, sizeof(text), "mine %d\n", i);
		if (fds[i] < 0 || write(fds[i], text, strlen(text)) < 0)
			return 3;
	}
	for (long i = 0; i < 6000 && !got_usr2; i++) {
		odd_work(i);
		nap_ms(10);
	}
	return check_files(dir, fds);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long a = argc > 2 ? atol(argv[2]) : 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(mode, "strict"))
		return run_strict(a);
	if (!strcmp(mode, "filter"))
		return run_filter(a);
	if (!strcmp(mode, "mainexit"))
		return run_mainexit(a);
	if (!strcmp(mode, "waiters"))
		return run_waiters(a);
	if (!strcmp(mode, "slowload") && argc > 2)
		return run_slowload(argv[2]);
	if (!strcmp(mode, "vectors"))
		return run_vectors(a);
	if (!strcmp(mode, "trapper"))
		return run_trapper();
	if (!strcmp(mode, "closeall") && argc > 2)
		return run_closeall(argv[2]);
	fputs("usage: odd_target strict N | filter N | mainexit N | waiters MS | slowload LIB |\n"
	      "       vectors N | trapper | closeall DIR\n", stderr);
	return 64;
}
