/* kprobe watch in the target: one watchpoint probe on the session's
 * variable instead of probes.
 *
 * Each access is counted or traced under a descriptor of the instruction
 * that made it.  The hit path cannot look symbols up (locks, allocation),
 * so it only claims an entry of a lock-free table for the instruction's
 * address and publishes an unnamed descriptor on its first access; a thread
 * of the agent names it soon after: the instruction that ends where the
 * thread resumed, found by decoding forward from the function's start
 * (decoding backwards from an address is ambiguous on x86-64). */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kprobes/symbols.h>

#include "agent.h"
#include "agent_register.h"
#include "kp_arch.h"

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Accessing instructions told apart; accesses by more land on the
 * variable's own descriptor. */
#define WATCH_IPS 1024
/* How long a thread waits for another that claimed the same new entry to
 * publish its descriptor (a few instructions, unless preempted). */
#define PUBLISH_SPIN 100000
#define NAME_PERIOD_NS 2000000

struct watch_ip {
	uint64_t ip;			/* 0: free */
	uint32_t desc_plus1;		/* 0: not published yet */
};

struct agent_watch {
	struct wprobe wp;
	struct agent_session *s;
	unsigned int len;
	pid_t pid;
	uint32_t var_desc;
	uint64_t last;			/* the value after the last access */
	pthread_t namer;
	bool namer_started;
	int stop;
	struct watch_ip ips[WATCH_IPS];
};

/* ---- the hit path ---- */

static uint64_t read_value(const void *addr, unsigned int len)
{
	switch (len) {
	case 1: return *(const volatile uint8_t *)addr;
	case 2: return *(const volatile uint16_t *)addr;
	case 4: return *(const volatile uint32_t *)addr;
	default: return *(const volatile uint64_t *)addr;
	}
}

static uint32_t publish(struct agent_watch *w, struct watch_ip *e, uint64_t ip)
{
	struct kps_header *h = w->s->map.hdr;
	uint64_t id = __atomic_fetch_add(&h->ndesc, 1, __ATOMIC_RELAXED);
	struct kps_desc *d;

	if (id >= KPS_MAX_PROBES) {
		__atomic_store_n(&e->desc_plus1, w->var_desc + 1, __ATOMIC_RELEASE);
		return w->var_desc;
	}
	d = &w->s->map.desc[id];
	d->addr = ip;
	d->missed = 0;
	d->pid = (uint32_t)w->pid;
	d->spec = 0;
	d->kind = DESC_WATCH;
	d->name[0] = '\0';
	d->object[0] = '\0';
	d->args[0] = '\0';
	__atomic_store_n(&d->ready, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&e->desc_plus1, (uint32_t)id + 1, __ATOMIC_RELEASE);
	return (uint32_t)id;
}

static uint32_t wait_published(const struct agent_watch *w, const struct watch_ip *e)
{
	for (int i = 0; i < PUBLISH_SPIN; i++) {
		uint32_t d = __atomic_load_n(&e->desc_plus1, __ATOMIC_ACQUIRE);

		if (d)
			return d - 1;
		kp_cpu_relax();
	}
	return w->var_desc;
}

/* The descriptor of the instruction that ends at ip. */
static uint32_t ip_desc(struct agent_watch *w, uint64_t ip)
{
	unsigned int h = (unsigned int)((ip * 0x9e3779b97f4a7c15ull) >> 54) & (WATCH_IPS - 1);

	for (int n = 0; n < WATCH_IPS; n++, h = (h + 1) & (WATCH_IPS - 1)) {
		struct watch_ip *e = &w->ips[h];
		uint64_t cur = __atomic_load_n(&e->ip, __ATOMIC_ACQUIRE);

		if (!cur && __atomic_compare_exchange_n(&e->ip, &cur, ip, false, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
			return publish(w, e, ip);
		if (cur == ip)
			return wait_published(w, e);
	}
	return w->var_desc;
}

static void on_access(struct wprobe *wp, struct pt_regs *regs)
{
	struct agent_watch *w = container_of(wp, struct agent_watch, wp);
	uint64_t now, old;

	if (agent_on_own_thread())
		return;		/* the agent's, not the program's */
	now = read_value(wp->addr, w->len);
	old = __atomic_exchange_n(&w->last, now, __ATOMIC_ACQ_REL);
	agent_watch_record(w->s, ip_desc(w, instruction_pointer(regs)), old, now, regs);
}

/* ---- naming the accessing instructions ---- */

/* "func+0xOFF" of the instruction ending at ip, decoded from the start of
 * its function, and its address; "func+0xOFF>" (the next instruction) and
 * 0 when the decoding does not end there.  That instruction starts at the
 * last instruction boundary before ip, when ip is one. */
static uintptr_t name_instruction(uint64_t ip, char *name, size_t len, char *object,
				  size_t olen)
{
	struct kprobes_sym fn = { .sz = sizeof(fn) };
	uintptr_t at, start = 0;
	size_t span;

	object[0] = '\0';
	if (ip < 2 || kprobes_sym_lookup_addr(ip - 1, &fn) || !fn.addr) {
		snprintf(name, len, "0x%lx>", (unsigned long)ip);
		return 0;
	}
	/* Through ip itself, which the function's last instruction may end
	 * at; decoding never needs the bytes from ip on. */
	span = ip - fn.addr + 1;
	if (!kprobes_insn_boundary(fn.addr, span, ip))
		for (at = ip - 1; at >= fn.addr && !start; at--)
			if (!kprobes_insn_boundary(fn.addr, span, at))
				start = at;
	if (start)
		snprintf(name, len, "%s+0x%lx", fn.name ? fn.name : "?",
			 (unsigned long)(start - fn.addr));
	else
		snprintf(name, len, "%s+0x%lx>", fn.name ? fn.name : "?",
			 (unsigned long)(ip - fn.addr));
	/* The object as count names it: the program's own too. */
	if (fn.basename)
		snprintf(object, olen, "%s", fn.basename);
	return start;
}

/* Names every published, unnamed descriptor: name[0] last, so a reader
 * never takes a half-written name for a whole one. */
static void name_pending(struct agent_watch *w)
{
	uint64_t n = __atomic_load_n(&w->s->map.hdr->ndesc, __ATOMIC_ACQUIRE);

	for (uint64_t id = 0; id < n && id < KPS_MAX_PROBES; id++) {
		struct kps_desc *d = &w->s->map.desc[id];
		char name[sizeof(d->name)], object[sizeof(d->object)];

		if (id == w->var_desc || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE) ||
		    d->kind != DESC_WATCH || d->name[0])
			continue;
		uintptr_t start = name_instruction(d->addr, name, sizeof(name), object,
						   sizeof(object));

		if (start)
			d->addr = start;
		memcpy(d->object, object, sizeof(object));
		memcpy(d->name + 1, name + 1, sizeof(name) - 1);
		__atomic_store_n(&d->name[0], name[0], __ATOMIC_RELEASE);
	}
}

static void *namer_main(void *arg)
{
	struct agent_watch *w = arg;
	struct timespec period = { 0, NAME_PERIOD_NS };

	agent_mark_own_thread();
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		name_pending(w);
		nanosleep(&period, NULL);
	}
	return NULL;
}

/* A program that exits names what its last accesses left unnamed. */
static struct agent_watch *live_watch;

__attribute__((destructor)) static void name_at_exit(void)
{
	struct agent_watch *w = __atomic_load_n(&live_watch, __ATOMIC_ACQUIRE);

	if (w)
		name_pending(w);
}

/* ---- start and stop ---- */

static int init_variable_desc(struct agent_watch *w, const struct probe_spec *spec,
			      struct agent_fail *f)
{
	uint64_t id = __atomic_fetch_add(&w->s->map.hdr->ndesc, 1, __ATOMIC_RELAXED);
	struct kps_desc *d;

	if (id >= KPS_MAX_PROBES)
		return agent_fail(f, 1, -E2BIG, "no descriptor left for the variable");
	w->var_desc = (uint32_t)id;
	d = &w->s->map.desc[id];
	memset(d, 0, sizeof(*d));
	d->pid = (uint32_t)w->pid;
	d->kind = DESC_WATCH;
	if (spec->kind == SPEC_ADDRESS)
		snprintf(d->name, sizeof(d->name), "0x%lx", (unsigned long)spec->address);
	else if (spec->offset)
		snprintf(d->name, sizeof(d->name), "%.100s+0x%lx", spec->symbol, spec->offset);
	else
		snprintf(d->name, sizeof(d->name), "%.110s", spec->symbol);
	snprintf(d->object, sizeof(d->object), "%.63s", spec->object);
	return 0;
}

/* A loaded object's segment holding addr, and the start of its first
 * executable segment (the library names objects by those). */
struct segment_query {
	uintptr_t addr;
	uintptr_t exec;
};

static int object_holding(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct segment_query *q = arg;
	uintptr_t exec = 0;
	bool holds = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD)
			continue;
		holds |= q->addr >= lo && q->addr - lo < ph->p_memsz;
		if ((ph->p_flags & PF_X) && !exec)
			exec = lo;
	}
	if (!holds)
		return 0;
	q->exec = exec;
	return 1;
}

/* The object of a variable named without one: the object holding it,
 * named as count names a function's (before the descriptor is ready). */
static void name_variable_object(struct kps_desc *d)
{
	struct segment_query q = { .addr = (uintptr_t)d->addr };
	struct kprobes_sym sym = { .sz = sizeof(sym) };

	if (d->object[0] || !dl_iterate_phdr(object_holding, &q) || !q.exec)
		return;
	if (!kprobes_sym_object_of(q.exec, &sym) && sym.basename)
		snprintf(d->object, sizeof(d->object), "%s", sym.basename);
}

/* The variable as the command line gave it (without the arguments the
 * trace adds to its spec). */
static void describe_variable(const struct probe_spec *spec, char *buf, size_t len)
{
	if (spec->kind == SPEC_ADDRESS)
		snprintf(buf, len, "0x%lx", (unsigned long)spec->address);
	else if (spec->offset)
		snprintf(buf, len, "%s%s%s+0x%lx", spec->object, spec->object[0] ? ":" : "",
			 spec->symbol, spec->offset);
	else
		snprintf(buf, len, "%s%s%s", spec->object, spec->object[0] ? ":" : "", spec->symbol);
}

static int register_failure(const struct probe_spec *spec, int rc, struct agent_fail *f)
{
	char what[sizeof(spec->object) + sizeof(spec->symbol) + 24];

	describe_variable(spec, what, sizeof(what));
	switch (rc) {
	case -ENOENT:
		return agent_fail(f, 2, rc, "no variable '%s' in process %d", what, getpid());
	case -EINVAL:
		return agent_fail(f, 2, rc, "cannot watch '%s': the length must be 1, 2, 4 or 8 "
				  "and the address aligned to it", what);
	case -ENOSPC:
		return agent_fail(f, 1, rc, "no free debug register in process %d (at most "
				  "four watchpoints, the program's own included)", getpid());
	case -EACCES:
		return agent_fail(f, 1, rc, "perf events are not permitted here "
				  "(kernel.perf_event_paranoid)");
	case -EOPNOTSUPP:
		return agent_fail(f, 1, rc, "no hardware breakpoints with SIGTRAP on this "
				  "system (Linux 5.13 or later with debug registers)");
	default:
		return agent_fail(f, 1, rc, "cannot watch '%s': %s", what, strerror(-rc));
	}
}

int agent_watch_start(struct agent_session *s, struct agent_fail *f)
{
	const struct probe_spec *spec = &s->cfg.specs[0];
	struct agent_watch *w = calloc(1, sizeof(*w));
	char symbol[sizeof(spec->object) + sizeof(spec->symbol) + 2];
	int rc;

	if (!w)
		return agent_fail(f, 1, -ENOMEM, "out of memory");
	w->s = s;
	w->len = s->cfg.watch_len;
	w->pid = getpid();
	rc = init_variable_desc(w, spec, f);
	if (rc)
		goto fail;
	w->wp.len = w->len;
	w->wp.type = s->cfg.watch_rw ? WPROBE_RW : WPROBE_W;
	w->wp.handler = on_access;
	if (spec->kind == SPEC_ADDRESS) {
		w->wp.addr = (void *)spec->address;
	} else {
		snprintf(symbol, sizeof(symbol), "%s%s%s", spec->object, spec->object[0] ? ":" : "",
			 spec->symbol);
		w->wp.symbol_name = symbol;
		w->wp.offset = (unsigned int)spec->offset;
	}
	rc = register_wprobe(&w->wp);
	w->wp.symbol_name = NULL;
	if (rc) {
		rc = register_failure(spec, rc, f);
		goto fail;
	}
	/* The value before the first access: that access's "old" (read
	 * here, the agent's own access is not reported). */
	__atomic_store_n(&w->last, read_value(w->wp.addr, w->len), __ATOMIC_RELEASE);
	s->map.desc[w->var_desc].addr = (uint64_t)(uintptr_t)w->wp.addr;
	name_variable_object(&s->map.desc[w->var_desc]);
	__atomic_store_n(&s->map.desc[w->var_desc].ready, 1, __ATOMIC_RELEASE);
	w->namer_started = !pthread_create(&w->namer, NULL, namer_main, w);
	s->watch = w;
	__atomic_store_n(&live_watch, w, __ATOMIC_RELEASE);
	return 0;
fail:
	free(w);
	return rc;
}

void agent_watch_stop(struct agent_session *s)
{
	struct agent_watch *w = s->watch;

	if (!w)
		return;
	unregister_wprobe(&w->wp);
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	if (w->namer_started)
		pthread_join(w->namer, NULL);
	name_pending(w);
	__atomic_store_n(&live_watch, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&s->map.desc[w->var_desc].missed, w->wp.nmissed, __ATOMIC_RELAXED);
	s->watch = NULL;
	free(w);
}
