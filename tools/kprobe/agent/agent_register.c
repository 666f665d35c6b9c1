/* Registering a session's probe points with libkprobes: all or none, in
 * batches (big globs report progress between them), the jumps put in at
 * once when the session starts. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_register.h"

/* Probes registered per library call: big globs report progress between. */
#define BATCH 256
/* Return instances per probe: recursion and many threads need more than
 * the default; huge globs get fewer to bound memory. */
#define MAXACTIVE_FEW	256
#define MAXACTIVE_MANY	32
/* record keeps every return it can: deep recursion needs many instances
 * (an entry that finds none is recorded without its return). */
#define MAXACTIVE_RECORD_FEW	4096
#define MAXACTIVE_RECORD_MANY	256

int agent_fail(struct agent_fail *f, int kind, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->msg, f->len, fmt, ap);
	va_end(ap);
	f->kind = kind;
	return rc;
}

static int probes_reserve(struct agent_session *s, int more)
{
	if (s->nprobes + more > s->cap) {
		int cap = s->nprobes + more + 64;
		struct agent_probe **v = realloc(s->probes, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->probes = v;
		s->cap = cap;
	}
	return 0;
}

static enum arg_type tp_arg_type(const struct kprobes_tp_arg *a)
{
	switch (kprobes_tp_arg_kind(a)) {
	case 's': return ARG_S64;
	case 'u': return ARG_U64;
	case 'S': return ARG_STRING;
	case 'f': return ARG_F64;
	default: return ARG_X64;
	}
}

/* A tracepoint traced without ARGs: every argument it declares, by name
 * and as its type says, also written to the descriptor for the CLI. */
static void tp_declared_args(struct agent_probe *ap, struct kps_desc *d)
{
	size_t at = 0;

	ap->nargs = 0;
	for (unsigned int i = 0; i < ap->tp->nargs && i < SPEC_MAX_ARGS; i++) {
		struct spec_arg *a = &ap->args[ap->nargs++];
		int n;

		snprintf(a->name, sizeof(a->name), "%s", ap->tp->args[i].name);
		a->src = (uint8_t)i;
		a->type = (uint8_t)tp_arg_type(&ap->tp->args[i]);
		n = snprintf(d->args + at, sizeof(d->args) - at, "%s%s=arg%u:%s", at ? " " : "",
			     a->name, i + 1, spec_type_name(a->type));
		if (n < 0 || (size_t)n >= sizeof(d->args) - at) {
			/* Too long to describe: fewer arguments. */
			d->args[at] = '\0';
			ap->nargs--;
			break;
		}
		at += (size_t)n;
	}
}

/* A return whose light handler reads nothing at the return is taken at
 * the function's exit sites when each can take a jump: no return address
 * replaced, no instance, and the processor's return-stack predictor stays
 * right (docs/design.md section 18).  A site may be the entry itself (a
 * function that calls nothing and branches nowhere): the entry's probe,
 * registered first, runs first there, so a record's entry still comes
 * before its return. */
static void probe_exits(struct agent_probe *ap, const struct resolved *r)
{
	kprobe_pre_handler_t handler = agent_exit_handler(ap);
	unsigned long v[AGENT_MAX_EXITS];
	int n;

	if (!handler || ap->session->cfg.return_probes)
		return;
	/* Returns only, no tail call: a tail call returns when the function
	 * it calls does, as a return probe sees it, and not at all when that
	 * one never returns (exec, exit, longjmp): counting it at its jump
	 * would count returns that never happen, and a record or a program
	 * would time and nest it wrongly. */
	n = kprobes_exit_sites(r->addr, v, AGENT_MAX_EXITS,
			       KPROBES_EXITS_JUMP | KPROBES_EXITS_RETURNS);
	if (n <= 0)
		return;
	ap->exits = calloc((size_t)n, sizeof(*ap->exits));
	if (!ap->exits)
		return;		/* a return probe then */
	for (int i = 0; i < n; i++) {
		ap->exits[i].kp.addr = (kprobe_opcode_t *)v[i];
		ap->exits[i].kp.pre_handler = handler;
		ap->exits[i].ap = ap;
	}
	ap->nexits = (uint8_t)n;
}

/* A probe for one resolved point, with its descriptor (not yet ready). */
static struct agent_probe *probe_new(struct agent_session *s, const struct resolved *r,
				     int maxactive)
{
	const struct probe_spec *spec = &s->cfg.specs[r->spec];
	struct agent_probe *ap = calloc(1, sizeof(*ap));
	uint64_t id = __atomic_fetch_add(&s->map.hdr->ndesc, 1, __ATOMIC_RELAXED);
	struct kps_desc *d;

	if (!ap)
		return NULL;
	if (id >= KPS_MAX_PROBES) {
		free(ap);
		errno = E2BIG;
		return NULL;
	}
	ap->session = s;
	ap->gen = s->gen;
	ap->desc = (uint32_t)id;
	ap->spec = (uint16_t)r->spec;
	ap->is_return = spec->is_return;
	ap->nargs = (uint8_t)spec->nargs;
	ap->semaphore = r->semaphore;
	memcpy(ap->args, spec->args, sizeof(ap->args));
	d = &s->map.desc[id];
	d->args[0] = '\0';
	if (spec->kind == SPEC_TRACEPOINT) {
		ap->tp = (struct kprobes_tracepoint *)r->addr;
		if (!spec->nargs && s->cfg.action == ACT_TRACE)
			tp_declared_args(ap, d);
	}
	for (int i = 0; i < ap->nargs; i++)
		ap->nstrings += ap->args[i].type == ARG_STRING;
	if (ap->is_return) {
		ap->u.rp.kp.addr = (kprobe_opcode_t *)r->addr;
		ap->u.rp.maxactive = maxactive;
	} else {
		ap->u.kp.addr = (kprobe_opcode_t *)r->addr;
	}
	agent_set_handlers(ap);
	probe_exits(ap, r);
	d->addr = r->addr;
	d->pid = (uint32_t)getpid();
	d->spec = (uint16_t)r->spec;
	d->kind = ap->tp ? DESC_TRACEPOINT : ap->is_return ? DESC_RETURN : DESC_ENTRY;
	snprintf(d->name, sizeof(d->name), "%s", r->name);
	snprintf(d->object, sizeof(d->object), "%s", r->object);
	/* Ready before registration: the first hit may come at once.  A probe
	 * that fails to register takes it back (no event can name it). */
	__atomic_store_n(&d->ready, 1, __ATOMIC_RELEASE);
	return ap;
}

/* Pointers to the kprobes of a batch: its entries, or the exit sites of
 * its returns (AGENT_MAX_EXITS each at most). */
#define BATCH_KPROBES (BATCH * AGENT_MAX_EXITS)

/* Returns, by return probes or at their exit sites. */
static int register_returns(struct agent_probe **v, int n)
{
	struct kretprobe *rps[BATCH];
	struct kprobe *kps[BATCH_KPROBES];
	int nr = 0, nk = 0, rc = 0;

	for (int i = 0; i < n; i++) {
		if (!v[i]->nexits)
			rps[nr++] = &v[i]->u.rp;
		for (int k = 0; k < v[i]->nexits; k++)
			kps[nk++] = &v[i]->exits[k].kp;
	}
	if (nk)
		rc = register_kprobes(kps, nk);
	if (!rc && nr) {
		rc = register_kretprobes(rps, nr);
		if (rc && nk)
			unregister_kprobes(kps, nk);
	}
	return rc;
}

static int register_some(struct agent_probe **v, int n, bool returns)
{
	if (returns)
		return register_returns(v, n);
	struct kprobe *kps[BATCH];
	struct jprobe *jps[BATCH];
	int nj = 0, rc;

	for (int i = 0; i < n; i++) {
		kps[i] = &v[i]->u.kp;
		if (v[i]->vector_args)
			jps[nj++] = &v[i]->jp;
	}
	rc = register_kprobes(kps, n);
	/* The jprobes after their kprobes, whose pre_handlers run first. */
	if (!rc && nj) {
		rc = register_jprobes(jps, nj);
		if (rc)
			unregister_kprobes(kps, n);
	}
	return rc;
}

/* An SDT semaphore counts the tracers that want the probe: the program
 * computes the probe's arguments only while it is non-zero.  It lives in
 * the object's writable .probes section; one that is gone (unloaded) is
 * left alone. */
static void semaphore_raise(struct agent_probe *ap)
{
	if (!ap->semaphore || ap->sem_raised)
		return;
	__atomic_fetch_add((uint16_t *)ap->semaphore, 1, __ATOMIC_RELAXED);
	ap->sem_raised = true;
}

static void semaphore_lower(struct agent_probe *ap)
{
	if (!ap->sem_raised)
		return;
	ap->sem_raised = false;
	if (!(ap->u.kp.flags & KPROBE_FLAG_GONE))
		__atomic_fetch_sub((uint16_t *)ap->semaphore, 1, __ATOMIC_RELAXED);
}

/* Unregisters v[0..n) (NULL slots skipped), returns first. */
void agent_unregister_probes(struct agent_probe **v, int n)
{
	struct kretprobe *rps[BATCH];
	struct kprobe *kps[BATCH_KPROBES];
	struct jprobe *jps[BATCH];

	for (int done = 0; done < n;) {
		int nr = 0, nk = 0, nj = 0, i;

		for (i = done; i < n && nr < BATCH && nk <= BATCH_KPROBES - AGENT_MAX_EXITS &&
			       nj < BATCH; i++) {
			if (!v[i])
				continue;
			semaphore_lower(v[i]);
			if (v[i]->tp) {
				kprobes_tracepoint_detach(v[i]->tp, agent_tp_handler, v[i]);
			} else if (v[i]->is_return && v[i]->nexits) {
				for (int k = 0; k < v[i]->nexits; k++)
					kps[nk++] = &v[i]->exits[k].kp;
			} else if (v[i]->is_return) {
				rps[nr++] = &v[i]->u.rp;
			} else {
				kps[nk++] = &v[i]->u.kp;
				if (v[i]->vector_args)
					jps[nj++] = &v[i]->jp;
			}
		}
		/* Returns first: they were registered last; jprobes before
		 * the kprobes that name their hits. */
		if (nr)
			unregister_kretprobes(rps, nr);
		if (nj)
			unregister_jprobes(jps, nj);
		if (nk)
			unregister_kprobes(kps, nk);
		done = i;
	}
}

static const char *register_error(int rc, const struct kps_desc *d)
{
	const char *why;

	/* libkprobes knows which places it refuses for their own sake. */
	if (rc == -EINVAL && (why = kprobes_probe_refusal(d->addr, d->kind == DESC_RETURN)))
		return why;
	switch (rc) {
	case -EILSEQ:
		return "not an instruction boundary";
	case -EINVAL:
		return "cannot be probed (blacklisted, not code, or an unprobeable instruction)";
	case -ENOENT:
		return "unknown symbol";
	case -EEXIST:
		return "already probed";
	default:
		return strerror(-rc);
	}
}

/* Frees a probe that is not (or no longer) registered, taking back its
 * descriptor. */
static void probe_drop(struct agent_probe *ap)
{
	__atomic_store_n(&ap->session->map.desc[ap->desc].ready, 0, __ATOMIC_RELEASE);
	free(ap->exits);
	free(ap);
}

/* A glob's match that cannot be probed: the CLI says how many, and why
 * for the first. */
static void note_skipped_why(struct agent_session *s, const char *name, const char *why)
{
	struct kps_header *h = s->map.hdr;

	if (__atomic_fetch_add(&h->skipped, 1, __ATOMIC_RELAXED) == 0)
		snprintf(h->skip_example, sizeof(h->skip_example), "%s: %s", name, why);
}

/* A glob's match that libkprobes refused. */
static void note_skipped(struct agent_session *s, const struct kps_desc *d, int rc)
{
	note_skipped_why(s, d->name, register_error(rc, d));
}

/* Registers v[0..n) (at most BATCH, all of one kind), halving a batch
 * that fails until the culprits are found: a glob's match that cannot be
 * probed is dropped (freed, its slot set to NULL, counted in the header);
 * anything else is fatal.  Returns 0, or -errno with nothing of v[0..n)
 * left registered. */
static int register_split(struct agent_session *s, struct agent_probe **v, int n,
			  bool returns, struct agent_fail *f)
{
	struct kps_desc *d;
	int rc;

	/* No slot of v[0..n) is NULL yet: drops happen below this attempt. */
	rc = register_some(v, n, returns);
	if (!rc)
		return 0;
	if (n > 1) {
		rc = register_split(s, v, n / 2, returns, f);
		if (rc)
			return rc;
		rc = register_split(s, v + n / 2, n - n / 2, returns, f);
		if (rc)
			agent_unregister_probes(v, n / 2);
		return rc;
	}
	if (v[0]->nexits) {
		/* the exit sites refused: the return probe, as without them */
		free(v[0]->exits);
		v[0]->exits = NULL;
		v[0]->nexits = 0;
		return register_split(s, v, 1, returns, f);
	}
	d = &s->map.desc[v[0]->desc];
	if (spec_is_glob(&s->cfg.specs[d->spec]) || s->follower) {
		note_skipped(s, d, rc);
		probe_drop(v[0]);
		v[0] = NULL;
		return 0;
	}
	return agent_fail(f, 2, rc, "cannot probe '%s'%s%s: %s", d->name,
			  d->object[0] ? " in " : "", d->object, register_error(rc, d));
}

/* Registers v[0..n) (all of one kind) in batches, all or none: on failure
 * everything registered here is removed and v's probes are freed.
 * Returns the number kept, moved to the front of v, or -errno. */
static int register_all(struct agent_session *s, struct agent_probe **v, int n,
			bool returns, struct agent_fail *f)
{
	int kept = 0;

	for (int at = 0; at < n; at += BATCH) {
		int len = n - at < BATCH ? n - at : BATCH;
		int rc = register_split(s, v + at, len, returns, f);

		if (rc) {
			agent_unregister_probes(v, kept);
			for (int j = 0; j < kept; j++)
				probe_drop(v[j]);
			for (int j = at; j < n; j++)
				if (v[j])
					probe_drop(v[j]);
			return rc;
		}
		for (int j = at; j < at + len; j++)
			if (v[j])
				v[kept++] = v[j];
		__atomic_store_n(&s->map.hdr->progress_done,
				 s->map.hdr->progress_done + (uint64_t)len, __ATOMIC_RELAXED);
	}
	return kept;
}

/* Attaches the agent's handler to v[0..n) (tracepoints), all or none; on
 * failure frees them all. */
static int attach_tracepoints(struct agent_probe **v, int n, struct agent_fail *f)
{
	for (int i = 0; i < n; i++) {
		const struct kps_desc *d = &v[i]->session->map.desc[v[i]->desc];
		int rc = kprobes_tracepoint_attach(v[i]->tp, agent_tp_handler, v[i]);

		if (!rc)
			continue;
		for (int j = 0; j < i; j++)
			kprobes_tracepoint_detach(v[j]->tp, agent_tp_handler, v[j]);
		agent_fail(f, 1, rc, "cannot attach to tracepoint '%s' in %s: %s", d->name,
			   d->object, strerror(-rc));
		for (int j = 0; j < n; j++)
			probe_drop(v[j]);
		return rc;
	}
	return 0;
}

/* Registers the resolved points: entries, returns, then tracepoints, all
 * or none. */
int agent_register_points(struct agent_session *s, const struct resolve_list *pts,
			   struct agent_fail *f)
{
	struct agent_probe **entries = calloc((size_t)pts->n + 1, sizeof(*entries));
	struct agent_probe **returns = calloc((size_t)pts->n + 1, sizeof(*returns));
	struct agent_probe **tps = calloc((size_t)pts->n + 1, sizeof(*tps));
	int ne = 0, nr = 0, nt = 0, rc = 0, kept_e, kept_r;
	int maxactive = pts->n > 64 ? MAXACTIVE_MANY : MAXACTIVE_FEW;

	if (s->cfg.action == ACT_RECORD)
		maxactive = pts->n > 64 ? MAXACTIVE_RECORD_MANY : MAXACTIVE_RECORD_FEW;

	if (!entries || !returns || !tps || probes_reserve(s, pts->n)) {
		rc = agent_fail(f, 1, -ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < pts->n; i++) {
		struct agent_probe *ap;

		/* Matches refused when resolved are counted, never registered. */
		if (pts->v[i].refused) {
			note_skipped_why(s, pts->v[i].name, pts->v[i].why);
			__atomic_fetch_add(&s->map.hdr->progress_done, 1, __ATOMIC_RELAXED);
			continue;
		}
		ap = probe_new(s, &pts->v[i], maxactive);

		if (!ap) {
			rc = agent_fail(f, errno == E2BIG ? 2 : 1, -errno,
					errno == E2BIG ? "too many probe points (at most %d)" :
							 "out of memory", KPS_MAX_PROBES);
			goto free_new;
		}
		if (ap->tp)
			tps[nt++] = ap;
		else if (ap->is_return)
			returns[nr++] = ap;
		else
			entries[ne++] = ap;
	}
	__atomic_fetch_add(&s->map.hdr->progress_total, (uint64_t)pts->n, __ATOMIC_RELAXED);
	/* On failure register_all() has freed its own array. */
	kept_e = register_all(s, entries, ne, false, f);
	if (kept_e < 0) {
		rc = kept_e;
		for (int i = 0; i < nr; i++)
			probe_drop(returns[i]);
		goto out;
	}
	kept_r = register_all(s, returns, nr, true, f);
	if (kept_r < 0) {
		rc = kept_r;
		agent_unregister_probes(entries, kept_e);
		for (int i = 0; i < kept_e; i++)
			probe_drop(entries[i]);
		for (int i = 0; i < nt; i++)
			probe_drop(tps[i]);
		goto out;
	}
	rc = attach_tracepoints(tps, nt, f);
	if (rc) {
		agent_unregister_probes(entries, kept_e);
		agent_unregister_probes(returns, kept_r);
		for (int i = 0; i < kept_e; i++)
			probe_drop(entries[i]);
		for (int i = 0; i < kept_r; i++)
			probe_drop(returns[i]);
		goto out;
	}
	for (int i = 0; i < kept_e; i++) {
		semaphore_raise(entries[i]);
		s->probes[s->nprobes++] = entries[i];
	}
	for (int i = 0; i < kept_r; i++)
		s->probes[s->nprobes++] = returns[i];
	for (int i = 0; i < nt; i++)
		s->probes[s->nprobes++] = tps[i];
	goto out;
free_new:
	for (int i = 0; i < ne; i++)
		probe_drop(entries[i]);
	for (int i = 0; i < nr; i++)
		probe_drop(returns[i]);
	for (int i = 0; i < nt; i++)
		probe_drop(tps[i]);
out:
	free(entries);
	free(returns);
	free(tps);
	return rc;
}

/* Puts the jumps in now rather than after the optimizer's delay: a command
 * must start with its probes optimized, and an attached process's threads
 * are held still only while we arm.  What a thread was in the way of the
 * library's optimizer thread takes later. */
void agent_optimize_now(void)
{
	kprobes_optimize_now();
}

/* Registers the session's first probes with the enabled knob off, then arms
 * them all at once: registering a batch runs code (ELF reading, malloc)
 * that earlier batches of a big glob would otherwise trap in. */
int agent_register_first(struct agent_session *s, const struct resolve_list *pts,
			     struct agent_fail *f)
{
	bool enabled = kprobes_enabled();
	int rc;

	if (enabled)
		kprobes_set_enabled(false);
	rc = agent_register_points(s, pts, f);
	if (enabled)
		kprobes_set_enabled(true);
	if (!rc)
		agent_optimize_now();
	return rc;
}

