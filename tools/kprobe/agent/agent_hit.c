/* The hit path: what a probe does in the target thread that hit it.
 *
 * These handlers run inside libkprobes' SIGTRAP handler or an optimized
 * detour, so they are async-signal-safe: no locks, no allocation, no stdio,
 * no system call except on a thread's first hit (claiming its ring) and for
 * reading :string arguments without faulting. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <kprobes/nofault_inline.h>

#include "agent_hit.h"

/* The calling thread's ring in the session of generation tls_gen. */
__thread struct hit_thread agent_tls_hit TLS = { .ring = -1 };
#define tls_ring (agent_tls_hit.ring)
#define tls_gen (agent_tls_hit.gen)
#define tls_pid (agent_tls_hit.pid)
#define tls_agent_depth (agent_tls_hit.agent_depth)
#define quiet agent_hit_quiet
bool agent_hit_quiet;
long agent_tid_offset = AGENT_TID_UNKNOWN;
pid_t agent_hit_pid;

/* The architecture's system call instruction, inline (kp_arch.h). */
static long raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	return kp_raw_syscall6(n, a, b, c, d, e, f);
}

/* Agent code from here: the depth first, then the count fast path off (a
 * signal handler between the two is the program's, and counts). */
void agent_mark_own_thread(void)
{
	tls_agent_depth = 1 << 20;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	agent_tls_hit.count_gen = 0;
}

void agent_own_begin(void)
{
	tls_agent_depth++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	agent_tls_hit.count_gen = 0;
}

void agent_own_end(void)
{
	tls_agent_depth--;
}

bool agent_on_own_thread(void)
{
	return tls_agent_depth > 0;
}

void agent_hit_after_fork(bool follow)
{
	tls_ring = -1;
	tls_gen = 0;
	tls_pid = 0;
	agent_tls_hit.count_gen = 0;
	agent_hit_pid = (pid_t)raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (!follow)
		__atomic_store_n(&quiet, true, __ATOMIC_RELAXED);
}

static void *check_tid_offsets(void *arg)
{
	long *cand = arg;
	pid_t tid = (pid_t)raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	const char *tp = __builtin_thread_pointer();

	agent_mark_own_thread();
	for (int i = 0; cand[i] != AGENT_TID_UNKNOWN; i++)
		if (cand[i] != -1 && *(const pid_t *)(tp + cand[i]) != tid)
			cand[i] = -1;
	return NULL;
}

/* Finds where the thread library keeps a thread's id.  glibc hands that
 * word to the kernel (set_tid_address, to be cleared when the thread
 * exits), and the kernel tells where it is; where it does not
 * (PR_GET_TID_ADDRESS needs CONFIG_CHECKPOINT_RESTORE): the words of this
 * thread's control block that hold its id, less those that do not hold a
 * second thread's.  The control block is above the thread pointer on
 * x86-64 and below it on arm64 (TLS variants II and I): both sides are
 * looked at. */
void agent_hit_init(void)
{
	const char *tp = __builtin_thread_pointer();
	pid_t tid = (pid_t)raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	uintptr_t tid_addr = 0;
	long cand[9];
	int n = 0;
	pthread_t t;

	agent_hit_pid = (pid_t)raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (!raw_syscall(SYS_prctl, PR_GET_TID_ADDRESS, (long)&tid_addr, 0, 0, 0, 0) &&
	    tid_addr + 4096 > (uintptr_t)tp && tid_addr < (uintptr_t)tp + 4096 &&
	    *(const pid_t *)tid_addr == tid) {
		agent_tid_offset = (long)(tid_addr - (uintptr_t)tp);
		return;
	}
	/* glibc's struct pthread is larger than this; its tid is well inside. */
	for (long off = 16; off < 1024 && n < 8; off += 4) {
		if (*(const pid_t *)(tp + off) == tid)
			cand[n++] = off;
		if (KP_TCB_BELOW_TP && n < 8 && *(const pid_t *)(tp - off) == tid)
			cand[n++] = -off;
	}
	cand[n] = AGENT_TID_UNKNOWN;
	if (!n || pthread_create(&t, NULL, check_tid_offsets, cand))
		return;
	pthread_join(t, NULL);
	for (int i = 0; i < n; i++)
		if (cand[i] != -1) {
			agent_tid_offset = cand[i];
			return;
		}
}

bool agent_hit_light_ok(void)
{
	return agent_tid_offset != AGENT_TID_UNKNOWN;
}

static bool owner_is_dead(uint64_t owner)
{
	return raw_syscall(SYS_tgkill, (long)(owner >> 32), (long)(uint32_t)owner, 0, 0, 0, 0) ==
	       -ESRCH;
}

/* Ring i for me, if it is free (pass 0) or its owner died and all its
 * events were read (pass 1). */
static bool try_claim(struct agent_session *s, int i, uint64_t me, int pass)
{
	struct kps_ring *r = &s->map.rings[i];
	uint64_t owner = __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);

	if (pass == 0 ? owner != 0 :
	    (owner == 0 || __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) !=
				   __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ||
	     !owner_is_dead(owner)))
		return false;
	if (!__atomic_compare_exchange_n(&r->owner, &owner, me, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&r->used, 1, __ATOMIC_RELEASE);
	raise_rings_hint(s, i);
	return true;
}

/* Rings of exited threads looked at before a fresh one is taken: a program
 * that keeps starting threads reuses their rings instead of touching ever
 * more memory, and a thread's first hit makes a bounded number of calls. */
#define REUSE_TRIES 16

/* Claims a ring: a few of exited threads first, then a free one, then any
 * of an exited thread.  Only on a thread's first hit in a session. */
static int claim_ring(struct agent_session *s)
{
	static unsigned int reuse_from;
	pid_t pid = (pid_t)raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
	pid_t tid = (pid_t)raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	uint64_t me = (uint64_t)pid << 32 | (uint32_t)tid;
	uint32_t claimed = __atomic_load_n(&s->map.hdr->rings_hint, __ATOMIC_RELAXED);

	tls_pid = pid;
	if (claimed > s->nrings)
		claimed = s->nrings;
	if (claimed) {
		unsigned int from = __atomic_fetch_add(&reuse_from, REUSE_TRIES, __ATOMIC_RELAXED);

		for (unsigned int k = 0; k < REUSE_TRIES && k < claimed; k++)
			if (try_claim(s, (int)((from + k) % claimed), me, 1))
				return (int)((from + k) % claimed);
	}
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < (int)s->nrings; i++)
			if (try_claim(s, i, me, pass))
				return i;
	return -1;
}

/* libkprobes' own background thread (the jump optimizer) calls libc
 * functions a glob may have probed; its hits are not the program's. */
static bool is_library_thread(void)
{
	static const char name[] = "kprobes-opt";
	char comm[32];
	long fd = raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/thread-self/comm",
			      O_RDONLY | O_CLOEXEC, 0, 0, 0);
	long n;

	if (fd < 0)
		return false;
	n = raw_syscall(SYS_read, fd, (long)comm, sizeof(comm) - 1, 0, 0, 0);
	raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
	if (n < (long)sizeof(name) - 1)
		return false;
	for (unsigned int i = 0; i < sizeof(name) - 1; i++)
		if (comm[i] != name[i])
			return false;
	return true;
}

/* A thread's first hit in a session: who is it, and which ring is its. */
static void first_hit(struct agent_session *s)
{
	tls_gen = s->gen;
	if (is_library_thread()) {
		agent_mark_own_thread();
		tls_ring = -1;
		return;
	}
	tls_ring = claim_ring(s);
}

/* The caller's ring index, -1 when every ring is taken. */
static inline int thread_ring(struct agent_session *s)
{
	if (__builtin_expect(tls_gen != s->gen, 0))
		first_hit(s);
	return tls_ring;
}

/* Hits that are not the program's, or that nobody wants. */
static inline bool silent(struct agent_session *s)
{
	if (__builtin_expect(tls_gen != s->gen, 0))
		first_hit(s);
	return tls_agent_depth > 0 || __atomic_load_n(&quiet, __ATOMIC_RELAXED);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void hist_add(struct agent_session *s, int ring, uint64_t ns)
{
	uint64_t *c;

	if (ring >= 0) {
		c = &s->map.hist[(size_t)ring * KPS_BUCKETS + kps_bucket(ns)];
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	} else {
		c = &s->map.hist[(size_t)KPS_RINGS * KPS_BUCKETS + kps_bucket(ns)];
		__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
	}
}

/* Copies up to KPS_STR_MAX bytes of a NUL-terminated string at addr into
 * dst without faulting (kprobes_read_nofault: no system call); returns its
 * length or KPS_STR_FAULT.  The page holding addr is read first, the next
 * one only when the string goes on into it, so a string that ends just
 * before an unreadable page is still read whole. */
static uint16_t read_string(uintptr_t addr, unsigned char *dst)
{
	uintptr_t page_end = (addr | 4095) + 1;
	size_t first = page_end - addr < KPS_STR_MAX ? page_end - addr : KPS_STR_MAX;
	size_t n = first, i;

	if (addr < 4096 || kprobes_read_nofault(dst, (const void *)addr, first))
		return KPS_STR_FAULT;
	for (i = 0; i < first; i++)
		if (!dst[i])
			return (uint16_t)i;
	if (first < KPS_STR_MAX &&
	    !kprobes_read_nofault(dst + first, (const void *)page_end, KPS_STR_MAX - first))
		n = KPS_STR_MAX;
	for (; i < n; i++)
		if (!dst[i])
			return (uint16_t)i;
	return (uint16_t)n;
}

/* Writes one event: nfixed leading values (the entry time of a return),
 * then the probe's arguments from vals[]. */
static void emit(struct agent_probe *ap, uint16_t type, uint64_t time_ns,
		 const uint64_t *fixed, int nfixed, const uint64_t *vals, uint32_t faults,
		 const uint64_t *stack, int nstack)
{
	struct agent_session *s = ap->session;
	int ring = thread_ring(s);
	uint32_t nvals = (uint32_t)nfixed + ap->nargs;
	uint32_t max = (uint32_t)(sizeof(struct kps_event) + 8 * nvals +
				  ap->nstrings * (2 + KPS_STR_MAX) + 7 + 8 * nstack) & ~7u;
	struct kps_event *ev;
	unsigned char *p;
	uint64_t head;
	uint32_t len;

	if (ring < 0) {
		count_lost(s, ring);
		return;
	}
	ev = ring_reserve(s, ring, max, &head);
	if (!ev) {
		count_lost(s, ring);
		return;
	}
	ev->type = type;
	ev->nvals = (uint16_t)nvals;
	ev->desc = ap->desc;
	ev->reserved = faults;
	ev->time_ns = time_ns;
	for (int i = 0; i < nfixed; i++)
		ev->vals[i] = fixed[i];
	for (int i = 0; i < ap->nargs; i++)
		ev->vals[nfixed + i] = vals[i];
	p = (unsigned char *)&ev->vals[nvals];
	for (int i = 0; i < ap->nargs; i++) {
		uint16_t n;

		if (ap->args[i].type != ARG_STRING)
			continue;
		n = faults & (1u << i) ? KPS_STR_FAULT : read_string((uintptr_t)vals[i], p + 2);
		p[0] = (unsigned char)n;
		p[1] = (unsigned char)(n >> 8);
		p += 2 + (n == KPS_STR_FAULT ? 0 : n);
	}
	len = (uint32_t)(p - (unsigned char *)ev + 7) & ~7u;
	/* The stack ends the record: its last nstack words (shm.h). */
	for (int i = 0; i < nstack; i++)
		((uint64_t *)((unsigned char *)ev + len))[i] = stack[i];
	len += 8 * (uint32_t)nstack;
	ev->reserved = faults | (uint32_t)nstack << KPS_STACK_SHIFT;
	ev->size = len;
	ring_commit(s, ring, head, len);
}

/* ---- fetch plans: program variables the tool located with DWARF ----
 * The tool compiled each variable into a few steps (spec.h): registers,
 * constants, arithmetic, loads.  Loads are plain loads whose fault the
 * library catches (kprobes_read_nofault), so a stale pointer makes the value a
 * fault instead of a crash. */

/* pt_regs offsets of DWARF registers 0..KP_DWARF_PC (kp_arch.h: the
 * architecture's numbering, the last one the pc). */
static const uint16_t dwarf_reg_offsets[KP_DWARF_PC + 1] = { KP_DWARF_REG_OFFSETS };

/* kprobes_read_nofault(): for 1, 2, 4 or 8 bytes one load the library's
 * fault handler catches, no system call (unless the program blocked the
 * fault signals: then process_vm_readv, made without libc, so that the
 * handler touches no vector register).  Zero-extended: little-endian. */
static bool load_nofault(uint64_t addr, uint8_t size, uint64_t *out)
{
	uint64_t v = 0;

	if (addr < 4096 || size > sizeof(v))
		return false;
	if (kprobes_read_nofault(&v, (const void *)(uintptr_t)addr, size))
		return false;
	*out = v;
	return true;
}

static uint64_t binop(uint64_t x, uint64_t y, int64_t op)
{
	if (op == BINOP_ADD)
		return x + y;
	if (op == BINOP_SUB)
		return x - y;
	if (op == BINOP_MUL)
		return x * y;
	if (op == BINOP_AND)
		return x & y;
	if (op == BINOP_OR)
		return x | y;
	if (op == BINOP_XOR)
		return x ^ y;
	if (op == BINOP_SHL)
		return y < 64 ? x << y : 0;
	if (op == BINOP_SHR)
		return y < 64 ? x >> y : 0;
	return (uint64_t)((int64_t)x >> (y < 64 ? y : 63));
}

/* Runs an argument's fetch plan; false when a load faulted or no case
 * applied (spec.h).  if-chains,
 * not a switch: a jump table is an indirect branch the library cannot
 * follow when it checks what a handler touches. */
static bool run_plan_stack(const struct pt_regs *regs, const struct spec_arg *a, uint64_t *out);

static inline uint64_t dwarf_reg(const struct pt_regs *regs, uint8_t reg)
{
	return *(const uint64_t *)((const char *)regs + dwarf_reg_offsets[reg <= KP_DWARF_PC ? reg : KP_DWARF_PC]);
}

/* A plan as it is, for the shapes the chain does not have and for
 * threads where the caught load cannot be used: out of the way of the
 * common case, which then needs no stack frame. */
static __attribute__((noinline)) bool run_plan_slow(const struct pt_regs *regs,
						     const struct spec_arg *a, uint64_t *out)
{
	const struct fetch_chain *c = &a->chain;
	uint64_t v;

	if (!c->ok)
		return run_plan_stack(regs, a, out);
	v = dwarf_reg(regs, c->reg);
	for (int i = 0; i < c->nhops && i < SPEC_MAX_HOPS; i++)
		if (!load_nofault(v + (uint64_t)(int64_t)c->add[i], c->size[i], &v))
			return false;
	*out = v + (uint64_t)(int64_t)c->last;
	return true;
}

/* The compiled shape (spec_plan_compile()): the register straight from
 * pt_regs, then one caught load per pointer hop, nothing interpreted;
 * whether the caught load may be used is asked once for all of them. */
static inline __attribute__((always_inline)) bool run_plan(const struct pt_regs *regs,
							    const struct spec_arg *a,
							    uint64_t *out)
{
	const struct fetch_chain *c = &a->chain;
	uint64_t v;
	int n = c->nhops;

	/* No call here: false until the thread's mask was read, which the
	 * slow path's kprobes_read_nofault() does. */
	if (__builtin_expect(!c->ok || (n && !kprobes_nofault_inline_ok()), 0))
		return run_plan_slow(regs, a, out);
	v = dwarf_reg(regs, c->reg);
	for (int i = 0; i < n && i < SPEC_MAX_HOPS; i++) {
		uint64_t addr = v + (uint64_t)(int64_t)c->add[i];

		if (addr < 4096 || kprobes_load_nofault_inline(addr, c->size[i], &v))
			return false;
	}
	*out = v + (uint64_t)(int64_t)c->last;
	return true;
}

static bool run_plan_stack(const struct pt_regs *regs, const struct spec_arg *a, uint64_t *out)
{
	/* spec.c checked that the plan stays within the stack and ends
	 * with one value. */
	uint64_t st[8];
	int top = -1;
	bool taken = false;

	for (int i = 0; i < a->nops && i < SPEC_MAX_OPS; i++) {
		const struct fetch_op *op = &a->ops[i];
		uint64_t b;

		if (op->kind == FETCH_CASE) {
			/* A case taken ends at the next one; one not taken
			 * is skipped, the key staying on top. */
			if (!taken && st[top & 7] == (uint64_t)op->k) {
				top--;
				taken = true;
				continue;
			}
			while (i + 1 < a->nops && i + 1 < SPEC_MAX_OPS &&
			       a->ops[i + 1].kind != FETCH_JOIN &&
			       (taken || a->ops[i + 1].kind != FETCH_CASE))
				i++;
		} else if (op->kind == FETCH_JOIN) {
			if (!taken)
				return false;	/* no call site matched */
		} else if (op->kind == FETCH_REG) {
			st[++top & 7] = *(const uint64_t *)((const char *)regs +
				dwarf_reg_offsets[op->reg <= KP_DWARF_PC ? op->reg : KP_DWARF_PC]);
		} else if (op->kind == FETCH_VREG) {
			st[++top & 7] = 0;
			if (kprobes_vector_reg(regs, op->reg, &st[top & 7], 8))
				return false;
		} else if (op->kind == FETCH_CONST) {
			st[++top & 7] = (uint64_t)op->k;
		} else if (op->kind == FETCH_ADD) {
			st[top & 7] += (uint64_t)op->k;
		} else if (op->kind == FETCH_LOAD) {
			if (!load_nofault(st[top & 7], op->size,
					  &st[top & 7]))
				return false;
		} else if (op->kind == FETCH_RET_ADDR) {
			/* A function with a return probe has the probe's
			 * stub in its return slot: the library knows what it
			 * stands for (one TLS load and a walk of the thread's
			 * pending returns, no system call). */
			uint64_t slot = st[top & 7];

			if (!load_nofault(slot, 8, &st[top & 7]))
				return false;
			st[top & 7] = kretprobe_find_ret_addr(st[top & 7], slot);
		} else {
			b = st[top-- & 7];
			st[top & 7] = binop(st[top & 7], b, op->k);
		}
	}
	*out = st[top & 7];
	return true;
}

bool agent_run_plan(const struct pt_regs *regs, const struct spec_arg *a, uint64_t *out)
{
	return run_plan(regs, a, out);
}

/* The values of a probe's arguments at an entry hit; bit i of the result
 * set when argument i could not be read. */
static inline uint32_t entry_values(const struct agent_probe *ap, const struct pt_regs *regs,
				    uint64_t *vals)
{
	uint32_t faults = 0;

	for (int i = 0; i < ap->nargs; i++) {
		uint8_t src = ap->args[i].src;

		if (__builtin_expect(src < ARG_SRC_PLAN, 1)) {
			vals[i] = arg_value(regs, src);
		} else {
			vals[i] = 0;
			if (src != ARG_SRC_PLAN || !run_plan(regs, &ap->args[i], &vals[i]))
				faults |= 1u << i;
		}
	}
	return faults;
}

/* A time stamp and a duration.  With the TSC, no libc call is made (the
 * clock call would make every handler count as touching vector state). */
static inline __attribute__((always_inline)) uint64_t stamp(bool tsc)
{
	return tsc ? kp_cycles() : now_ns();
}

static inline __attribute__((always_inline)) uint64_t stamp_to_ns(const struct agent_session *s,
								   uint64_t delta, bool tsc)
{
	return tsc ? (uint64_t)(((unsigned __int128)delta * s->tick_ns_q32) >> 32) : delta;
}

/* These two are called from the program handlers, which libkprobes must
 * be able to prove vector-free: no vector code here either. */
__attribute__((target("general-regs-only"))) bool agent_hit_silent(struct agent_session *s)
{
	return silent(s);
}

__attribute__((target("general-regs-only"))) int agent_emit_record(struct agent_session *s,
								    uint16_t type, uint16_t nvals,
								    uint32_t desc, const void *data,
								    uint32_t len)
{
	struct kps_event *ev;
	uint64_t head;
	uint32_t size;
	int ring;

	if (!s || __atomic_load_n(&quiet, __ATOMIC_RELAXED))
		return -1;
	ring = thread_ring(s);
	size = (uint32_t)(sizeof(*ev) + len + 7) & ~7u;
	ev = ring < 0 ? NULL : ring_reserve(s, ring, size, &head);
	if (!ev) {
		count_lost(s, ring);
		return -1;
	}
	ev->type = type;
	ev->nvals = nvals;
	ev->desc = desc;
	ev->reserved = len;
	if (s->time_tsc) {
		ev->time_ns = kp_cycles();
	} else {
		/* the system call, not the vDSO: no call through the PLT */
		struct timespec ts = { 0, 0 };

		raw_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
		ev->time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	for (uint32_t i = 0; i < len; i++)
		((unsigned char *)ev->vals)[i] = ((const unsigned char *)data)[i];
	ev->size = size;
	ring_commit(s, ring, head, size);
	return (int)len;
}

/* One line of a loaded module (kprobe_printk) into the calling thread's
 * ring.  The module's handlers run while the session does: its exit runs
 * before the session memory goes. */
int agent_emit_text(const char *text, uint32_t len)
{
	struct agent_session *s = __atomic_load_n(&agent_session, __ATOMIC_ACQUIRE);

	if (len > KPS_TEXT_MAX)
		len = KPS_TEXT_MAX;
	return agent_emit_record(s, EV_TEXT, 0, 0, text, len);
}

static inline __attribute__((always_inline)) int on_entry(struct kprobe *p, struct pt_regs *regs,
							  bool tsc)
{
	struct agent_probe *ap = container_of(p, struct agent_probe, u.kp);
	uint64_t vals[SPEC_MAX_ARGS];
	uint32_t faults;

	if (silent(ap->session))
		return 0;
	if (ap->session->cfg.action == ACT_COUNT) {
		counter_add(ap->session, thread_ring(ap->session), ap->desc);
		return 0;
	}
	faults = entry_values(ap, regs, vals);
	emit(ap, EV_ENTRY, stamp(tsc), NULL, 0, vals, faults, NULL, 0);
	return 0;
}

void agent_watch_record(struct agent_session *s, uint32_t desc, uint64_t old_value,
			uint64_t new_value, const struct pt_regs *regs)
{
	uint64_t ips[KPS_STACK_MAX];
	struct kps_event *ev;
	uint64_t head;
	uint32_t len;
	int ring, n;

	if (silent(s))
		return;
	ring = thread_ring(s);
	if (s->cfg.action == ACT_COUNT) {
		counter_add(s, ring, desc);
		return;
	}
	n = agent_stack_capture(s, regs, ips);
	len = (uint32_t)(sizeof(struct kps_event) + 2 * 8 + 8 * n);
	ev = ring < 0 ? NULL : ring_reserve(s, ring, len, &head);
	if (!ev) {
		count_lost(s, ring);
		return;
	}
	ev->type = EV_ENTRY;
	ev->nvals = 2;
	ev->desc = desc;
	ev->reserved = (uint32_t)n << KPS_STACK_SHIFT;
	ev->time_ns = stamp(s->time_tsc);
	ev->vals[0] = old_value;
	ev->vals[1] = new_value;
	for (int i = 0; i < n; i++)
		ev->vals[2 + i] = ips[i];
	ev->size = len;
	ring_commit(s, ring, head, len);
}

/* What a return instance remembers from the entry. */
struct return_data {
	uint64_t entry_time;		/* stamp() */
	uint64_t faults;		/* entry_values() */
	uint64_t args[SPEC_MAX_ARGS];
};

size_t agent_return_data_size(const struct agent_probe *ap)
{
	return offsetof(struct return_data, args) + sizeof(uint64_t) * ap->nargs;
}

static inline __attribute__((always_inline)) int on_return_entry(struct kretprobe_instance *ri,
								 struct pt_regs *regs, bool tsc)
{
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct return_data *d = (struct return_data *)ri->data;

	/* Non-zero: no return instance, so the return costs nothing. */
	if (silent(ap->session))
		return 1;
	if (ap->session->cfg.action == ACT_COUNT)
		return 0;
	/* retval's slot is filled at the return. */
	d->faults = entry_values(ap, regs, d->args);
	d->entry_time = stamp(tsc);
	return 0;
}

static inline __attribute__((always_inline)) int on_return(struct kretprobe_instance *ri,
							   struct pt_regs *regs, bool tsc,
							   uint64_t xmm0)
{
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct return_data *d = (struct return_data *)ri->data;
	struct agent_session *s = ap->session;
	uint64_t t, vals[SPEC_MAX_ARGS];
	int ring;

	if (silent(s))
		return 0;
	switch (s->cfg.action) {
	case ACT_COUNT:
		counter_add(s, thread_ring(s), ap->desc);
		return 0;
	case ACT_LATENCY:
		t = stamp(tsc);
		ring = thread_ring(s);
		hist_add(s, ring, stamp_to_ns(s, t - d->entry_time, tsc));
		counter_add(s, ring, ap->desc);
		return 0;
	case ACT_TRACE:
	case ACT_RECORD:
		t = stamp(tsc);
		for (int i = 0; i < ap->nargs; i++)
			vals[i] = ap->args[i].src != ARG_SRC_RETVAL ? d->args[i] :
				  spec_type_is_float(ap->args[i].type) ? xmm0 :
				  regs_return_value(regs);
		/* A recorded return pairs with its entry by the call stack. */
		if (s->cfg.action == ACT_RECORD)
			emit(ap, EV_RETURN, t, NULL, 0, vals, (uint32_t)d->faults, NULL, 0);
		else
			emit(ap, EV_RETURN, t, &d->entry_time, 1, vals, (uint32_t)d->faults, NULL,
			     0);
		return 0;
	case ACT_LOAD:		/* a module's session has no probes of ours */
	case ACT_RUN:		/* a program's have handlers of their own */
		return 0;
	}
	return 0;
}

static int entry_tsc(struct kprobe *p, struct pt_regs *regs)
{
	return on_entry(p, regs, true);
}

static int entry_clock(struct kprobe *p, struct pt_regs *regs)
{
	return on_entry(p, regs, false);
}

static int return_entry_tsc(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return_entry(ri, regs, true);
}

static int return_entry_clock(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return_entry(ri, regs, false);
}

static int return_tsc(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return(ri, regs, true, 0);
}

static int return_clock(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return(ri, regs, false, 0);
}

/* retval:f64: the return value is in xmm0.  libkprobes' return trampoline
 * and dispatcher use general registers only and never trap, so xmm0 still
 * holds it when the handler is called; these entry points copy it before
 * any compiled code runs and pass it on as a third argument. */
__attribute__((used)) static int return_f64_tsc_c(struct kretprobe_instance *ri,
						  struct pt_regs *regs, uint64_t xmm0)
{
	return on_return(ri, regs, true, xmm0);
}

__attribute__((used)) static int return_f64_clock_c(struct kretprobe_instance *ri,
						    struct pt_regs *regs, uint64_t xmm0)
{
	return on_return(ri, regs, false, xmm0);
}

int agent_return_f64_tsc(struct kretprobe_instance *ri, struct pt_regs *regs);
int agent_return_f64_clock(struct kretprobe_instance *ri, struct pt_regs *regs);
__asm__(".pushsection .text\n"
	KP_F64_RETURN_ENTRY(agent_return_f64_tsc, return_f64_tsc_c)
	KP_F64_RETURN_ENTRY(agent_return_f64_clock, return_f64_clock_c)
	".popsection\n");

/* ---- argN:f64 at entry ----
 * The floating-point arguments are in xmm0..xmm7, which a pre_handler
 * cannot see (in the breakpoint path they are in the signal frame, not in
 * the registers).  A jprobe's entry can: libkprobes starts it with the
 * function's own registers, vector state included.  The probe's kprobe,
 * whose pre_handler runs first at the same hit, names the probe for it. */
static __thread struct agent_probe *tls_vector_probe TLS;

static int vector_mark(struct kprobe *p, struct pt_regs *regs)
{
	struct agent_probe *ap = container_of(p, struct agent_probe, u.kp);

	(void)regs;
	tls_vector_probe = silent(ap->session) ? NULL : ap;
	return 0;
}

/* With the prototype every function's arguments fit: the SysV ABI gives
 * the integer ones rdi..r9 and the floating-point ones xmm0..xmm7, each
 * class numbered on its own. */
static void vector_entry(uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
			 uint64_t a6, double x0, double x1, double x2, double x3, double x4,
			 double x5, double x6, double x7)
{
	const uint64_t ints[SPEC_MAX_INT_ARG] = { a1, a2, a3, a4, a5, a6 };
	const double fps[SPEC_MAX_FP_ARG] = { x0, x1, x2, x3, x4, x5, x6, x7 };
	struct agent_probe *ap = tls_vector_probe;
	uint64_t vals[SPEC_MAX_ARGS];

	tls_vector_probe = NULL;
	if (ap && (ap->session->cfg.action == ACT_TRACE || ap->session->cfg.action == ACT_RECORD)) {
		uint32_t faults = 0;

		for (int i = 0; i < ap->nargs; i++) {
			uint8_t src = ap->args[i].src;

			/* Variables are read from a pt_regs, which a jprobe
			 * entry has not: the tool never combines them. */
			if (src > ARG_SRC_RETVAL) {
				vals[i] = 0;
				faults |= 1u << i;
			} else if (ap->args[i].type == ARG_F64)
				__builtin_memcpy(&vals[i], &fps[src], sizeof(vals[i]));
			else
				vals[i] = ints[src < SPEC_MAX_INT_ARG ? src : 0];
		}
		emit(ap, EV_ENTRY, stamp(ap->session->time_tsc), NULL, 0, vals, faults, NULL, 0);
	}
	jprobe_return();
}

/* Whether the probe reads floating-point arguments at entry (then it needs
 * its jprobe, registered with it). */
static bool reads_vector_args(const struct agent_probe *ap)
{
	if (ap->tp || ap->is_return)
		return false;
	for (int i = 0; i < ap->nargs; i++)
		if (ap->args[i].type == ARG_F64 && ap->args[i].src < ARG_SRC_RETVAL)
			return true;
	return false;
}

static bool returns_f64(const struct agent_probe *ap)
{
	for (int i = 0; i < ap->nargs; i++)
		if (ap->args[i].src == ARG_SRC_RETVAL && spec_type_is_float(ap->args[i].type))
			return true;
	return false;
}

/* A tracepoint argument as a 64-bit value of its spec type: integers
 * declared narrower than 64 bits are sign-extended when signed, a float
 * widened to double. */
static uint64_t tp_value(const struct kprobes_tracepoint *tp, const uint64_t *args,
			 const struct spec_arg *a)
{
	unsigned int size = tp->args[a->src].size;
	uint64_t v = args[a->src];

	if (a->type == ARG_F64 && size == 4) {
		float f;
		double d;

		__builtin_memcpy(&f, &v, 4);
		d = f;
		__builtin_memcpy(&v, &d, 8);
	} else if (a->type == ARG_S64 && size < 8) {
		unsigned int shift = 64 - 8 * size;

		v = (uint64_t)((int64_t)(v << shift) >> shift);
	}
	return v;
}

void agent_tp_handler(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	struct agent_probe *ap = data;
	uint64_t vals[SPEC_MAX_ARGS];

	if (silent(ap->session))
		return;
	if (ap->session->cfg.action != ACT_TRACE && ap->session->cfg.action != ACT_RECORD) {
		counter_add(ap->session, thread_ring(ap->session), ap->desc);
		return;
	}
	for (int i = 0; i < ap->nargs; i++)
		vals[i] = tp_value(tp, args, &ap->args[i]);
	emit(ap, EV_ENTRY, stamp(ap->session->time_tsc), NULL, 0, vals, 0, NULL, 0);
}

/* ---- with the hit's stack: trace --stack, count --stacks ----
 * Handlers of their own, so that those without stacks stay as cheap as
 * the analysis of what they touch can prove them. */

/* Counts a hit at desc under its stack (count --stacks); at, when not 0,
 * the probed address (a breakpoint's pt_regs are past it). */
static inline __attribute__((always_inline)) void count_stack(struct agent_session *s, int ring,
							     uint32_t desc,
							     const struct pt_regs *regs,
							     uint64_t at)
{
	counter_add(s, ring, desc);
	if (!agent_stack_count_hit(s, ring, desc, regs, at))
		count_lost(s, ring);
}

static inline __attribute__((always_inline)) int on_entry_stack(struct kprobe *p,
								 struct pt_regs *regs, bool tsc)
{
	struct agent_probe *ap = container_of(p, struct agent_probe, u.kp);
	struct agent_session *s = ap->session;
	uint64_t vals[SPEC_MAX_ARGS], ips[KPS_STACK_MAX];
	uint32_t faults;
	int n;

	if (silent(s))
		return 0;
	if (s->cfg.action == ACT_COUNT) {
		count_stack(s, thread_ring(s), ap->desc, regs, (uint64_t)(uintptr_t)ap->u.kp.addr);
		return 0;
	}
	faults = entry_values(ap, regs, vals);
	n = agent_stack_capture(s, regs, ips);
	/* the probed address, where a breakpoint's pt_regs are past it */
	if (n)
		ips[0] = (uint64_t)(uintptr_t)ap->u.kp.addr;
	emit(ap, EV_ENTRY, stamp(tsc), NULL, 0, vals, faults, ips, n);
	return 0;
}

/* At the return: the stack of the caller the function returns to. */
static inline __attribute__((always_inline)) int on_return_stack(struct kretprobe_instance *ri,
								 struct pt_regs *regs, bool tsc)
{
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct return_data *d = (struct return_data *)ri->data;
	struct agent_session *s = ap->session;
	uint64_t t, vals[SPEC_MAX_ARGS], ips[KPS_STACK_MAX];
	uint32_t faults = (uint32_t)d->faults;
	int n;

	if (silent(s))
		return 0;
	if (s->cfg.action == ACT_COUNT) {
		count_stack(s, thread_ring(s), ap->desc, regs, 0);
		return 0;
	}
	t = stamp(tsc);
	for (int i = 0; i < ap->nargs; i++) {
		vals[i] = ap->args[i].src != ARG_SRC_RETVAL ? d->args[i] : regs_return_value(regs);
		/* A floating-point return value: xmm0 as the function left
		 * it, which the return probe's flag keeps for this handler. */
		if (ap->args[i].src == ARG_SRC_RETVAL && spec_type_is_float(ap->args[i].type) &&
		    kprobes_vector_reg(regs, 0, &vals[i], sizeof(vals[i])))
			faults |= 1u << i;
	}
	n = agent_stack_capture(s, regs, ips);
	emit(ap, EV_RETURN, t, &d->entry_time, 1, vals, faults, ips, n);
	return 0;
}

/* One of each per clock, as the handlers without stacks: with the TSC
 * they make no call that the handler analysis cannot follow. */
static int entry_stack_tsc(struct kprobe *p, struct pt_regs *regs)
{
	return on_entry_stack(p, regs, true);
}

static int entry_stack_clock(struct kprobe *p, struct pt_regs *regs)
{
	return on_entry_stack(p, regs, false);
}

static int return_stack_tsc(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return_stack(ri, regs, true);
}

static int return_stack_clock(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return on_return_stack(ri, regs, false);
}

/* count --stacks with the light thread state (agent_hit_light.c): no
 * system call and no store through %fs on the way to the unwinder, which
 * itself makes neither, so the handler analysis finds only the reads of
 * pt_regs, and an optimized probe keeps neither errno nor the vector
 * registers for it.  A return probe has no entry handler: nothing of the
 * entry is needed. */
static int count_stack_entry(struct kprobe *p, struct pt_regs *regs)
{
	struct agent_probe *ap = container_of(p, struct agent_probe, u.kp);
	struct hit_thread *t = light_thread(ap->session);

	if (t)
		count_stack(ap->session, t->ring, ap->desc, regs,
			    (uint64_t)(uintptr_t)ap->u.kp.addr);
	return 0;
}

static int count_stack_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct agent_probe *ap = container_of(ri->rp, struct agent_probe, u.rp);
	struct hit_thread *t = light_thread(ap->session);

	if (t)
		count_stack(ap->session, t->ring, ap->desc, regs, 0);
	return 0;
}

/* Whether the probe records stacks with the handlers above: trace and
 * count sessions with stacks, for probes whose handlers see pt_regs (not
 * tracepoints, nor the jprobe path of floating-point arguments; a
 * floating-point retval where the library keeps the vector registers
 * for a return handler, KP_RETURN_VECTOR_REGS). */
static bool with_stack_handlers(const struct agent_probe *ap)
{
	const struct session_config *cfg = &ap->session->cfg;

	return cfg->stack_depth && (cfg->action == ACT_TRACE || cfg->action == ACT_COUNT) &&
	       !ap->tp && !reads_vector_args(ap) && (KP_RETURN_VECTOR_REGS || !returns_f64(ap));
}

/* Whether a plan of the probe reads a vector register: the detour must
 * then keep the vector state for kprobes_vector_reg(). */
static bool plans_read_vregs(const struct agent_probe *ap)
{
	for (int i = 0; i < ap->nargs; i++)
		for (int k = 0; ap->args[i].src == ARG_SRC_PLAN && k < ap->args[i].nops; k++)
			if (ap->args[i].ops[k].kind == FETCH_VREG)
				return true;
	return false;
}

void agent_set_handlers(struct agent_probe *ap)
{
	bool tsc = ap->session->time_tsc;

	if (!ap->is_return && plans_read_vregs(ap))
		ap->u.kp.flags |= KPROBE_FLAG_VECTOR_REGS;

	if (ap->session->cfg.action == ACT_RUN) {
		agent_prog_set_handlers(ap);
		return;
	}
	if (with_stack_handlers(ap) && ap->session->cfg.action == ACT_COUNT &&
	    agent_hit_light_ok()) {
		if (ap->is_return) {
			ap->u.rp.entry_handler = NULL;
			ap->u.rp.handler = count_stack_return;
			ap->u.rp.data_size = 0;
		} else {
			ap->u.kp.pre_handler = count_stack_entry;
		}
		return;
	}
	if (with_stack_handlers(ap)) {
		if (ap->is_return) {
			if (returns_f64(ap))
				ap->u.rp.kp.flags |= KPROBE_FLAG_VECTOR_REGS;
			ap->u.rp.entry_handler = tsc ? return_entry_tsc : return_entry_clock;
			ap->u.rp.handler = tsc ? return_stack_tsc : return_stack_clock;
			ap->u.rp.data_size = agent_return_data_size(ap);
		} else {
			ap->u.kp.pre_handler = tsc ? entry_stack_tsc : entry_stack_clock;
		}
		return;
	}
	if (agent_set_light_handlers(ap))
		return;
	if (ap->is_return) {
		ap->u.rp.entry_handler = tsc ? return_entry_tsc : return_entry_clock;
		if (returns_f64(ap))
			ap->u.rp.handler = tsc ? agent_return_f64_tsc : agent_return_f64_clock;
		else
			ap->u.rp.handler = tsc ? return_tsc : return_clock;
		ap->u.rp.data_size = agent_return_data_size(ap);
	} else if (reads_vector_args(ap)) {
		ap->vector_args = true;
		ap->u.kp.pre_handler = vector_mark;
		ap->jp.kp.addr = ap->u.kp.addr;
		ap->jp.entry = (void *)vector_entry;
	} else {
		ap->u.kp.pre_handler = tsc ? entry_tsc : entry_clock;
	}
}
