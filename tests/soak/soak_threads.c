/* Workers, their signals, and the processes they start.
 *
 * A worker calls the probed functions in a tight loop and counts, before
 * and after each call, how often every site is reached.  Two signals
 * interrupt it: SIGUSR1 from a per-thread timer and SIGUSR2 from a signal
 * thread; each handler calls probed functions too, so probes are hit in
 * signal handlers, and signals land during probe handlers and out-of-line
 * execution.  Now and then a worker forks a checking child, execs, or
 * spawns.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "soak.h"

extern char **environ;
extern char __start_kprobes_text[], __stop_kprobes_text[];
extern char __start_soak_handlers[], __stop_soak_handlers[];

static __thread struct worker *tls_worker;

void worker_bind(struct worker *w)
{
	tls_worker = w;
}

unsigned long count_started(enum func f, enum metric m)
{
	unsigned long n = 0;

	for (int i = 0; i < nworkers_counted; i++)
		n += ld(&workers[i].c.started[f][m]);
	return n;
}

unsigned long count_done(enum func f, enum metric m)
{
	unsigned long n = 0;

	for (int i = 0; i < nworkers_counted; i++)
		n += ld(&workers[i].c.done[f][m]);
	return n;
}

/* ---- one counted call ---- */

/* Called through pointers so that no call is inlined or folded away. */
static long (*volatile p_leaf)(long) = st_leaf;
static long (*volatile p_loop)(long) = st_loop;
static long (*volatile p_rec)(long) = st_rec;
static void (*volatile p_vec)(double *, const double *) = st_vec;
static double (*volatile p_fdot)(double, double, double, double) = st_fdot;
static long (*volatile p_jp)(long, long, long, long, long, long, long, long) = st_jp;
static long (*volatile p_cha)(long) = ch_a;
static long (*volatile p_chb)(long) = ch_b;
static long (*volatile p_chmid)(long) = ch_mid;
static long (*volatile p_chret)(long) = ch_ret;
static long (*volatile p_chjp)(long, long, long) = ch_jp;

/* Reaches of each metric for one call; "started" before the call and
 * "done" after bound what any probe can have seen at any moment. */
static void reach(unsigned long (*ctr)[NMETRIC], enum func f, unsigned long calls,
		  unsigned long iters, unsigned long odds)
{
	add(&ctr[f][M_CALLS], calls);
	if (iters)
		add(&ctr[f][M_ITERS], iters);
	if (odds)
		add(&ctr[f][M_ODDS], odds);
}

static bool call_vec(long a)
{
	double in[2] = { (double)a, (double)(a + 1) }, out[2];

	p_vec(out, in);
	return out[0] == (double)(a * a + 1) && out[1] == (double)((a + 1) * (a + 1) + 1);
}

static bool call_fdot(long a)
{
	double x = (double)a;

	return p_fdot(x, x + 1, x + 2, x + 3) == (double)(a * (a + 1) + (a + 2) * (a + 3));
}

static bool call_func(enum func f, long a)
{
	switch (f) {
	case F_LEAF:	return p_leaf(a) == 2 * a + 1;
	case F_LOOP:	return p_loop(a) == loop_partial[a];
	case F_REC:	return p_rec(a) == rec_result[a];
	case F_VEC:	return call_vec(a);
	case F_FDOT:	return call_fdot(a);
	case F_JP:	return p_jp(a, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7) == 8 * a + 28;
	case F_CHA:	return p_cha(a) == a * 5 + 2;
	case F_CHB:	return p_chb(a) == (a ^ 0x55);
	case F_CHMID:	return p_chmid(a) == ((a + 3) * 2 ^ 1);
	case F_CHRET:	return p_chret(a) == a + 7;
	case F_CHJP:	return p_chjp(a, a + 1, a + 2) == a * (a + 1) - (a + 2);
	default:	return false;
	}
}

/* Calls function `which` with an argument derived from arg, counting its
 * reaches and checking its result and that errno survived the probes. */
void call_one(struct worker *w, unsigned int which, long arg)
{
	enum func f = (enum func)(which % NFUNC);
	unsigned long calls = 1, iters = 0, odds = 0;
	long a = (arg & 0x7fffffff) % 1000;
	int e = 1000 + (int)(arg & 0xff);

	if (f == F_LOOP) {
		a %= LOOP_MAX + 1;
		iters = (unsigned long)a;
		odds = (unsigned long)a / 2;
	} else if (f == F_REC) {
		a %= REC_MAX + 1;
		calls = (unsigned long)rec_calls[a];
	}
	reach(w->c.started, f, calls, iters, odds);
	errno = e;
	if (!call_func(f, a))
		anomaly(A_BAD_RESULT, f, a);
	if (errno != e)
		anomaly(A_BAD_ERRNO, f, errno);
	reach(w->c.done, f, calls, iters, odds);
}

/* ---- where signals land ---- */

#define MAX_OBJ_RANGES 128
static uintptr_t obj_range[MAX_OBJ_RANGES][2];
static int nobj_ranges;

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	for (int i = 0; i < info->dlpi_phnum && nobj_ranges < MAX_OBJ_RANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			obj_range[nobj_ranges][0] = info->dlpi_addr + ph->p_vaddr;
			obj_range[nobj_ranges][1] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
			nobj_ranges++;
		}
	}
	return 0;
}

static bool in_objects(uintptr_t ip)
{
	for (int i = 0; i < nobj_ranges; i++)
		if (ip >= obj_range[i][0] && ip < obj_range[i][1])
			return true;
	return false;
}

static bool in_probed(uintptr_t ip)
{
	for (int s = 0; s < NSITES; s++)
		if (ip >= (uintptr_t)sites[s].func_addr && ip < (uintptr_t)sites[s].func_addr + 48)
			return true;
	return false;
}

bool in_handler_text(uintptr_t ip)
{
	return ip >= (uintptr_t)__start_soak_handlers && ip < (uintptr_t)__stop_soak_handlers;
}

/* Code outside every object loaded at start is libkprobes' executable
 * memory: out-of-line slots, detours, return stubs (or the plugin). */
static void classify(struct worker *w, uintptr_t ip)
{
	if (in_handler_text(ip))
		add(&w->sig_in_handler, 1);
	else if (ip >= (uintptr_t)__start_kprobes_text && ip < (uintptr_t)__stop_kprobes_text)
		add(&w->sig_in_lib, 1);
	else if (in_probed(ip))
		add(&w->sig_in_probed, 1);
	else if (!in_objects(ip))
		add(&w->sig_in_anon, 1);
}

/* ---- the program's signal handler ---- */

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
	struct worker *w = tls_worker;
	ucontext_t *uc = ctx;
	unsigned long r;
	int e = errno, d;

	if (!w)
		return;
	d = __atomic_add_fetch(&w->sig_depth, 1, __ATOMIC_RELAXED);
	if (d > 2)	/* each signal is blocked in its own handler */
		anomaly(A_SIG_DEPTH, d, sig);
	if (d == 2)
		add(&w->sig_nested, 1);
	add(&w->sigs[sig == SIGUSR2], 1);
	classify(w, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
	r = (unsigned long)__builtin_ia32_rdtsc();
	call_one(w, F_LEAF, (long)r);
	call_one(w, F_LOOP, (long)(r % 13));
	call_one(w, F_REC, (long)(r % 7));
	call_one(w, (r & 1) ? F_VEC : F_FDOT, (long)(r >> 3));
	call_one(w, F_CHMID, (long)(r >> 5));
	if (__atomic_sub_fetch(&w->sig_depth, 1, __ATOMIC_RELAXED) != d - 1)
		anomaly(A_SIG_DEPTH, d, -sig);
	errno = e;
}

void signals_install(void)
{
	struct sigaction sa;
	sigset_t set;

	dl_iterate_phdr(note_object, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	/* only the threads that count calls take them */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void usr_signals(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(how, &set, NULL);
}

/* A per-thread timer (SIGEV_THREAD_ID) so that every worker gets its own
 * stream of signals, at a phase of its own. */
void worker_signals_begin(struct worker *w)
{
	struct sigevent sev;
	long us = opt.signal_us, first = us + 37L * w->idx;
	struct itimerspec its = {
		{ us / 1000000, (us % 1000000) * 1000 },
		{ first / 1000000, (first % 1000000) * 1000 },
	};

	w->tid = (pid_t)syscall(SYS_gettid);
	worker_bind(w);
	usr_signals(SIG_UNBLOCK);
	if (us <= 0)
		return;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR1;
	sev._sigev_un._tid = w->tid;	/* sigev_notify_thread_id */
	if (timer_create(CLOCK_MONOTONIC, &sev, &w->timer) == 0) {
		w->has_timer = true;
		timer_settime(w->timer, 0, &its, NULL);
	} else {
		anomaly(A_API_FAIL, -1, errno);
	}
}

void worker_signals_end(struct worker *w)
{
	if (w->has_timer)
		timer_delete(w->timer);
	w->has_timer = false;
	usr_signals(SIG_BLOCK);
	__atomic_store_n(&w->tid, 0, __ATOMIC_RELEASE);
}

void *signal_thread(void *arg)
{
	uint64_t rng = opt.seed ^ 0x5167;
	pid_t pid = getpid();

	while (!stop_all && opt.signal_us > 0) {
		for (int i = 0; i < nworkers_counted; i++) {
			pid_t tid = __atomic_load_n(&workers[i].tid, __ATOMIC_ACQUIRE);

			if (tid)
				syscall(SYS_tgkill, pid, tid, SIGUSR2);
		}
		sleep_us(100 + (long)(rnd(&rng) % 1500));
	}
	return NULL;
}

/* ---- processes ---- */

/* Waits for a child with a deadline: a child that hangs (a lock inherited
 * locked, say) is killed and reported instead of hanging the soak. */
static int wait_child(pid_t pid, enum anomaly kind, long what)
{
	double deadline = now_s() + 20;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			anomaly(kind, what, -errno);
			return -1;
		}
		if (now_s() > deadline) {
			dprintf(2, "kprobes-soak: child %d hung\n", (int)pid);
			hang_report(pid);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			add(&tot.child_hung, 1);
			anomaly(kind, what, -1000);
			return -1;
		}
		sleep_us(1000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		anomaly(kind, what, WIFEXITED(status) ? WEXITSTATUS(status)
						      : -WTERMSIG(status));
		return -1;
	}
	return 0;
}

pthread_mutex_t soak_loader_lock = PTHREAD_MUTEX_INITIALIZER;

static void fork_check(void)
{
	pid_t pid;

	pthread_mutex_lock(&soak_loader_lock);
	pid = fork();
	if (pid != 0)
		pthread_mutex_unlock(&soak_loader_lock);

	if (pid < 0) {
		add(&tot.fork_fail, 1);
		return;
	}
	if (pid == 0)
		_exit(steady_child_check());
	add(&tot.forks, 1);
	if (wait_child(pid, A_CHILD, 0))
		add(&tot.fork_fail, 1);
}

static void fork_exec(const char *path, const char *arg)
{
	pid_t pid = fork();

	if (pid < 0) {
		add(&tot.exec_fail, 1);
		return;
	}
	if (pid == 0) {
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	add(&tot.execs, 1);
	if (wait_child(pid, A_EXEC, arg ? 1 : 2))
		add(&tot.exec_fail, 1);
}

static void spawn_true(void)
{
	char *argv[] = { "true", NULL };
	pid_t pid;

	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ)) {
		anomaly(A_EXEC, 3, errno);
		return;
	}
	add(&tot.spawns, 1);
	wait_child(pid, A_EXEC, 3);
}

static void process_op(unsigned long n)
{
	switch (n % 4) {
	case 0: fork_check(); break;
	case 1: fork_exec(opt.self, "--exec-child"); break;
	case 2: fork_exec("/bin/true", NULL); break;
	case 3: spawn_true(); break;
	}
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	double period = opt.fork_ms / 1000.0;
	double next = now_s() + period * (1 + (double)w->idx / opt.threads);
	unsigned long ops = (unsigned long)w->idx;

	worker_signals_begin(w);
	while (!stop_all) {
		for (int k = 0; k < 32; k++) {
			uint64_t r = rnd(&w->rng);

			call_one(w, (unsigned int)(r % NFUNC), (long)(r >> 16));
		}
		add(&w->loops, 32);
		if (opt.fork_ms > 0 && now_s() >= next) {
			process_op(ops++);
			next = now_s() + period;
		}
	}
	worker_signals_end(w);
	return NULL;
}

void workers_start(void)
{
	for (int i = 0; i < opt.threads; i++) {
		workers[i].idx = i;
		workers[i].rng = opt.seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i + 1;
		if (pthread_create(&workers[i].th, NULL, worker_main, &workers[i])) {
			perror("pthread_create");
			exit(2);
		}
	}
}

void workers_join(void)
{
	for (int i = 0; i < opt.threads; i++)
		pthread_join(workers[i].th, NULL);
}
