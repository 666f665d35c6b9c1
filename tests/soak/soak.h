/* Soak test of libkprobes: shared declarations.
 *
 * Workers call a fixed set of probed functions and count, per thread, how
 * often each probe site must have been reached ("started" before a call,
 * "done" after it).  Steady probes stay registered for the whole run and
 * must account for every reach exactly; churn probes come and go and are
 * checked interval by interval against the same counters.
 */
#ifndef SOAK_H
#define SOAK_H

#include <kprobes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone, used))
#define MAX_WORKERS 32
#define LOOP_MAX 40		/* st_loop(n), n <= LOOP_MAX */
#define REC_MAX 10		/* st_rec(n), n <= REC_MAX */

/* ---- probed functions (soak_targets.c) ---- */

long st_leaf(long x);			/* 2x + 1 */
long st_loop(long n);			/* loop with branches: loop_result[n] */
long st_rec(long n);			/* recursive: rec_result[n] */
void st_vec(double out[2], const double in[2]);	/* in*in + 1, packed */
double st_fdot(double a, double b, double c, double d);
long st_jp(long a, long b, long c, long d, long e, long f, long g, long h);
long ch_a(long x);
long ch_b(long x);
long ch_mid(long x);			/* ((x + 3) * 2) ^ 1 */
long ch_ret(long x);
long ch_jp(long a, long b, long c);

extern long loop_partial[LOOP_MAX + 2];	/* st_loop's %rax before iteration i */
extern long rec_result[REC_MAX + 1];
extern long rec_calls[REC_MAX + 1];	/* invocations of st_rec for st_rec(n) */
void targets_init(void);

/* Functions whose calls are counted. */
enum func { F_LEAF, F_LOOP, F_REC, F_VEC, F_FDOT, F_JP, F_CHA, F_CHB, F_CHMID,
	    F_CHRET, F_CHJP, NFUNC };
/* What a site is reached per call: once, once per loop iteration, once per
 * odd iteration, once per recursive invocation. */
enum metric { M_CALLS, M_ITERS, M_ODDS, NMETRIC };

/* A probe site: function + offset, and how often a call reaches it. */
struct site {
	const char *name;
	void *func_addr;
	unsigned int off;
	enum func func;
	enum metric metric;
	unsigned int post_off[2];	/* allowed post-handler ip offsets, ~0: any */
};

enum site_id {
	S_LEAF0, S_LEAF_RET, S_LOOP0, S_LOOP_TOP, S_LOOP_ODD, S_LOOP_EVEN,
	S_LOOP_FLAGS, S_LOOP_RET, S_REC0, S_VEC_MUL, S_VEC_RIP, S_FDOT0, S_JP0,
	S_CHA0, S_CHB0, S_CHMID0, S_CHMID3, S_CHMID7, S_CHMID10, S_CHMID14,
	S_CHRET0, S_CHJP0, NSITES
};
extern struct site sites[NSITES];
static inline uintptr_t site_addr(int s)
{
	return (uintptr_t)sites[s].func_addr + sites[s].off;
}

/* ---- per-thread counters (soak_threads.c) ---- */

struct counts {
	unsigned long started[NFUNC][NMETRIC];
	unsigned long done[NFUNC][NMETRIC];
};

struct worker {
	int idx;
	pthread_t th;
	pid_t tid;
	timer_t timer;
	bool has_timer;
	struct counts c;
	unsigned long loops;		/* main-loop iterations (liveness) */
	unsigned long sigs[2];		/* SIGUSR1 (timer), SIGUSR2 (tgkill) */
	unsigned long sig_in_probed;	/* signal landed in probed code */
	unsigned long sig_in_lib;	/* ... in libkprobes */
	unsigned long sig_in_anon;	/* ... in code of no object: slots, detours */
	unsigned long sig_in_handler;	/* ... in one of our probe handlers */
	unsigned long sig_nested;	/* a signal handler interrupted another */
	int sig_depth;
	uint64_t rng;
} __attribute__((aligned(64)));

/* Sum over every worker of started/done of (func, metric). */
unsigned long count_started(enum func f, enum metric m);
unsigned long count_done(enum func f, enum metric m);

/* ---- options and global state (soak.c) ---- */

struct opts {
	int seconds, threads, signal_us, fork_ms, progress_s;
	unsigned long seed;
	const char *plugin;
	const char *self;
	bool verbose;
	bool no_churn, no_dl, no_opt;	/* --no churn,dl,opt: to narrow a failure down */
};
extern struct opts opt;
extern volatile int stop_all;
extern struct worker workers[MAX_WORKERS + 1];	/* + the dlopen thread */
extern int nworkers_counted;			/* workers + dl thread */

/* Totals for the summary. */
struct totals {
	unsigned long forks, fork_fail, execs, exec_fail, spawns;
	unsigned long dl_cycles, dl_gone_checked, dl_hits;
	unsigned long churn_ops, churn_intervals, churn_lower_checked, churn_hits;
	unsigned long churn_batch_fail_ok;
	unsigned long opt_toggles, opt_flushes;
	unsigned long child_hung;
};
extern struct totals tot;

static inline void add(unsigned long *p, unsigned long v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static inline unsigned long ld(const unsigned long *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

uint64_t rnd(uint64_t *s);
double now_s(void);
void sleep_us(long us);
/* Every thread's stack of process pid, from gdb (if there is one). */
void hang_report(pid_t pid);

/* ---- anomalies (soak_probes.c): recorded from handlers, printed at the end ---- */

enum anomaly {
	A_BAD_P, A_BAD_IP, A_BAD_REGS, A_AFTER_UNREG, A_BAD_RESULT, A_BAD_ERRNO,
	A_BAD_RETVAL, A_SIG_DEPTH, A_REG_FAIL, A_API_FAIL, A_CHURN_UPPER,
	A_CHURN_LOWER, A_CHILD, A_EXEC, A_DL, A_RP_MISSED, A_GONE, NANOMALY
};
void anomaly(enum anomaly a, long d1, long d2);
unsigned long anomalies_total(void);
void anomalies_print(void);

/* ---- probes (soak_probes.c) ---- */

void steady_register(void);
void steady_unregister(void);
/* Steady hits + misses against the counters; prints a table; 0 if exact. */
int steady_verify(bool print);
unsigned long steady_hits_total(void);
/* Sample which steady probes are jump-optimized right now. */
void steady_sample_optimized(void);
void steady_print_optimized(void);
int steady_check_optimized(void);
/* A fork child's check: calls every steady function and verifies deltas. */
int steady_child_check(void);

void churn_init(void);
void churn_step(uint64_t *rng);
void churn_unregister_all(void);
void *churn_thread(void *arg);
void *optimizer_thread(void *arg);
void *dl_thread(void *arg);
void dl_cycle_once(uint64_t *rng);

/* ---- threads (soak_threads.c) ---- */

void signals_install(void);
void workers_start(void);
void workers_join(void);
void *signal_thread(void *arg);
void call_one(struct worker *w, unsigned int which, long arg);
void worker_bind(struct worker *w);
void worker_signals_begin(struct worker *w);
void worker_signals_end(struct worker *w);
int exec_child_main(void);

/* Held around dlopen/dlclose and around fork (see soak_dl.c). */
extern pthread_mutex_t soak_loader_lock;
bool in_handler_text(uintptr_t ip);

/* ---- allocation accounting (soak_alloc.c) ---- */

size_t soak_live_bytes(void);		/* allocated and not yet freed */
void soak_alloc_mark(void);		/* the per-site baseline */
void soak_alloc_report(FILE *out);	/* sites that grew since the mark */
long soak_alloc_unwinder_growth(void);	/* by libgcc's unwinder, since the mark */
void soak_alloc_print_site(FILE *out, uintptr_t ip, long bytes, long blocks);

#endif
