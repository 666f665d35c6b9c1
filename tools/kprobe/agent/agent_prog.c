/* `kprobe run` in the target: a probe program's image, its probes and the
 * runtime services the language's interpreter asks for.
 *
 * The image comes from the session memory, which the tool wrote and the
 * program could have written too: it is copied into private memory and
 * verified (lang_image_load) before anything looks at it, and the probe
 * specs the config carries must be the ones the verified image names.
 *
 * Each uprobe or uretprobe point gets a handler that runs the probe's
 * code (lang_run) on the thread that hit it.  BEGIN runs once the probes
 * are armed (before main() for a launched command), END when the session
 * ends (the tool detaches or stops, or the process exits), each interval
 * probe on a thread of its own.
 *
 * The services (struct lang_ops), on the hit path:
 *   pid, tid       cached per thread (one system call on a thread's first use)
 *   uid, gid       read when the session starts
 *   cpid           the process's pid when the session started (a child
 *                  it forks keeps it)
 *   numaid         the processor's node: a table read from sysfs when the
 *                  session starts (agent_numa.c), no system call
 *   rand           xorshift64* per thread, no system call
 *   cpu            kp_cpu_id(): no system call (kp_arch.h)
 *   nsecs          CLOCK_MONOTONIC as bpftrace's: from the TSC when it is
 *                  invariant (no call at all: a call into the vDSO would make
 *                  the probe save the vector state), else the vDSO
 *   elapsed        nsecs since the session started
 *   comm           the thread's name, read once per thread and session
 *   read           kprobes_read_nofault(): a load whose fault the library's
 *                  SIGSEGV/SIGBUS handler turns into -EFAULT, no system
 *                  call (a bad pointer costs a signal delivery)
 *   ustack         kprobes_stack(): call-frame information
 *   emit           the thread's ring of the session memory, no system call
 *   signal         tgkill(2) to the thread that hit the probe: the one call
 *                  that sending a signal takes
 *   override       at a function's entry: the return value in ax, and back
 *                  to the caller (the probe is kept unoptimized, as a changed
 *                  ip is honoured only there) */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kp_arch.h"
#include "agent.h"
#include "agent_register.h"
#include "lang/lang.h"
#include "lang/lang_int.h"
#include "lang/maps_int.h"
#include "agent_prog.h"
#include "util.h"

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))
#define TLS __attribute__((tls_model("initial-exec")))

/* What one run of a probe's code knows besides the language's context. */
struct prog_run {
	struct agent_prog *prog;
	struct agent_probe *ap;		/* NULL for BEGIN, END, interval */
	bool at_entry;			/* a function's first instruction */
	bool override;			/* override() was called */
};

static __thread pid_t tls_pid TLS, tls_tid TLS;
static __thread uint64_t tls_rand TLS;
static __thread unsigned int tls_rand_gen TLS;
static __thread unsigned int tls_ids_gen TLS, tls_comm_gen TLS;
static __thread char tls_comm[LANG_COMM_LEN] TLS;

/* The architecture's system call instruction, inline (kp_arch.h). */
static long raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	return kp_raw_syscall6(n, a, b, c, d, e, f);
}

/* CLOCK_MONOTONIC by the system call: a call into the vDSO goes through
 * the PLT, which the handler analysis cannot follow.  The hit path uses
 * it only where the TSC is not invariant. */
static uint64_t mono_ns(void)
{
	struct timespec ts = { 0, 0 };

	raw_syscall6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t prog_nsecs(const struct agent_prog *p)
{
	return p->tick_q32 ? agent_prog_tsc_nsecs(p) : mono_ns();
}

/* pid and tid, asked once per thread and session (a fork changes both:
 * the generation moves on in the child's session). */
static void thread_ids(const struct agent_prog *p)
{
	if (__builtin_expect(tls_ids_gen == p->gen && tls_tid, 1))
		return;
	tls_pid = (pid_t)raw_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	tls_tid = (pid_t)raw_syscall6(SYS_gettid, 0, 0, 0, 0, 0, 0);
	tls_ids_gen = p->gen;
}

/* ---- the services ---- */

/* libkprobes' fault-safe copy: a load (or a `rep movsb`) whose fault the
 * library's SIGSEGV handler turns into -EFAULT; no system call. */
int lang_ext_read(void *dst, uintptr_t src, size_t len, void *arg)
{
	(void)arg;
	return kprobes_read_nofault(dst, (const void *)src, len) ? -EFAULT : 0;
}

/* rand: xorshift64* per thread (bpftrace's is the kernel's per-processor
 * generator), seeded from the cycle counter and the thread's stack once
 * per thread and session: a fork child (a new session generation) does
 * not repeat its parent's numbers. */
static uint64_t next_rand(const struct agent_prog *p)
{
	uint64_t x = tls_rand;

	if (!x || tls_rand_gen != p->gen) {
		x = (kp_cycles() ^ ((uint64_t)(uintptr_t)&x << 16)) | 1;
		tls_rand_gen = p->gen;
	}
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	tls_rand = x;
	return (x * 0x2545f4914f6cdd1dull) >> 32;
}

uint64_t lang_ext_get(int src, void *arg)
{
	struct prog_run *run = arg;

	switch (src) {
	case LANG_SRC_PID:
		thread_ids(run->prog);
		return (uint64_t)tls_pid;
	case LANG_SRC_TID:
		thread_ids(run->prog);
		return (uint64_t)tls_tid;
	case LANG_SRC_UID:
		return run->prog->uid;
	case LANG_SRC_CPU:
		return kp_cpu_id();
	case LANG_SRC_NSECS:
		return prog_nsecs(run->prog);
	case LANG_SRC_ELAPSED:
		return prog_nsecs(run->prog) - run->prog->start_ns;
	case LANG_SRC_GID:
		return run->prog->gid;
	case LANG_SRC_RAND:
		return next_rand(run->prog);
	case LANG_SRC_NUMA:
		return agent_numa_node(kp_cpu_id());
	case LANG_SRC_CPID:
		return (uint64_t)run->prog->cpid;
	default:
		return 0;
	}
}

void lang_ext_comm(char *out, void *arg)
{
	struct prog_run *run = arg;

	if (tls_comm_gen != run->prog->gen) {
		memset(tls_comm, 0, sizeof(tls_comm));
		raw_syscall6(SYS_prctl, PR_GET_NAME, (long)tls_comm, 0, 0, 0, 0);
		tls_comm[LANG_COMM_LEN - 1] = '\0';
		tls_comm_gen = run->prog->gen;
	}
	memcpy(out, tls_comm, LANG_COMM_LEN);
}

/* Return addresses from the library's unwinder (call-frame information,
 * frame pointers only where an object has none), listed as bpftrace lists
 * a uprobe's stack: the probed address first (a breakpoint's pt_regs may
 * already be past it), then each caller.  Unlike bpftrace's frame-pointer
 * walk, the immediate caller of a function entered is there too, and
 * binaries built without frame pointers unwind in full. */
int lang_ext_ustack(const struct pt_regs *regs, uint64_t *pcs, int max, void *arg)
{
	struct prog_run *run = arg;
	int n;

	if (!regs || max <= 0)
		return 0;
	n = kprobes_stack(regs, (unsigned long *)pcs, max);
	if (n <= 0) {
		pcs[0] = instruction_pointer(regs);
		n = 1;
	}
	if (run->ap && run->ap->u.kp.addr && !run->ap->is_return)
		pcs[0] = (uint64_t)(uintptr_t)run->ap->u.kp.addr;
	return n;
}

int lang_ext_emit(int type, uint32_t id, const void *data, size_t len, void *arg)
{
	struct prog_run *run = arg;

	if (len > KPS_PROG_DATA_MAX)
		return -E2BIG;
	return agent_emit_record(run->prog->session, EV_PROG, (uint16_t)type, id, data,
				 (uint32_t)len) < 0 ? -ENOSPC : 0;
}

int lang_ext_signal(int sig, void *arg)
{
	struct prog_run *run = arg;

	if (sig <= 0 || sig >= 65)
		return -EINVAL;
	thread_ids(run->prog);
	return (int)raw_syscall6(SYS_tgkill, tls_pid, tls_tid, sig, 0, 0, 0);
}

/* Returns v from the function without running it: at the first
 * instruction the return address is on top of the stack (x86-64) or in
 * the link register (arm64), kp_override_return(). */
int lang_ext_override(struct pt_regs *regs, uint64_t v, void *arg)
{
	struct prog_run *run = arg;
	uint64_t ret = 0;

	if (!run->at_entry || !regs ||
	    (KP_RET_ADDR_ON_STACK && lang_ext_read(&ret, regs->sp, 8, arg)))
		return -EINVAL;
	kp_override_return(regs, v, ret);
	run->override = true;
	return 0;
}

/* The interpreter is built with LANG_DIRECT_OPS and calls the lang_ext_*
 * functions above directly; the table is what lang_ctx carries anyway. */
static const struct lang_ops prog_ops = {
	.read = lang_ext_read,
	.get = lang_ext_get,
	.comm = lang_ext_comm,
	.ustack = lang_ext_ustack,
	.emit = lang_ext_emit,
	.signal = lang_ext_signal,
	.override = lang_ext_override,
};

/* ---- handlers ----
 *
 * libkprobes saves the vector state around a handler (at a return the
 * whole extended state, hundreds of ns) unless its analysis proves the
 * handler and its direct callees leave vector registers alone.  So this
 * file and the language's runtime are built without vector code, jump
 * tables or libc calls (kprobe.mk), the interpreter calls the lang_ext_*
 * services above directly (LANG_DIRECT_OPS), and the forms the compiler
 * marks skip the interpreter: the aggregations and the latency pattern
 * (with or without a filter) in agent_prog_fast.c's handlers, which need
 * even less saved; here, a false filter in front of an interpreted body
 * (filter_false()). */

/* An SDT operand's value as bpftrace gives it: the operand's size
 * sign- or zero-extended to 64 bits.  if-chains: no jump table. */
static inline __attribute__((always_inline)) uint64_t sdt_extend(uint8_t type, uint64_t v)
{
	if (type == ARG_S32)
		return (uint64_t)(int64_t)(int32_t)v;
	if (type == ARG_U32)
		return (uint32_t)v;
	if (type == ARG_S16)
		return (uint64_t)(int64_t)(int16_t)v;
	if (type == ARG_U16)
		return (uint16_t)v;
	if (type == ARG_S8)
		return (uint64_t)(int64_t)(int8_t)v;
	if (type == ARG_U8)
		return (uint8_t)v;
	return v;
}

/* arg0.. of a usdt probe's hit: each operand's fetch plan (0 when a load
 * faults or the operand is unavailable, as a failed read in bpftrace). */
_Static_assert(LANG_MAX_USDT_ARGS == SPEC_MAX_ARGS, "a usdt probe's arguments are its spec's");

static void sdt_args(const struct agent_probe *ap, const struct pt_regs *regs, uint64_t *argv)
{
	for (int i = 0; i < ap->nargs && i < SPEC_MAX_ARGS; i++) {
		const struct spec_arg *a = &ap->args[i];

		argv[i] = 0;
		if (a->src == ARG_SRC_PLAN && agent_run_plan(regs, a, &argv[i]))
			argv[i] = sdt_extend(a->type, argv[i]);
		else
			argv[i] = 0;
	}
}

static int run_probe(struct agent_prog *p, struct agent_probe *ap, unsigned probe,
		     struct pt_regs *regs, uint64_t func, bool at_entry)
{
	uint64_t argv[SPEC_MAX_ARGS];
	struct prog_run run;
	struct lang_ctx ctx = {
		.regs = regs,
		.probe_id = ap ? PROBE_ID_DESC | ap->desc : probe,
		.func_addr = func,
		.maps = p->region,
		.shard = p->shards ? agent_prog_thread_shard(p) : 0,
		.ops = &prog_ops,
		.arg = &run,
	};

	if (ap && p->img.probes[probe].kind == LANG_P_USDT) {
		sdt_args(ap, regs, argv);
		ctx.argv = argv;
		ctx.nargv = ap->nargs;
	}
	ctx.ip_bias = ap && !ap->is_return ? KP_PROBE_IP_BIAS : 0;
	run.prog = p;
	run.ap = ap;
	run.at_entry = at_entry;
	run.override = false;
	lang_run(&p->img, probe, &ctx);
	return run.override;
}

/* The value of a fast filter's source, without a call the handler
 * analysis cannot follow; false for a source the interpreter must read. */
static inline __attribute__((always_inline)) bool pred_value(const struct agent_prog *p,
							     const struct agent_probe *ap,
							     const struct lang_probe_desc *d,
							     const struct pt_regs *regs,
							     uint64_t *x)
{
	static const uint8_t arg_off[6] = { KP_ARG_REG_OFFSETS };
	unsigned int src = d->pred_src;

	if (src == LANG_SRC_TID || src == LANG_SRC_PID) {
		thread_ids(p);
		*x = (uint64_t)(src == LANG_SRC_TID ? tls_tid : tls_pid);
	} else if (src == LANG_SRC_ARG && d->pred_arg < 6 && d->kind == LANG_P_UPROBE) {
		*x = *(const uint64_t *)((const char *)regs + arg_off[d->pred_arg]);
	} else if (src == LANG_SRC_RETVAL && d->kind == LANG_P_URETPROBE) {
		*x = regs_return_value(regs);
	} else if (src == LANG_SRC_CPU) {
		*x = kp_cpu_id();
	} else if (src == LANG_SRC_UID) {
		*x = p->uid;
	} else if (src == LANG_SRC_NSECS && p->tick_q32) {
		*x = agent_prog_tsc_nsecs(p);
	} else if (src == LANG_SRC_PROBE) {
		*x = PROBE_ID_DESC | ap->desc;
	} else if (src == LANG_SRC_FUNC) {
		*x = (uint64_t)(uintptr_t)(ap->is_return ? ap->u.rp.kp.addr : ap->u.kp.addr);
	} else {
		return false;
	}
	return true;
}

/* A filter the compiler marked (/src CMP imm/) that is false: the hit
 * ends here, without the interpreter. */
static inline __attribute__((always_inline)) bool filter_false(const struct agent_prog *p,
							       const struct agent_probe *ap,
							       const struct pt_regs *regs)
{
	const struct lang_probe_desc *d = &p->img.probes[ap->prog_probe];
	uint64_t x;

	return d->pred && pred_value(p, ap, d, regs, &x) && !lang_fast_pred(d, x);
}

static int prog_entry(struct kprobe *kp, struct pt_regs *regs)
{
	struct agent_probe *ap = container_of(kp, struct agent_probe, u.kp);
	struct agent_prog *p = ap->session->prog;

	if (agent_hit_silent(ap->session) || filter_false(p, ap, regs))
		return 0;
	/* A non-zero return resumes at regs->ip: only after override(). */
	return run_probe(p, ap, ap->prog_probe, regs, (uint64_t)(uintptr_t)kp->addr,
			 ap->at_function_entry) ? 1 : 0;
}

/* Probes whose code may call override() keep a post handler: the library
 * then leaves them unoptimized, where a changed ip is honoured. */
static void prog_post(struct kprobe *kp, struct pt_regs *regs, unsigned long flags)
{
	(void)kp;
	(void)regs;
	(void)flags;
}

static int prog_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);

	if (agent_hit_silent(ap->session) || filter_false(ap->session->prog, ap, regs))
		return 0;
	run_probe(ap->session->prog, ap, ap->prog_probe, regs,
		  (uint64_t)(uintptr_t)ri->rp->kp.addr, false);
	return 0;
}

void agent_prog_set_handlers(struct agent_probe *ap)
{
	struct agent_prog *p = ap->session->prog;

	ap->prog_probe = p->probe_of_spec[ap->spec];
	if (!p->uses_override[ap->prog_probe] && agent_prog_set_fast_handlers(ap))
		return;
	if (ap->is_return) {
		ap->u.rp.handler = prog_return;
		ap->u.rp.entry_handler = NULL;
		ap->u.rp.data_size = 0;
		return;
	}
	/* an SDT site is inside a function, never its entry */
	ap->at_function_entry = !ap->session->cfg.specs[ap->spec].offset &&
				p->img.probes[ap->prog_probe].kind != LANG_P_USDT;
	ap->u.kp.pre_handler = prog_entry;
	if (p->uses_override[ap->prog_probe])
		ap->u.kp.post_handler = prog_post;
}

/* ---- BEGIN, END, interval ---- */

static void run_special(struct agent_prog *p, int kind)
{
	struct pt_regs regs;

	for (uint32_t i = 0; i < p->img.hdr->nprobes; i++) {
		if (p->img.probes[i].kind != kind)
			continue;
		memset(&regs, 0, sizeof(regs));
		run_probe(p, NULL, i, &regs, 0, false);
	}
}

static void *interval_main(void *arg)
{
	struct interval *iv = arg;
	struct agent_prog *p = iv->prog;
	uint64_t next = mono_ns() + iv->period_ns;

	agent_mark_own_thread();
	prctl(PR_SET_NAME, "kprobe-interval", 0, 0, 0);
	for (;;) {
		struct pollfd pfd = { p->stop_fd[0], POLLIN, 0 };
		uint64_t now = mono_ns();
		struct timespec rel = { 0, 0 };
		struct pt_regs regs;

		if (now < next) {
			rel.tv_sec = (time_t)((next - now) / 1000000000ull);
			rel.tv_nsec = (long)((next - now) % 1000000000ull);
			if (ppoll(&pfd, 1, &rel, NULL) != 0)
				break;	/* stopping (or the pipe is gone) */
			continue;
		}
		memset(&regs, 0, sizeof(regs));
		run_probe(p, NULL, iv->probe, &regs, 0, false);
		next += iv->period_ns;
		if (next < now)	/* fell behind: skip, as a timer would */
			next = now + iv->period_ns;
	}
	return NULL;
}

/* Interval threads take no process signals (the program's threads do). */
static int start_intervals(struct agent_prog *p, struct agent_fail *f)
{
	sigset_t all, old;
	int rc = 0;

	if (!p->nintervals)
		return 0;
	if (pipe2(p->stop_fd, O_CLOEXEC))
		return agent_fail(f, 1, -errno, "cannot start the interval probes: %s",
				  strerror(errno));
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < p->nintervals && !rc; i++) {
		rc = -pthread_create(&p->intervals[i].thread, NULL, interval_main,
				     &p->intervals[i]);
		p->intervals[i].started = !rc;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return agent_fail(f, 1, rc, "cannot start the interval probes: %s", strerror(-rc));
	return 0;
}

static void stop_intervals(struct agent_prog *p)
{
	if (!p->nintervals || p->stop_fd[1] < 0)
		return;
	close(p->stop_fd[1]);
	p->stop_fd[1] = -1;
	for (int i = 0; i < p->nintervals; i++)
		if (p->intervals[i].started && !pthread_equal(p->intervals[i].thread,
							      pthread_self()))
			pthread_join(p->intervals[i].thread, NULL);
	close(p->stop_fd[0]);
	p->stop_fd[0] = -1;
	p->nintervals = 0;
}

/* ---- setting up ---- */

/* bpftrace's short library names: "libc" is the loaded libc.so.6. */
struct short_name {
	const char *want;
	char found[256];
};

static int match_short_name(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct short_name *sn = arg;
	const char *path = info->dlpi_name;

	(void)size;
	if (!path || !*path || !short_library_matches(path_base(path), sn->want))
		return 0;
	snprintf(sn->found, sizeof(sn->found), "%s", path_base(path));
	return 1;
}

static void resolve_short_name(struct probe_spec *s)
{
	struct short_name sn = { s->object, "" };

	if (!s->object[0] || strchr(s->object, '/') || strstr(s->object, ".so") ||
	    agent_object_loaded(s->object))
		return;
	if (dl_iterate_phdr(match_short_name, &sn))
		snprintf(s->object, sizeof(s->object), "%s", sn.found);
}

static bool spec_matches(const struct probe_spec *s, const struct lang_image *img,
			 const struct lang_probe_desc *d)
{
	return s->kind == SPEC_SYMBOL && !s->nargs &&
	       !strcmp(s->object, lang_image_str(img, d->target)) &&
	       !strcmp(s->symbol, lang_image_str(img, d->func)) && s->offset == d->offset &&
	       s->is_return == (d->kind == LANG_P_URETPROBE);
}

/* The n sites of a usdt probe, from spec first on: addresses whose
 * arguments are fetch plans (the SDT operands, arg0..), the first alone
 * marked.  spec.c verified each plan as it parsed the config. */
static bool usdt_sites_match(const struct session_config *cfg, int first, int n)
{
	if (n <= 0 || n > cfg->nspecs - first)
		return false;
	for (int k = first; k < first + n; k++) {
		const struct probe_spec *s = &cfg->specs[k];

		if (s->kind != SPEC_ADDRESS || s->is_return || (k > first && s->sites))
			return false;
		for (int a = 0; a < s->nargs; a++)
			if (s->args[a].src != ARG_SRC_PLAN && s->args[a].src != ARG_SRC_UNAVAIL)
				return false;
	}
	return true;
}

/* Whether the ABI writes the identifier [p, p + len) of a qualified name
 * as its length and characters.  Not so: std (St), an operator (a code
 * such as nw), a constructor or destructor (C1, D1: the class's name,
 * prev, is the one written). */
static bool written_as_source_name(const char *p, int len, const char *prev, int prevlen)
{
	if ((len == 3 && !strncmp(p, "std", 3)) || !strncmp(p, "operator", 8))
		return false;
	if (*p == '~')
		return false;
	return !(prev && len == prevlen && !strncmp(p, prev, (size_t)len));
}

/* Whether mangled can be a function the C++ name or glob func names: an
 * Itanium symbol (_Z...) holding each identifier of func's qualified name
 * (up to its parameter list; '*' parts match anything) that the ABI writes
 * as its length then its characters, in order.  The tool matched the
 * symbols by demangling them; this keeps a config from naming others. */
static bool cxx_plausible(const char *mangled, const char *func)
{
	const char *at = mangled, *p = func, *prev = NULL;
	int prevlen = 0;

	if (strncmp(mangled, "_Z", 2))
		return false;
	while (*p && *p != '(') {
		const char *e = p;
		char want[256];
		int len;

		while (*e && *e != '(' && strncmp(e, "::", 2))
			e++;
		len = (int)(e - p);
		if (len > 0 && len < 200 && !memchr(p, '*', (size_t)len) && !memchr(p, '?', (size_t)len) &&
		    !memchr(p, '<', (size_t)len) && !memchr(p, '[', (size_t)len) &&
		    written_as_source_name(p, len, prev, prevlen)) {
			snprintf(want, sizeof(want), "%d%.*s", len, len, p);
			at = strstr(at, want);
			if (!at)
				return false;
			at += strlen(want);
		}
		prev = p;
		prevlen = len;
		p = strncmp(e, "::", 2) ? e : e + 2;
	}
	return true;
}

/* The n functions of a uprobe on a C++ name, from spec first on: symbols
 * of the probe's object, each plausibly one the name names. */
static bool cxx_specs_match(const struct session_config *cfg, int first, int n,
			    const struct lang_image *img, const struct lang_probe_desc *d)
{
	const char *func = lang_image_str(img, d->func);

	if (n <= 0 || n > cfg->nspecs - first || (!strstr(func, "::") && !strchr(func, '(')))
		return false;
	for (int k = first; k < first + n; k++) {
		const struct probe_spec *s = &cfg->specs[k];

		if (s->kind != SPEC_SYMBOL || s->nargs || (k > first && s->sites) ||
		    strcmp(s->object, lang_image_str(img, d->target)) || s->offset != d->offset ||
		    s->is_return != (d->kind == LANG_P_URETPROBE) || !cxx_plausible(s->symbol, func))
			return false;
	}
	return true;
}

static bool code_has_override(const struct lang_image *img, const struct lang_probe_desc *d)
{
	for (uint32_t k = 0; k < d->ncode; k++)
		if (img->insns[d->code + k].op == LANG_OP_OVERRIDE)
			return true;
	return false;
}

/* The config's specs must be the image's uprobes, in order; each then
 * runs that probe's code. */
static int map_specs(struct agent_prog *p, struct session_config *cfg, struct agent_fail *f)
{
	const struct lang_image *img = &p->img;
	int spec = 0;

	p->probe_of_spec = calloc((size_t)cfg->nspecs + 1, sizeof(*p->probe_of_spec));
	p->uses_override = calloc(img->hdr->nprobes + 1, sizeof(*p->uses_override));
	p->intervals = calloc(img->hdr->nprobes + 1, sizeof(*p->intervals));
	if (!p->probe_of_spec || !p->uses_override || !p->intervals)
		return agent_fail(f, 1, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < img->hdr->nprobes; i++) {
		const struct lang_probe_desc *d = &img->probes[i];

		p->uses_override[i] = code_has_override(img, d);
		if (d->kind == LANG_P_INTERVAL) {
			if (!d->interval_ns)
				return agent_fail(f, 2, -EINVAL, "an interval of 0");
			p->intervals[p->nintervals++] =
				(struct interval){ p, i, d->interval_ns, 0, false };
			continue;
		}
		if (d->kind == LANG_P_USDT) {
			int n = spec < cfg->nspecs ? cfg->specs[spec].sites : 0;

			if (!usdt_sites_match(cfg, spec, n))
				return agent_fail(f, 1, -EPROTO, "the session's probes are not the "
						  "program's");
			while (n--)
				p->probe_of_spec[spec++] = i;
			continue;
		}
		if (d->kind != LANG_P_UPROBE && d->kind != LANG_P_URETPROBE)
			continue;
		if (spec < cfg->nspecs && cfg->specs[spec].sites) {
			/* a C++ name: the functions the tool found for it */
			int n = cfg->specs[spec].sites;

			if (!cxx_specs_match(cfg, spec, n, img, d))
				return agent_fail(f, 1, -EPROTO, "the session's probes are not the "
						  "program's");
			while (n--)
				p->probe_of_spec[spec++] = i;
			continue;
		}
		if (spec >= cfg->nspecs || !spec_matches(&cfg->specs[spec], img, d))
			return agent_fail(f, 1, -EPROTO, "the session's probes are not the "
					  "program's");
		p->probe_of_spec[spec++] = i;
	}
	if (spec != cfg->nspecs)
		return agent_fail(f, 1, -EPROTO, "the session's probes are not the program's");
	for (int i = 0; i < cfg->nspecs; i++)
		resolve_short_name(&cfg->specs[i]);
	return 0;
}

static int load_image(struct agent_prog *p, struct agent_session *s, struct agent_fail *f)
{
	const struct session_config *cfg = &s->cfg;
	char why[256];
	int rc;

	p->image = malloc(cfg->image_len);
	if (!p->image)
		return agent_fail(f, 1, -ENOMEM, "out of memory");
	memcpy(p->image, (char *)s->map.base + kps_off_image(), cfg->image_len);
	rc = lang_image_load(&p->img, p->image, cfg->image_len, why, sizeof(why));
	if (rc)
		return agent_fail(f, 1, rc, "the program does not verify: %s", why);
	if (p->img.region_size != cfg->region_len)
		return agent_fail(f, 1, -EPROTO, "the program's maps are not the size the "
				  "session gave them");
	p->region = (char *)s->map.base + kps_off_region(cfg->image_len);
	for (unsigned int m = 0; m < p->img.hdr->nmaps; m++)
		p->shards |= p->img.map_shard_off[m] != 0 || p->img.map_tval_off[m] != 0;
	return 0;
}

static void prog_at_exit(void);

int agent_prog_start(struct agent_session *s, struct agent_fail *f)
{
	static bool at_exit_set;
	struct agent_prog *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return agent_fail(f, 1, -ENOMEM, "out of memory");
	p->session = s;
	p->stop_fd[0] = p->stop_fd[1] = -1;
	p->gen = s->gen;
	p->pid = getpid();
	p->uid = (uint64_t)getuid();
	p->gid = (uint64_t)getgid();
	p->cpid = p->pid;	/* with a command, the process it runs */
	agent_numa_load();
	p->start_ns = mono_ns();
	p->start_tsc = kp_cycles();
	/* The tick length the session measured against the clock. */
	p->tick_q32 = s->time_tsc ? s->tick_ns_q32 : 0;
	s->prog = p;
	rc = load_image(p, s, f);
	if (!rc)
		rc = map_specs(p, &s->cfg, f);
	if (!rc && !at_exit_set)
		at_exit_set = atexit(prog_at_exit) == 0;
	return rc;
}

int agent_prog_armed(struct agent_session *s, struct agent_fail *f)
{
	struct agent_prog *p = s->prog;

	run_special(p, LANG_P_BEGIN);
	return start_intervals(p, f);
}

void agent_prog_end(struct agent_session *s)
{
	struct agent_prog *p = s->prog;

	if (!p || p->ended)
		return;
	stop_intervals(p);
	p->ended = true;
	run_special(p, LANG_P_END);
}

void agent_prog_free(struct agent_session *s)
{
	struct agent_prog *p = s->prog;

	if (!p)
		return;
	stop_intervals(p);
	free(p->image);
	free(p->probe_of_spec);
	free(p->uses_override);
	agent_prog_free_points(p);
	free(p->intervals);
	free(p);
	s->prog = NULL;
}

/* The process exits with the session on: END runs while the session
 * memory is there to take what it prints and the tool reads the maps. */
static void prog_at_exit(void)
{
	struct agent_session *s;

	agent_own_begin();
	pthread_mutex_lock(&agent_lock);
	s = agent_session;
	/* Not in a forked child: END is the session's, run once. */
	if (s && s->prog && !s->follower && s->prog->pid == getpid())
		agent_prog_end(s);
	pthread_mutex_unlock(&agent_lock);
	agent_own_end();
}

bool agent_prog_has_special(const struct agent_prog *p)
{
	for (uint32_t i = 0; i < p->img.hdr->nprobes; i++)
		if (p->img.probes[i].kind == LANG_P_BEGIN || p->img.probes[i].kind == LANG_P_END ||
		    p->img.probes[i].kind == LANG_P_INTERVAL)
			return true;
	return false;
}
