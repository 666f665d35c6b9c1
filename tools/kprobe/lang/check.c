/* The checker: resolves probes, builtins, variables and maps, infers
 * types, and reports errors with bpftrace's wording where bpftrace has
 * one.  Maps are global and typed by their first assignment (a first pass
 * over every probe collects them, so a read may come before the write in
 * the source); scratch variables belong to their probe block. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_arch.h"
#include "lang_int.h"

struct checker {
	struct prog *p;
	struct probe *pr;
	int probe_no;
	int kind;		/* of the block's probes when all agree, else 0 */
	int has_ret, has_entry, has_special;
	int collect;		/* first pass: maps only, no errors for reads */
	int loop_depth;
};

static const struct lang_type T_I64 = { LANG_T_INT, 1, 8 };
static const struct lang_type T_U64 = { LANG_T_INT, 0, 8 };
static const struct lang_type T_S64 = { LANG_T_INT, 1, 8 };

static const struct tuple_shape *shape_of(const struct prog *p, const struct lang_type *t)
{
	return t->kind == LANG_T_TUPLE && t->is_signed < p->nshapes ? &p->shapes[t->is_signed] : NULL;
}

static void type_name(const struct lang_type *t, char *out, size_t n);

/* "(int64,string[2])", as bpftrace names a tuple type. */
static void tuple_name(const struct prog *p, const struct lang_type *t, char *out, size_t n)
{
	const struct tuple_shape *s = shape_of(p, t);
	size_t o = 0;

	o += (size_t)snprintf(out, n, "(");
	for (int i = 0; s && i < s->n && o < n; i++) {
		char pn[256];

		if (s->parts[i].kind == LANG_T_TUPLE)
			tuple_name(p, &s->parts[i], pn, sizeof(pn));
		else
			type_name(&s->parts[i], pn, sizeof(pn));
		o += (size_t)snprintf(out + o, n - o, "%s%s", i ? "," : "", pn);
	}
	if (o < n)
		snprintf(out + o, n - o, ")");
}

static void type_name(const struct lang_type *t, char *out, size_t n)
{
	switch (t->kind) {
	case LANG_T_INT:
		snprintf(out, n, "%sint%d", t->is_signed ? "" : "unsigned ", t->size * 8);
		break;
	case LANG_T_STR: snprintf(out, n, "string[%d]", t->size); break;
	case LANG_T_USTACK: snprintf(out, n, "ustack"); break;
	case LANG_T_USTACK_PERF: snprintf(out, n, "ustack(perf)"); break;
	case LANG_T_USYM: snprintf(out, n, "usym"); break;
	case LANG_T_PROBE: snprintf(out, n, "probe"); break;
	case LANG_T_TUPLE: snprintf(out, n, "tuple"); break;
	case LANG_T_TIMESTAMP: snprintf(out, n, "timestamp"); break;
	case LANG_T_BUF: snprintf(out, n, "buffer"); break;
	default: snprintf(out, n, "none"); break;
	}
}

/* A type's kind as bpftrace words it in some messages. */
static void type_kind_name(const struct lang_type *t, char *out, size_t n)
{
	if (t->kind == LANG_T_INT)
		snprintf(out, n, "integer");
	else if (t->kind == LANG_T_STR)
		snprintf(out, n, "string");
	else
		type_name(t, out, n);
}

/* bpftrace's short names in binop messages: 'int64', 'uint64'. */
static void type_short(const struct lang_type *t, char *out, size_t n)
{
	if (t->kind == LANG_T_INT)
		snprintf(out, n, "%sint%d", t->is_signed ? "" : "u", t->size * 8);
	else
		type_name(t, out, n);
}

static const char *const kind_names[] = {
	[LANG_M_INT] = "int64", [LANG_M_STR] = "string", [LANG_M_USTACK] = "ustack",
	[LANG_M_USYM] = "usym", [LANG_M_PROBE] = "probe", [LANG_M_TUPLE] = "tuple",
	[LANG_M_TIMESTAMP] = "timestamp", [LANG_M_BUF] = "buffer",
	[LANG_M_COUNT] = "count",
	[LANG_M_SUM] = "sum", [LANG_M_AVG] = "avg", [LANG_M_MIN] = "min", [LANG_M_MAX] = "max",
	[LANG_M_STATS] = "stats", [LANG_M_HIST] = "hist", [LANG_M_LHIST] = "lhist",
};

static int is_int(const struct node *n)
{
	return n->type.kind == LANG_T_INT;
}

/* A map kind bpftrace types its value by: count(), hist(), ... */
static bool is_aggregate_kind(int kind)
{
	return kind == LANG_M_COUNT || kind == LANG_M_SUM || kind == LANG_M_MIN ||
	       kind == LANG_M_MAX || kind == LANG_M_AVG || kind == LANG_M_STATS ||
	       kind == LANG_M_HIST || kind == LANG_M_LHIST;
}

/* An integer to compute with: not an aggregate's value, which bpftrace
 * types by its aggregate ('count', 'hist', ...) and refuses in arithmetic,
 * conditions, casts and keys. */
static int is_plain_int(const struct node *n)
{
	return is_int(n) && !n->agg;
}

/* n's type as bpftrace's messages name it: the aggregate, or the type. */
static void value_name(const struct node *n, char *out, size_t len)
{
	if (n->agg)
		snprintf(out, len, "%s", kind_names[n->agg]);
	else
		type_name(&n->type, out, len);
}

static struct mapinfo *map_get(struct checker *c, struct node *m)
{
	struct prog *p = c->p;
	int i;

	for (i = 0; i < p->nmaps; i++)
		if (!strcmp(p->maps[i].name, m->name)) {
			m->map = i;
			return &p->maps[i];
		}
	if (p->nmaps == LANG_MAX_MAPS) {
		prog_error(p, m->loc, "too many maps (at most %d)", LANG_MAX_MAPS);
		return NULL;
	}
	if (p->nmaps == p->cmaps) {
		int cap = p->cmaps ? p->cmaps * 2 : 8;
		struct mapinfo *v = realloc(p->maps, sizeof(*v) * (size_t)cap);

		if (!v) {
			prog_error(p, m->loc, "out of memory");
			return NULL;
		}
		p->maps = v;
		p->cmaps = cap;
	}
	memset(&p->maps[p->nmaps], 0, sizeof(p->maps[0]));
	p->maps[p->nmaps].name = m->name;
	p->maps[p->nmaps].first = m->loc;
	m->map = p->nmaps;
	return &p->maps[p->nmaps++];
}

static int check_expr(struct checker *c, struct node *n);

/* Storage type of a key part or value. */
static struct lang_type storage_of(const struct lang_type *t)
{
	struct lang_type s = *t;

	switch (t->kind) {
	case LANG_T_INT: s.size = 8; break;
	case LANG_T_STR: s.size = LANG_STRLEN; break;
	case LANG_T_USTACK:
	case LANG_T_USTACK_PERF: s.size = 8 + 8 * LANG_USTACK_MAX; break;
	case LANG_T_TUPLE: break;	/* its size is its parts' */
	case LANG_T_TIMESTAMP: s.size = 16; break;
	case LANG_T_BUF: s.size = LANG_BUF_SIZE; break;
	default: s.size = 8; break;
	}
	return s;
}

/* The index of the tuple shape of n parts, added if new: integers are
 * kept as 64-bit values (bpftrace's tuples widen them), strings at their
 * full size whatever their declared one (which only names the type).
 * -1 when there are too many. */
static int shape_index(struct prog *p, const struct lang_type *parts, int n)
{
	int i, k;

	for (i = 0; i < p->nshapes; i++) {
		if (p->shapes[i].n != n)
			continue;
		for (k = 0; k < n; k++) {
			const struct lang_type *a = &p->shapes[i].parts[k], *b = &parts[k];

			if (a->kind != b->kind || a->is_signed != b->is_signed ||
			    (a->kind != LANG_T_STR && a->size != b->size))
				break;
		}
		if (k == n)
			return i;
	}
	if (p->nshapes == LANG_MAX_SHAPES)
		return -1;
	p->shapes[p->nshapes].n = n;
	memcpy(p->shapes[p->nshapes].parts, parts, sizeof(*parts) * (size_t)n);
	return p->nshapes++;
}

/* Bytes a tuple of that shape occupies, its parts at their storage size. */
static uint16_t shape_size(const struct tuple_shape *s)
{
	unsigned size = 0;

	for (int i = 0; i < s->n; i++)
		size += storage_of(&s->parts[i]).size;
	return (uint16_t)size;
}

/* A type's name without its size, as bpftrace names its types. */
static const char *base_type_name(const struct lang_type *t)
{
	switch (t->kind) {
	case LANG_T_INT: return "integer";
	case LANG_T_STR: return "string";
	case LANG_T_USTACK:
	case LANG_T_USTACK_PERF: return "ustack";
	case LANG_T_USYM: return "usym";
	case LANG_T_PROBE: return "probe";
	case LANG_T_TUPLE: return "tuple";
	case LANG_T_TIMESTAMP: return "timestamp";
	case LANG_T_BUF: return "buffer";
	default: return "none";
	}
}

static void key_list(const struct lang_type *k, int n, char *out, size_t len)
{
	size_t o = 0;
	int i;

	o += (size_t)snprintf(out + o, len - o, "[");
	for (i = 0; i < n && o < len; i++) {
		char tn[64];

		type_name(&k[i], tn, sizeof(tn));
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? ", " : "", tn);
	}
	if (o < len)
		snprintf(out + o, len - o, "]");
}

/* A key with an aggregate's value in it: refused, as bpftrace refuses it
 * against a map whose keys it knows (naming the aggregate); as the map's
 * first key bpftrace fails only when it runs, with no place named. */
static int agg_key_refused(struct checker *c, struct node *m, const struct mapinfo *mi)
{
	char have[256], want[256];
	size_t o = 0;

	if (!mi->key_known) {
		prog_error(c->p, m->loc, "invalid mapkey argument type");
		return -1;
	}
	o += (size_t)snprintf(have, sizeof(have), "[");
	for (int i = 0; i < m->nargs && o < sizeof(have); i++) {
		const struct node *a = m->args[i];
		struct lang_type t = storage_of(&a->type);
		char tn[64];

		if (a->agg)
			snprintf(tn, sizeof(tn), "%s", kind_names[a->agg]);
		else if (a->type.kind == LANG_T_STR)
			type_name(&a->type, tn, sizeof(tn));
		else {
			if (t.kind == LANG_T_INT)
				t.is_signed = 0;	/* as bpftrace names key parts */
			type_name(&t, tn, sizeof(tn));
		}
		o += (size_t)snprintf(have + o, sizeof(have) - o, "%s%s", i ? ", " : "", tn);
	}
	if (o < sizeof(have))
		snprintf(have + o, sizeof(have) - o, "]");
	key_list(mi->decl, mi->d.nkeys, want, sizeof(want));
	prog_error(c->p, m->loc, "Argument mismatch for %s: trying to access with arguments: %s when map expects arguments: %s",
		   m->name, have, want);
	return -1;
}

/* A map's value, or a part of one (@m.0.1): what the first pass only
 * guesses, before the map's assignment is seen. */
static bool read_of_map(const struct node *n)
{
	while (n->kind == N_TUPLE_GET)
		n = n->a;
	return n->kind == N_MAP;
}

/* Whether anything under n (statements after it included) gives map
 * name a value: an assignment to it or an increment of it. */
static bool assigns_map(const struct node *n, const char *name)
{
	for (; n; n = n->next) {
		if ((n->kind == S_ASSIGN || n->kind == N_INCDEC) && n->a && n->a->kind == N_MAP &&
		    !strcmp(n->a->name, name))
			return true;
		if ((n->a && assigns_map(n->a, name)) || (n->b && assigns_map(n->b, name)) ||
		    (n->c && assigns_map(n->c, name)))
			return true;
		for (int i = 0; i < n->nargs; i++)
			if (assigns_map(n->args[i], name))
				return true;
	}
	return false;
}

static bool program_assigns_map(const struct prog *p, const char *name)
{
	for (const struct probe *pr = p->probes; pr; pr = pr->next)
		if (assigns_map(pr->body, name) || (pr->pred && assigns_map(pr->pred, name)))
			return true;
	return false;
}

/* A tuple with a part read from a map the first pass has no type for yet
 * (as bpftrace's first pass, which gives the tuple the type 'none'): the
 * map it is assigned to gets its type in the next pass, from the map's
 * type then, or is undefined if nothing assigns that map. */
static bool tuple_of_untyped_map(const struct prog *p, const struct node *n)
{
	if (n->kind != N_TUPLE)
		return false;
	for (int i = 0; i < n->nargs; i++) {
		const struct node *a = n->args[i];

		if ((a->kind == N_MAP && !p->maps[a->map].val_known) || tuple_of_untyped_map(p, a))
			return true;
	}
	return false;
}

/* Checks the keys of a map access and records or compares their types. */
static int check_map_keys(struct checker *c, struct node *m, struct mapinfo *mi)
{
	struct lang_type kt[LANG_MAX_KEY_PARTS];
	int i;

	if (m->nargs > LANG_MAX_KEY_PARTS) {
		prog_error(c->p, m->loc, "too many map keys (at most %d)", LANG_MAX_KEY_PARTS);
		return -1;
	}
	{
		int bad = 0;

		for (i = 0; i < m->nargs; i++)	/* every key's errors said */
			if (check_expr(c, m->args[i]))
				bad = 1;
		if (bad)
			return -1;
	}
	for (i = 0; i < m->nargs; i++) {
		if (m->args[i]->type.kind == LANG_T_NONE) {
			prog_error(c->p, m->args[i]->loc, "map key has no value");
			return -1;
		}
		if (m->args[i]->type.kind == LANG_T_TUPLE) {
			prog_error(c->p, m->loc, "tuple cannot be used as a map key. Try a multi-key "
				   "associative array instead (eg `@map[$1, $2] = ...)`.");
			return -1;
		}
		if (m->args[i]->agg)	/* in bpftrace's first pass too */
			return agg_key_refused(c, m, mi);
		kt[i] = storage_of(&m->args[i]->type);
		if (m->args[i]->type.kind == LANG_T_STR)
			kt[i].size = LANG_STRLEN;
		/* a key read from a map (@h[@f[tid]]) has its type only in
		 * the second pass: the keys are not taken from this access */
		if (c->collect && read_of_map(m->args[i]))
			return 0;
	}
	if (!mi->key_known) {
		mi->key_known = 1;
		mi->d.nkeys = (uint8_t)m->nargs;
		/* bpftrace 0.17 prints every integer key part as a signed
		 * 64-bit value, whatever the expression's type (its keys are
		 * widened to 64 bits by that type first, as here) */
		for (i = 0; i < m->nargs; i++)
			if (kt[i].kind == LANG_T_INT)
				kt[i].is_signed = 1;
		memcpy(mi->d.keys, kt, sizeof(kt[0]) * (size_t)m->nargs);
		/* as declared, for messages: strings keep their literal size */
		memcpy(mi->decl, kt, sizeof(kt[0]) * (size_t)m->nargs);
		/* bpftrace's messages name every integer key part unsigned */
		for (i = 0; i < m->nargs; i++)
			if (m->args[i]->type.kind == LANG_T_STR)
				mi->decl[i] = m->args[i]->type;
			else if (kt[i].kind == LANG_T_INT)
				mi->decl[i].is_signed = 0;
		return 0;
	}
	/* an integer key part prints with the sign of its first use, as
	 * bpftrace's; a use of the other sign is the same key */
	for (i = 0; i < m->nargs && i < mi->d.nkeys; i++)
		if (kt[i].kind == LANG_T_INT && mi->d.keys[i].kind == LANG_T_INT)
			kt[i].is_signed = mi->d.keys[i].is_signed;
	if (mi->d.nkeys != m->nargs || (m->nargs && memcmp(mi->d.keys, kt, sizeof(kt[0]) * (size_t)m->nargs))) {
		char have[256], want[256];

		for (i = 0; i < m->nargs; i++)
			if (m->args[i]->type.kind == LANG_T_STR)
				kt[i] = m->args[i]->type;
			else if (kt[i].kind == LANG_T_INT)
				kt[i].is_signed = 0;
		key_list(kt, m->nargs, have, sizeof(have));
		key_list(mi->decl, mi->d.nkeys, want, sizeof(want));
		if (!m->nargs)
			snprintf(have, sizeof(have), "[]");
		prog_error(c->p, m->loc, "Argument mismatch for %s: trying to access with arguments: %s when map expects arguments: %s",
			   m->name, have, want);
		return -1;
	}
	return 0;
}

/* Records that map mi holds values of kind (and type t for plain values). */
static int set_map_kind(struct checker *c, struct node *m, struct mapinfo *mi, int kind,
			const struct lang_type *t, struct node *val)
{
	char tn[64];

	if (!mi->val_known) {
		mi->val_known = 1;
		mi->d.kind = (uint8_t)kind;
		if (t)
			mi->d.val = storage_of(t);
		return 0;
	}
	if (mi->d.kind == kind)
		return 0;
	if (t)
		type_short(t, tn, sizeof(tn));
	else
		snprintf(tn, sizeof(tn), "%s", kind_names[kind]);
	if (t && t->kind == LANG_T_INT)
		snprintf(tn, sizeof(tn), "int64");
	(void)val;
	prog_error(c->p, m->loc, "Type mismatch for %s: trying to assign value of type '%s' when map already contains a value of type '%s",
		   m->name, tn, kind_names[mi->d.kind]);
	return -1;
}

static int kind_of_value(const struct lang_type *t)
{
	switch (t->kind) {
	case LANG_T_INT: return LANG_M_INT;
	case LANG_T_STR: return LANG_M_STR;
	case LANG_T_USTACK:
	case LANG_T_USTACK_PERF: return LANG_M_USTACK;
	case LANG_T_USYM: return LANG_M_USYM;
	case LANG_T_PROBE: return LANG_M_PROBE;
	case LANG_T_TUPLE: return LANG_M_TUPLE;
	case LANG_T_TIMESTAMP: return LANG_M_TIMESTAMP;
	case LANG_T_BUF: return LANG_M_BUF;
	default: return 0;
	}
}

static int need_args(struct checker *c, struct node *n, int lo, int hi)
{
	if (n->nargs >= lo && n->nargs <= hi)
		return 0;
	if (lo == 0 && hi == 0)
		prog_error(c->p, n->loc, "%s() requires no arguments (%d provided)", n->name, n->nargs);
	else if (lo == 1 && hi == 1)
		prog_error(c->p, n->loc, "%s() requires one argument (%d provided)", n->name, n->nargs);
	else if (lo == hi)
		prog_error(c->p, n->loc, "%s() requires %d arguments (%d provided)", n->name, lo, n->nargs);
	else if (n->nargs < lo && lo == 1)
		prog_error(c->p, n->loc, "%s() requires at least one argument (%d provided)", n->name, n->nargs);
	else if (n->nargs < lo)
		prog_error(c->p, n->loc, "%s() requires at least %d arguments (%d provided)", n->name, lo, n->nargs);
	else if (hi == 1)
		prog_error(c->p, n->loc, "%s() takes up to one argument (%d provided)", n->name, n->nargs);
	else
		prog_error(c->p, n->loc, "%s() takes up to %d arguments (%d provided)", n->name, hi, n->nargs);
	return -1;
}

static int need_int_literal(struct checker *c, struct node *call, struct node *a, int64_t *out)
{
	if (a->kind == N_INT) {
		*out = a->ival;
		return 0;
	}
	if (a->kind == N_UNOP && a->op == OP_NEG && a->a->kind == N_INT) {
		*out = (int64_t)(0 - (uint64_t)a->a->ival);
		return 0;
	}
	prog_error(c->p, call->loc, "%s() expects a integer literal (%s provided)", call->name,
		   base_type_name(&a->type));
	return -1;
}

/* Aggregation functions: only as `@m[...] = f(...)`. */
static const char *const agg_names[] = {
	"count", "sum", "avg", "min", "max", "stats", "hist", "lhist",
};
static const int agg_kinds[] = {
	LANG_M_COUNT, LANG_M_SUM, LANG_M_AVG, LANG_M_MIN, LANG_M_MAX, LANG_M_STATS,
	LANG_M_HIST, LANG_M_LHIST,
};

static int agg_kind(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(agg_names) / sizeof(agg_names[0]); i++)
		if (!strcmp(name, agg_names[i]))
			return agg_kinds[i];
	return 0;
}

/* Functions bpftrace has and this runtime does not. */
static const char *const unsupported_funcs[] = {
	"kstack", "ksym", "kaddr", "uaddr", "ntop",
	"cgroupid", "macaddr", "offsetof",
	"path", "skboutput", "pton", "kptr", "uptr", "bswap", "cgroup_path", "strerror",
	"percpu_kaddr", "len", "has_key", "unwatch", "debugf", "printv",
};

static int check_agg(struct checker *c, struct node *call, struct node *m, struct mapinfo *mi)
{
	int kind = agg_kind(call->name);
	int i, bad;

	switch (kind) {
	case LANG_M_COUNT:
		if (need_args(c, call, 0, 0))
			return -1;
		break;
	case LANG_M_LHIST:
		if (need_args(c, call, 4, 4))
			return -1;
		break;
	default:
		if (need_args(c, call, 1, 1))
			return -1;
	}
	for (i = 0; i < call->nargs; i++)
		if (check_expr(c, call->args[i]) && !(i == 0 && call->args[i]->none))
			return -1;
	if (call->nargs && call->args[0]->none) {
		prog_error(c->p, call->loc, "%s() only supports integer arguments (none provided)",
			   call->name);
		return -1;
	}
	if (call->nargs && !is_int(call->args[0])) {
		char tn[64];

		type_name(&call->args[0]->type, tn, sizeof(tn));
		if (kind == LANG_M_HIST || kind == LANG_M_LHIST)
			prog_error(c->p, call->loc, "%s() only supports integer arguments (%s provided)",
				   call->name, call->args[0]->type.kind == LANG_T_STR ? "string" : tn);
		else
			prog_error(c->p, call->loc, "%s() only supports integer arguments (%s provided)",
				   call->name, call->args[0]->type.kind == LANG_T_STR ? "string" : tn);
		return -1;
	}
	if (kind == LANG_M_LHIST) {
		int64_t mn, mx, st;

		if (need_int_literal(c, call, call->args[1], &mn) ||
		    need_int_literal(c, call, call->args[2], &mx) ||
		    need_int_literal(c, call, call->args[3], &st))
			return -1;
		/* each of bpftrace's checks, in its order, all reported */
		bad = 0;
		if (st <= 0)
			bad = prog_error_n(c->p, call->loc, "lhist() step must be >= 1 (%ld provided)",
					   (long)st);
		else if ((int)((mx - mn) / st) > 1000)
			bad = prog_error_n(c->p, call->loc, "lhist() too many buckets, must be <= 1000 "
					   "(would need %d)", (int)((mx - mn) / st));
		if (mn < 0)
			bad = prog_error_n(c->p, call->loc, "lhist() min must be non-negative (provided "
					   "min %ld)", (long)mn);
		if (mn > mx)
			bad = prog_error_n(c->p, call->loc, "lhist() min must be less than max (provided "
					   "min %ld and max %ld)", (long)mn, (long)mx);
		if (mx - mn < st)
			bad = prog_error_n(c->p, call->loc, "lhist() step is too large for the given "
					   "range (provided step %ld for range %ld)", (long)st,
					   (long)(mx - mn));
		if (bad)
			return -1;
		if (mi->val_known && mi->d.kind == LANG_M_LHIST &&
		    (mi->d.lhist_min != mn || mi->d.lhist_max != mx || mi->d.lhist_step != st)) {
			prog_error(c->p, call->loc, "Different lhist bounds in a single map unsupported");
			return -1;
		}
		mi->d.lhist_min = mn;
		mi->d.lhist_max = mx;
		mi->d.lhist_step = st;
	}
	if (set_map_kind(c, m, mi, kind, NULL, call))
		return -1;
	/* a sum is signed as the values of its first use are (bpftrace
	 * prints sum(arg0 - 5) unsigned) */
	if (kind == LANG_M_SUM && !c->collect && !mi->sign_known) {
		mi->d.val.is_signed = call->args[0]->type.is_signed;
		mi->sign_known = 1;
	}
	call->map = m->map;
	call->type.kind = LANG_T_NONE;
	return 0;
}

/* bpftrace's integer arithmetic is signed when both operands are (a
 * shift: when its left one is). */
static int binop_signed(int op, int lsigned, int rsigned)
{
	if (op == OP_SHL || op == OP_SHR)
		return lsigned;
	return lsigned && rsigned;
}

/* Whether a read of the integer map mi is signed here: in the first pass,
 * a map not assigned yet (in source order) reads as bpftrace's untyped
 * value, unsigned; after that, as its value type. */
static int map_read_signed(struct checker *c, const struct mapinfo *mi)
{
	if (!mi->val_known)
		return 0;
	if (mi->d.kind != LANG_M_INT)
		return 1;
	return mi->d.val.is_signed;
}

static int check_map_read(struct checker *c, struct node *n)
{
	struct mapinfo *mi = map_get(c, n);

	if (!mi || check_map_keys(c, n, mi))
		return -1;
	/* A tuple map's type once known, for its parts read with .N. */
	if (c->collect && !(mi->val_known && mi->d.kind == LANG_M_TUPLE)) {
		n->type = T_I64;
		n->type.is_signed = (uint8_t)map_read_signed(c, mi);
		/* an aggregate assigned before, in source order, is one in
		 * bpftrace's first pass too: the errors that pass finds
		 * (casts, str(), keys, variables) are found here */
		if (mi->val_known && is_aggregate_kind(mi->d.kind)) {
			n->agg = (uint8_t)mi->d.kind;
			n->unreadable = mi->d.kind == LANG_M_STATS || mi->d.kind == LANG_M_HIST ||
					mi->d.kind == LANG_M_LHIST;
		}
		return 0;
	}
	if (!mi->val_known) {
		/* bpftrace goes on with type 'none': its uses are said too */
		n->none = 1;
		n->type = (struct lang_type){ 0 };
		if (!mi->none)
			prog_error(c->p, n->loc, "Undefined map: %s", n->name);
		return -1;
	}
	switch (mi->d.kind) {
	case LANG_M_INT:
		n->type = mi->d.val;
		break;
	case LANG_M_STR:
	case LANG_M_USTACK:
	case LANG_M_USYM:
	case LANG_M_PROBE:
	case LANG_M_TUPLE:
	case LANG_M_TIMESTAMP:
	case LANG_M_BUF:
		n->type = mi->d.val;
		break;
	case LANG_M_COUNT:
	case LANG_M_SUM:
	case LANG_M_MIN:
	case LANG_M_MAX:
	case LANG_M_AVG:
		n->type = mi->d.kind == LANG_M_COUNT ? T_U64 : T_I64;
		n->agg = (uint8_t)mi->d.kind;	/* no arithmetic, as in bpftrace */
		break;
	case LANG_M_STATS:
	case LANG_M_HIST:
	case LANG_M_LHIST:
		/* typed by its aggregate, so that its uses are refused as
		 * bpftrace refuses them; one that bpftrace lets by (it has no
		 * value) is refused with the statement (unreadable_in) */
		n->type = T_I64;
		n->agg = (uint8_t)mi->d.kind;
		n->unreadable = 1;
		break;
	default:
		prog_error(c->p, n->loc, "the value of a %s() map can not be read in an expression",
			   kind_names[mi->d.kind]);
		return -1;
	}
	mi->used_as_value = 1;
	return 0;
}

static int probe_kinds_allow(struct checker *c, struct node *n, int uprobe_ok, int uret_ok,
			     int usdt_ok, const char *what)
{
	struct probe *pr = c->pr;
	int i;

	for (i = 0; i < pr->natt; i++) {
		int k = pr->att[i].kind;

		if ((k == LANG_P_UPROBE && uprobe_ok) || (k == LANG_P_URETPROBE && uret_ok) ||
		    (k == LANG_P_USDT && usdt_ok))
			continue;
		prog_error(c->p, n->loc, "%s", what);
		return -1;
	}
	return 0;
}

/* Whether every attach point of pr is a usdt probe. */
static bool only_usdt(const struct probe *pr)
{
	for (int i = 0; i < pr->natt; i++)
		if (pr->att[i].kind != LANG_P_USDT)
			return false;
	return true;
}

/* argK in a usdt probe: within the operands the SDT notes of each of its
 * attach points give (what the tool can tell before running). */
static int check_usdt_arg(struct checker *c, struct node *n, long k)
{
	const struct lang_compile_opts *o = c->p->opts;
	struct probe *pr = c->pr;

	for (int i = 0; o && o->usdt_nargs && i < pr->natt; i++) {
		const struct attach *a = &pr->att[i];
		int nargs = 0;

		if (a->kind != LANG_P_USDT ||
		    o->usdt_nargs(a->target, a->provider, a->func, &nargs, o->param_arg) ||
		    k < nargs)
			continue;
		if (nargs)
			prog_error(c->p, n->loc, "%s: usdt probe %s%s%s has %d argument%s (arg0..arg%d)",
				   n->name, a->provider, *a->provider ? ":" : "", a->func, nargs,
				   nargs == 1 ? "" : "s", nargs - 1);
		else
			prog_error(c->p, n->loc, "%s: usdt probe %s%s%s has no arguments", n->name,
				   a->provider, *a->provider ? ":" : "", a->func);
		return -1;
	}
	return 0;
}

/* args->NAME: the parameter of the function every attach point of the
 * probe names (uprobes at a function's entry, no glob), read from its
 * argument register as bpftrace does, typed from DWARF. */
static int check_args_field(struct checker *c, struct node *n)
{
	const struct lang_compile_opts *o = c->p->opts;
	struct probe *pr = c->pr;
	struct lang_type t = { 0 }, t1;
	int index = -1, i1;
	char why[200];

	for (int i = 0; i < pr->natt; i++) {
		const struct attach *a = &pr->att[i];

		if (a->kind != LANG_P_UPROBE || a->offset) {
			prog_error(c->p, n->loc, "The args builtin can only be used with uprobe probes at a function entry");
			return -1;
		}
		if (strpbrk(a->func, "*?[")) {
			prog_error(c->p, n->loc, "args is not supported with a wildcard probe (%s)", a->text);
			return -1;
		}
		if (!o || !o->param) {
			prog_error(c->p, n->loc, "args: no debug information reader");
			return -1;
		}
		why[0] = '\0';
		if (o->param(a->target, a->func, n->name, &i1, &t1, why, sizeof(why), o->param_arg)) {
			prog_error(c->p, n->loc, "%s", why[0] ? why : "unknown parameter");
			return -1;
		}
		if (i1 < 0 || i1 > 5 || t1.kind != LANG_T_INT ||
		    (t1.size != 1 && t1.size != 2 && t1.size != 4 && t1.size != 8)) {
			prog_error(c->p, n->loc, "args->%s is not an integer or pointer in one of the first six parameters",
				   n->name);
			return -1;
		}
		if (index >= 0 && (i1 != index || memcmp(&t1, &t, sizeof(t)))) {
			prog_error(c->p, n->loc, "args->%s differs between the probes of this block", n->name);
			return -1;
		}
		index = i1;
		t = t1;
	}
	n->op = B_ARG;
	n->post = 2;
	n->ival = index;
	n->cast = t;		/* codegen narrows the register to it */
	n->type = t;
	return 0;
}


/* The value of positional parameter $pos used as a number (bpftrace: a
 * missing one reads as 0, $0 does not exist).  hint: the error suggests
 * str(), as bpftrace's does in an expression (not in unroll()). */
static int positional_value(struct prog *p, struct loc loc, long long pos, bool hint,
			    long long *out)
{
	const char *v;
	char *e;

	if (pos < 1) {
		prog_error(p, loc, "param $%lld is out of integer range [1, 9223372036854775807]", pos);
		return -1;
	}
	*out = 0;
	if (pos > p->opts->nparams)
		return 0;
	v = p->opts->params[pos - 1];
	*out = strtoll(v, &e, 0);
	if (!*v || *e) {
		if (hint)
			prog_error(p, loc, "$%lld used numerically but given \"%s\". Try using str($%lld).",
				   pos, v, pos);
		else
			prog_error(p, loc, "$%lld used numerically but given \"%s\"", pos, v);
		return -1;
	}
	return 0;
}

static int check_builtin(struct checker *c, struct node *n)
{
	static const struct { const char *name; int b; } names[] = {
		{ "pid", B_PID }, { "tid", B_TID }, { "uid", B_UID }, { "cpu", B_CPU },
		{ "nsecs", B_NSECS }, { "elapsed", B_ELAPSED }, { "comm", B_COMM },
		{ "func", B_FUNC }, { "probe", B_PROBE }, { "retval", B_RETVAL },
		{ "ustack", B_USTACK }, { "gid", B_GID }, { "rand", B_RAND },
		{ "numaid", B_NUMAID }, { "cpid", B_CPID },
	};
	static const char *const unsupported[] = {
		"kstack", "cgroup", "curtask", "ctx", "username", "args", "jiffies",
		"$#",
	};
	size_t i;

	if (n->op == -2 || n->post == 2)	/* args->NAME (post: after the first pass) */
		return check_args_field(c, n);
	if (n->op == -1) {	/* $N */
		struct prog *p = c->p;
		long long x;

		if (positional_value(p, n->loc, n->ival, true, &x))
			return -1;
		n->kind = N_INT;
		n->ival = x;
		n->type = T_I64;
		return 0;
	}
	if (!strncmp(n->name, "sarg", 4) && n->name[4] >= '0' && n->name[4] <= '5' && !n->name[5]) {
		char what[96];

		snprintf(what, sizeof(what), "The %s builtin can only be used with 'kprobes' and "
			 "'uprobes' probes", n->name);
		if (probe_kinds_allow(c, n, 1, 0, 0, what))
			return -1;
		n->op = B_SARG;
		n->ival = n->name[4] - '0';
		n->type = T_U64;
		return 0;
	}
	if (!strncmp(n->name, "arg", 3) && n->name[3] >= '0' && n->name[3] <= '9') {
		char *e;
		long k = strtol(n->name + 3, &e, 10);

		if (*e)
			goto unknown;
		char what[96];

		snprintf(what, sizeof(what), "The %s builtin can only be used with 'kprobes', "
			 "'uprobes' and 'usdt' probes", n->name);
		if (probe_kinds_allow(c, n, 1, 0, 1, what))
			return -1;
		/* usdt: the SDT operands the agent fetched, signed 64-bit
		 * as bpftrace types them; uprobes: the argument registers */
		if (k > (only_usdt(c->pr) ? LANG_MAX_USDT_ARGS - 1 : 5)) {
			prog_error(c->p, n->loc, KP_ARCH_NAME " doesn't support %s", n->name);
			return -1;
		}
		if (check_usdt_arg(c, n, k))
			return -1;
		n->op = B_ARG;
		n->ival = k;
		n->type = only_usdt(c->pr) ? T_S64 : T_U64;
		return 0;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(n->name, names[i].name))
			continue;
		n->op = names[i].b;
		switch (n->op) {
		case B_COMM:
			n->type.kind = LANG_T_STR;
			n->type.size = LANG_COMM_LEN;
			return 0;
		case B_FUNC:
			if (probe_kinds_allow(c, n, 1, 1, 1, "The func builtin can not be used with 'BEGIN', 'END' or 'interval' probes"))
				return -1;
			n->type.kind = LANG_T_USYM;
			n->type.size = 8;
			return 0;
		case B_PROBE:
			n->type.kind = LANG_T_PROBE;
			n->type.size = 8;
			return 0;
		case B_USTACK:
			if (!n->post)	/* ustack(N) was turned into this node */
				n->ival = LANG_USTACK_MAX;
			/* ustack(perf[, N]) keeps the type its call set */
			if (n->type.kind != LANG_T_USTACK_PERF)
				n->type.kind = LANG_T_USTACK;
			n->type.size = 8 + 8 * LANG_USTACK_MAX;
			return 0;
		case B_CPID:
			if (!c->p->opts || !c->p->opts->has_command) {
				prog_error(c->p, n->loc, "cpid cannot be used without child command");
				return -1;
			}
			n->type = T_U64;
			return 0;
		case B_RETVAL:
			if (probe_kinds_allow(c, n, 0, 1, 0, "The retval builtin can only be used with 'kretprobe' and 'uretprobe' and 'kfunc' probes"))
				return -1;
			/* fall through */
		default:
			n->type = T_U64;
			return 0;
		}
	}
	for (i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (!strcmp(n->name, unsupported[i])) {
			prog_error(c->p, n->loc, "the %s builtin is not supported by kprobe run", n->name);
			return -1;
		}
unknown:
	prog_error(c->p, n->loc, "Unknown identifier: '%s'", n->name);
	return -1;
}

/* str($N): the parameter's text, "" when it was not given. */
static void positional_as_string(struct checker *c, struct node *n)
{
	const struct lang_compile_opts *o = c->p->opts;
	const char *v = n->ival >= 1 && n->ival <= o->nparams ? o->params[n->ival - 1] : "";
	size_t len = strlen(v);

	if (len >= LANG_STRLEN)
		len = LANG_STRLEN - 1;	/* as str() truncates */
	n->kind = N_STR;
	n->name = (char *)v;
	n->slen = len;
}

static struct var *var_find(struct checker *c, const char *name)
{
	int i;

	for (i = 0; i < c->p->nvars; i++)
		if (c->p->vars[i].probe == c->probe_no && !strcmp(c->p->vars[i].name, name))
			return &c->p->vars[i];
	return NULL;
}

/* A literal integer that is not negative: bpftrace takes it as having
 * whichever sign the other operand has. */
static bool nonneg_literal(const struct node *n)
{
	return n->kind == N_INT && n->ival >= 0;
}

static void binop_warnings(struct checker *c, const struct node *n, const char *name);

/* x OP= v warns as x = x OP v does (naming OP), at the OP= token. */
static void compound_warnings(struct checker *c, const struct node *s,
			      const struct lang_type *lhs, struct node *rhs)
{
	static const char *const names[] = {
		[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/", [OP_MOD] = "%",
	};
	struct node l = { .kind = N_VAR, .type = *lhs };
	struct node b = { .kind = N_BINOP, .op = s->op, .loc = s->loc, .ival = s->ival,
			  .a = &l, .b = rhs };

	if (c->collect || !s->op || lhs->kind != LANG_T_INT || rhs->type.kind != LANG_T_INT ||
	    s->op > OP_MOD)
		return;
	binop_warnings(c, &b, names[s->op]);
}

/* bpftrace 0.17's warnings on an integer operation n ("/" etc. in name),
 * at the operator: integers of different signs compared or combined, and
 * signed division (which BPF lacks). */
static void binop_warnings(struct checker *c, const struct node *n, const char *name)
{
	const struct node *l = n->a, *r = n->b;
	bool ls = l->type.is_signed, rs = r->type.is_signed;
	struct loc ol = n->loc;
	char lt[64], rt[64];

	ol.col = (int)(n->ival >> 32);
	ol.col_end = (int)(uint32_t)n->ival;
	if (ls != rs) {
		if (ls && nonneg_literal(l)) {
			ls = false;
		} else if (rs && nonneg_literal(r)) {
			rs = false;
		} else {
			type_name(&l->type, lt, sizeof(lt));
			type_name(&r->type, rt, sizeof(rt));
			if (n->op >= OP_EQ && n->op <= OP_GE)
				prog_warning(c->p, ol, "comparison of integers of different signs: '%s' and '%s' can lead to undefined behavior",
					     lt, rt);
			else if (n->op <= OP_MOD)
				prog_warning(c->p, ol, "arithmetic on integers of different signs: '%s' and '%s' can lead to undefined behavior",
					     lt, rt);
		}
	}
	if (n->op != OP_DIV && n->op != OP_MOD)
		return;
	if ((ls && !nonneg_literal(l)) || (rs && !nonneg_literal(r)))
		prog_warning(c->p, ol, "signed operands for '%s' can lead to undefined behavior (cast to unsigned to silence warning)",
			     name);
}

static int binop_type(struct checker *c, struct node *n)
{
	struct node *l = n->a, *r = n->b;
	char lt[64], rt[64];
	const char *opname[] = {
		[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/", [OP_MOD] = "%",
		[OP_AND] = "&", [OP_OR] = "|", [OP_XOR] = "^", [OP_SHL] = "<<", [OP_SHR] = ">>",
		[OP_EQ] = "==", [OP_NE] = "!=", [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">",
		[OP_GE] = ">=", [OP_LAND] = "&&", [OP_LOR] = "||",
	};

	if (c->collect) {
		/* Integer signedness as bpftrace's first pass has it (a map read
		 * before its first assignment has no type yet: unsigned), for
		 * the maps this pass types from the values assigned to them. */
		n->type = T_I64;
		if (l->type.kind == LANG_T_INT && r->type.kind == LANG_T_INT && n->op < OP_EQ)
			n->type.is_signed = (uint8_t)binop_signed(n->op, l->type.is_signed,
								  r->type.is_signed);
		return 0;
	}
	int lagg = l->agg, ragg = r->agg;

	/* two values of one aggregate compare as bpftrace lets them */
	if (l->type.kind == LANG_T_INT && r->type.kind == LANG_T_INT && lagg == ragg) {
		int sgn = l->type.is_signed && r->type.is_signed;

		if (n->op == OP_SHL || n->op == OP_SHR)
			sgn = l->type.is_signed;
		n->type.kind = LANG_T_INT;
		n->type.size = 8;
		n->type.is_signed = (uint8_t)sgn;
		if (n->op >= OP_EQ && n->op <= OP_GE)
			n->type = T_U64, n->type.is_signed = 0;
		if (n->op == OP_LAND || n->op == OP_LOR)
			n->type = T_U64;
		n->type.is_signed = n->op >= OP_EQ ? 0 : n->type.is_signed;
		n->cast.size = (uint16_t)(l->type.is_signed && r->type.is_signed);	/* signed compare */
		binop_warnings(c, n, opname[n->op]);
		return 0;
	}
	if (l->type.kind == LANG_T_STR && r->type.kind == LANG_T_STR &&
	    (n->op == OP_EQ || n->op == OP_NE)) {
		n->type = T_U64;
		return 0;
	}
	if ((l->type.kind == LANG_T_STR && r->type.kind == LANG_T_STR) ||
	    (l->type.kind != LANG_T_INT && l->type.kind == r->type.kind)) {
		struct loc ol = n->loc;

		type_name(&l->type, lt, sizeof(lt));
		type_name(&r->type, rt, sizeof(rt));
		ol.col = (int)(n->ival >> 32);
		ol.col_end = (int)(uint32_t)n->ival;
		prog_error(c->p, ol, "The %s operator can not be used on expressions of types %s, %s",
			   opname[n->op], lt, rt);
		return -1;
	}
	if (lagg)
		snprintf(lt, sizeof(lt), "%s", kind_names[lagg]);
	else
		type_short(&l->type, lt, sizeof(lt));
	if (ragg)
		snprintf(rt, sizeof(rt), "%s", kind_names[ragg]);
	else
		type_short(&r->type, rt, sizeof(rt));
	prog_error(c->p, n->loc, "Type mismatch for '%s': comparing '%s' with '%s'", opname[n->op], lt, rt);
	return -1;
}

/* An operand of type 'none' (a read of a map nothing assigns) makes the
 * operation's own error too, as in bpftrace: a type mismatch with the
 * other operand, or "none, none".  An operand with an error of its own
 * fails the operation with no more said. */
static int check_binop(struct checker *c, struct node *n)
{
	int ra = check_expr(c, n->a), rb = check_expr(c, n->b), rc;

	/* both operands' errors are said, as bpftrace's visitor says them */
	if ((ra && !n->a->none) || (rb && !n->b->none))
		return -1;
	rc = binop_type(c, n);	/* with a 'none' operand: its error */
	return ra || rb ? -1 : rc;
}

static int check_call(struct checker *c, struct node *n, int as_stmt);

/* A ternary's condition and branches, as bpftrace 0.17 types them: the
 * first branch an integer or a string (or none), the second of the same
 * kind; the result has the first's type, none included. */
static int check_ternary(struct checker *c, struct node *n)
{
	const struct node *b = n->b, *e = n->c;
	char bn[64], en[64];

	if (!is_plain_int(n->a)) {
		/* the whole ternary, as bpftrace points at it */
		prog_error(c->p, n->loc, "Invalid condition in ternary: %s",
			   n->a->agg ? kind_names[n->a->agg] : base_type_name(&n->a->type));
		return -1;
	}
	if (!b->none && (b->agg || (b->type.kind != LANG_T_INT && b->type.kind != LANG_T_STR))) {
		prog_error(c->p, n->loc, "Ternary return type unsupported %s",
			   b->agg ? kind_names[b->agg] : base_type_name(&b->type));
		return -1;
	}
	if (b->none != e->none || (!b->none && (b->type.kind != e->type.kind || b->agg != e->agg))) {
		/* bpftrace names the kinds here, not the sized types */
		if (b->none)
			snprintf(bn, sizeof(bn), "none");
		else
			type_kind_name(&b->type, bn, sizeof(bn));
		if (e->none)
			snprintf(en, sizeof(en), "none");
		else if (e->agg)
			snprintf(en, sizeof(en), "%s", kind_names[e->agg]);
		else
			type_kind_name(&e->type, en, sizeof(en));
		prog_error(c->p, n->loc, "Ternary operator must return the same type: have '%s' and '%s'",
			   bn, en);
		n->none = b->none;
		return -1;
	}
	if (b->none) {
		n->none = 1;
		n->type = (struct lang_type){ 0 };
		return -1;
	}
	n->type = b->type;
	if (n->type.kind == LANG_T_INT) {
		n->type.size = 8;
		n->type.is_signed = b->type.is_signed && e->type.is_signed;
	} else if (n->type.kind == LANG_T_STR) {
		n->type.size = b->type.size > e->type.size ? b->type.size : e->type.size;
	}
	return 0;
}


/* ++ or -- of an aggregate's map or of a variable holding its value. */
static int incdec_refused(struct checker *c, struct node *n, const char *agg)
{
	prog_error(c->p, n->loc, "The %s operator can not be used on expressions of type '%s'",
		   n->op == OP_ADD ? "++" : "--", agg);
	return -1;
}

/* ---- casts to struct types of the probed object's DWARF ----
 * A node typed by a struct has its name in n->name: an N_CAST or N_DEREF
 * whose value points to one, or an N_BINOP whose value is the address of
 * one held inside another.  An N_DEREF that reads a field has "" there
 * (its load size is the field's, not a word). */

/* The object whose debug information types the probe's casts. */
static const char *cast_object(struct checker *c, struct node *n)
{
	for (int i = 0; i < c->pr->natt; i++) {
		const struct attach *a = &c->pr->att[i];

		if ((a->kind == LANG_P_UPROBE || a->kind == LANG_P_URETPROBE ||
		     a->kind == LANG_P_USDT) && *a->target)
			return a->target;
	}
	prog_error(c->p, n->loc, "a cast to a struct type needs a uprobe or usdt probe naming an object (its debug information has the type)");
	return NULL;
}

static struct node *new_check_node(struct checker *c, int kind, struct loc loc)
{
	struct node *n = prog_alloc(c->p, sizeof(*n));

	if (n) {
		n->kind = kind;
		n->loc = loc;
		n->map = -1;
		n->var = -1;
	}
	return n;
}

static int check_struct_cast(struct checker *c, struct node *n)
{
	const struct lang_compile_opts *o = c->p->opts;
	struct lang_field f;
	const char *obj;
	char why[200] = "";

	if (n->post != 1) {
		prog_error(c->p, n->loc, "a struct type is cast to as a pointer: (struct %s *)", n->name);
		return -1;
	}
	if (!o || !o->field) {
		prog_error(c->p, n->loc, "casts to struct types: no debug information reader");
		return -1;
	}
	obj = cast_object(c, n);
	if (!obj)
		return -1;
	if (o->field(obj, n->name, NULL, &f, why, sizeof(why), o->param_arg)) {
		prog_error(c->p, n->loc, "%s", why[0] ? why : "unknown struct");
		return -1;
	}
	return 0;
}

/* EXPR->FIELD or EXPR.FIELD: rewritten in place into the load of the
 * field (an N_DEREF of the address plus the offset), or for a struct
 * inside, that address (an N_BINOP); then checked as such. */
static int check_field(struct checker *c, struct node *n)
{
	const struct lang_compile_opts *o = c->p->opts;
	struct node *base = n->a, *off, *addr;
	bool ptr, lval;
	struct lang_field f;
	const char *obj;
	char why[200] = "";

	if (check_expr(c, base))
		return -1;
	ptr = (base->kind == N_CAST || base->kind == N_DEREF) && base->name && *base->name;
	lval = base->kind == N_BINOP && base->name && *base->name;
	if (n->op && base->kind == N_BUILTIN && base->post == 2) {
		/* args->NAME->FIELD: the struct the parameter points to
		 * (check_args_field made every attach point a uprobe on one
		 * function) */
		const struct attach *a = &c->pr->att[0];
		struct node *cast;
		char sname[64];

		if (!o || !o->param_struct ||
		    o->param_struct(a->target, a->func, base->name, sname, sizeof(sname),
				    o->param_arg)) {
			prog_error(c->p, n->loc, "'->%s': args->%s is not a pointer to a struct", n->name,
				   base->name);
			return -1;
		}
		/* the parameter's value as a pointer, typed by the struct */
		cast = new_check_node(c, N_CAST, base->loc);
		if (!cast)
			return -1;
		cast->a = base;
		cast->cast = T_U64;
		cast->post = 1;
		cast->name = prog_alloc(c->p, strlen(sname) + 1);
		if (!cast->name)
			return -1;
		strcpy(cast->name, sname);
		cast->depth = base->depth + 1;
		n->a = base = cast;
		if (check_expr(c, base))
			return -1;
		ptr = true;
	}
	if (n->op ? !ptr : !lval) {
		prog_error(c->p, n->loc, n->op ? "'->%s' needs a pointer to a struct: cast it, as in ((struct NAME *)arg0)->%s" :
						 "'.%s' needs a struct: a field of struct type, as in ((struct NAME *)arg0)->inner.%s",
			   n->name, n->name);
		return -1;
	}
	obj = cast_object(c, n);
	if (!obj)
		return -1;
	if (o->field(obj, base->name, n->name, &f, why, sizeof(why), o->param_arg)) {
		prog_error(c->p, n->loc, "%s", why[0] ? why : "unknown field");
		return -1;
	}
	off = new_check_node(c, N_INT, n->loc);
	if (!off)
		return -1;
	off->ival = f.offset;
	if (f.kind == LANG_F_STRUCT) {
		/* the inner struct's address, typed by it */
		n->kind = N_BINOP;
		n->op = OP_ADD;
		n->b = off;
		n->depth = base->depth + 1;
		n->name = prog_alloc(c->p, strlen(f.sname) + 1);
		if (!n->name)
			return -1;
		strcpy(n->name, f.sname);
		return check_expr(c, n);
	}
	addr = new_check_node(c, N_BINOP, n->loc);
	if (!addr)
		return -1;
	addr->op = OP_ADD;
	addr->a = base;
	addr->b = off;
	addr->depth = base->depth + 1;
	n->a = addr;
	n->kind = N_DEREF;
	n->cast.kind = LANG_T_INT;
	n->cast.size = f.size;
	n->cast.is_signed = f.is_signed;
	n->name = prog_alloc(c->p, strlen(f.sname) + 1);
	if (!n->name)
		return -1;
	strcpy(n->name, f.kind == LANG_F_STRUCT_PTR ? f.sname : "");
	n->depth = addr->depth + 1;
	return check_expr(c, n);
}

/* The values a tuple type holds, those of tuples inside it included. */
static int tuple_values(const struct prog *p, const struct lang_type *t)
{
	const struct tuple_shape *s = shape_of(p, t);
	int n = 0;

	if (!s)
		return 1;
	for (int i = 0; i < s->n; i++)
		n += tuple_values(p, &s->parts[i]);
	return n;
}

/* (a, b, ...): integers, strings, symbols, probes and tuples of them (no
 * stacks), kept one after the other, a tuple inside as its parts. */
static int check_tuple(struct checker *c, struct node *n)
{
	struct lang_type parts[LANG_MAX_TUPLE];
	int i, idx, values = 0;

	if (n->nargs > LANG_MAX_TUPLE) {
		prog_error(c->p, n->loc, "a tuple has at most %d parts", LANG_MAX_TUPLE);
		return -1;
	}
	for (i = 0; i < n->nargs; i++) {
		struct node *a = n->args[i];
		char tn[64];

		/* bpftrace stops at the first part that fails; one of type
		 * 'none' makes the tuple's type 'none' */
		if (check_expr(c, a)) {
			n->none = a->none;
			return -1;
		}
		parts[i] = a->type;
		values += tuple_values(c->p, &a->type);
		if (values > LANG_MAX_TUPLE) {
			prog_error(c->p, n->loc, "a tuple holds at most %d values, those of the "
				   "tuples inside it included", LANG_MAX_TUPLE);
			return -1;
		}
		switch (a->type.kind) {
		case LANG_T_INT:
			parts[i].size = 8;
			break;
		case LANG_T_STR: case LANG_T_USYM: case LANG_T_PROBE: case LANG_T_TUPLE:
			break;
		default:
			type_name(&a->type, tn, sizeof(tn));
			prog_error(c->p, a->loc, "a tuple can not hold a value of type '%s' here", tn);
			return -1;
		}
	}
	idx = shape_index(c->p, parts, n->nargs);
	if (idx < 0) {
		prog_error(c->p, n->loc, "too many tuple types (at most %d)", LANG_MAX_SHAPES);
		return -1;
	}
	n->type.kind = LANG_T_TUPLE;
	n->type.is_signed = (uint8_t)idx;
	n->type.size = shape_size(&c->p->shapes[idx]);
	return 0;
}

/* EXPR.N of a tuple. */
static int check_tuple_get(struct checker *c, struct node *n)
{
	const struct tuple_shape *s;
	char tn[64];

	if (check_expr(c, n->a))
		return -1;
	s = shape_of(c->p, &n->a->type);
	if (!s) {
		if (c->collect) {
			n->type = T_I64;
			return 0;
		}
		type_short(&n->a->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "Can not access index %" PRId64 " on expression of type '%s'",
			   n->ival, tn);
		return -1;
	}
	if (n->ival < 0 || n->ival >= s->n) {
		prog_error(c->p, n->loc, "Invalid tuple index: %" PRId64 ". Found %d elements in tuple.",
			   n->ival, s->n);
		return -1;
	}
	n->type = storage_of(&s->parts[n->ival]);
	return 0;
}

/* A tuple assigned where one of another shape is already kept. */
static int tuple_mismatch(struct checker *c, const struct node *s, const struct lang_type *have,
			  const struct lang_type *assigned)
{
	char a[256], b[256];
	struct loc eq = s->loc;

	if (have->kind != LANG_T_TUPLE || assigned->kind != LANG_T_TUPLE ||
	    have->is_signed == assigned->is_signed)
		return 0;
	eq.col = (int)(s->ival >> 32);
	eq.col_end = (int)(uint32_t)s->ival;
	tuple_name(c->p, have, a, sizeof(a));
	tuple_name(c->p, assigned, b, sizeof(b));
	prog_error(c->p, eq, "Tuple type mismatch: %s != %s.", a, b);
	return -1;
}

static int check_expr(struct checker *c, struct node *n)
{
	struct var *v;
	int i;

	switch (n->kind) {
	case N_INT:
		n->type = T_I64;
		return 0;
	case N_STR:
		if (n->slen >= LANG_STRLEN) {
			prog_error(c->p, n->loc, "string literal is too long (at most %d bytes)", LANG_STRLEN - 1);
			return -1;
		}
		n->type.kind = LANG_T_STR;
		n->type.size = (uint16_t)(n->slen + 1);
		return 0;
	case N_BUILTIN:
		return check_builtin(c, n);
	case N_VAR:
		v = var_find(c, n->name);
		if (!v) {
			prog_error(c->p, n->loc, "Undefined or undeclared variable: $%s", n->name);
			return -1;
		}
		n->var = (int)(v - c->p->vars);
		n->type = v->type;
		n->agg = v->agg;
		if (v->none) {
			n->none = 1;
			return -1;
		}
		return 0;
	case N_MAP:
		return check_map_read(c, n);
	case N_BINOP:
		return check_binop(c, n);
	case N_UNOP:
		if (check_expr(c, n->a) && !n->a->none)
			return -1;
		if (!is_plain_int(n->a) && !c->collect) {
			char tn[64];
			const char *on = n->op == OP_NEG ? "-" : n->op == OP_NOT ? "~" : "!";

			value_name(n->a, tn, sizeof(tn));
			/* n->loc is the operator's token */
			prog_error(c->p, n->loc, "The %s operator can not be used on expressions of type '%s'", on, tn);
			return -1;
		}
		n->type = n->op == OP_LNOT ? T_U64 : n->a->type;
		if (n->op == OP_NEG)	/* bpftrace keeps the operand's sign: -arg0 is unsigned */
			n->type.size = 8;
		return 0;
	case N_TERNARY: {
		int ra = check_expr(c, n->a), rb = check_expr(c, n->b), rc = check_expr(c, n->c);

		if (ra && n->a->none)
			prog_error(c->p, n->loc, "Invalid condition in ternary: none");
		/* a branch of type none (a map nothing assigns) is typed as
		 * one: bpftrace compares it with the other */
		if (ra || (rb && !n->b->none) || (rc && !n->c->none))
			return -1;
	}
		if (c->collect) {
			n->type = n->b->type;
			return 0;
		}
		return check_ternary(c, n);
	case N_FIELD:
		return check_field(c, n);
	case N_TUPLE:
		return check_tuple(c, n);
	case N_TUPLE_GET:
		return check_tuple_get(c, n);
	case N_CAST:
		if (check_expr(c, n->a))
			return -1;
		if (n->name && check_struct_cast(c, n))
			return -1;
		if ((!is_int(n->a) && !c->collect) || n->a->agg) {
			struct loc tl = n->loc;
			char tn[64];

			/* as bpftrace words it, at "(TYPE)" (its end in ival) */
			if (n->ival > tl.col && n->ival < tl.col_end)
				tl.col_end = (int)n->ival;
			value_name(n->a, tn, sizeof(tn));
			prog_error(c->p, tl, "Casts are not supported for type: \"%s\"", tn);
			return -1;
		}
		if (n->post) {
			/* a pointer: its value is the address; deref reads cast.size */
			n->type = T_U64;
			n->c = (struct node *)NULL;
		} else {
			n->type = n->cast;
		}
		return 0;
	case N_DEREF:
		if (check_expr(c, n->a))
			return -1;
		if (!is_int(n->a) && !c->collect) {
			prog_error(c->p, n->loc, "Can not dereference a value that is not an integer or a pointer");
			return -1;
		}
		if (n->name) {
			/* a struct's field (check_field): its own size */
		} else if (n->a->kind == N_CAST && n->a->post) {
			n->cast = n->a->cast;
		} else {
			n->cast = T_I64;	/* bpftrace reads 8 bytes */
		}
		n->type = n->cast;
		return 0;
	case N_INCDEC:
		if (n->a->kind != N_VAR && n->a->kind != N_MAP) {
			/* (the parser lets only identifiers through, builtins:
			 * bpftrace points at the builtin after it, at the
			 * operator before it) */
			struct loc at = n->post ? n->a->loc :
				(struct loc){ n->loc.line, n->loc.col, n->loc.col + 2 };

			prog_error(c->p, at, "The %s operator must be applied to a map or variable",
				   n->op == OP_ADD ? "++" : "--");
			return -1;
		}
		if (n->a->kind == N_MAP) {
			struct mapinfo *mi = map_get(c, n->a);

			if (!mi || check_map_keys(c, n->a, mi))
				return -1;
			/* bpftrace says so in its last pass */
			if (mi->val_known && is_aggregate_kind(mi->d.kind)) {
				if (c->collect)
					return 0;
				return incdec_refused(c, n, kind_names[mi->d.kind]);
			}
			if (set_map_kind(c, n->a, mi, LANG_M_INT, &T_I64, NULL))
				return -1;
			if (mi->d.kind == LANG_M_INT && !mi->d.val.size)
				mi->d.val = T_I64;
			n->type = mi->d.val;
			return 0;
		}
		if (check_expr(c, n->a))
			return -1;
		if (n->a->agg && !c->collect)
			return incdec_refused(c, n, kind_names[n->a->agg]);
		if (!is_int(n->a)) {
			prog_error(c->p, n->loc, "The %s operator must be applied to an integer", n->op == OP_ADD ? "++" : "--");
			return -1;
		}
		n->type = n->a->type;
		return 0;
	case N_CALL:
		for (i = 0; i < (int)(sizeof(agg_names) / sizeof(agg_names[0])); i++)
			if (!strcmp(n->name, agg_names[i])) {
				prog_error(c->p, n->loc, "%s() should be directly assigned to a map", n->name);
				return -1;
			}
		return check_call(c, n, 0);
	default:
		prog_error(c->p, n->loc, "unexpected expression");
		return -1;
	}
}

/* A map that print(), clear(), zero() or delete() names but nothing
 * assigns: said at each such call, in source order with the pass's other
 * errors, as bpftrace's final pass says it.  (A map assigned somewhere
 * may get its type later in this pass, from another map's value.) */
static int check_map_defined(struct checker *c, struct node *m, struct mapinfo *mi)
{
	if (c->collect || mi->val_known || mi->none || program_assigns_map(c->p, mi->name))
		return 0;
	prog_error(c->p, m->loc, "Undefined map: %s", mi->name);
	return -1;
}

static int check_print_map_arg(struct checker *c, struct node *n, struct node *m)
{
	struct mapinfo *mi;

	if (m->kind != N_MAP) {
		prog_error(c->p, n->loc, "%s() expects a map to be provided", n->name);
		return -1;
	}
	mi = map_get(c, m);
	if (!mi)
		return -1;
	if (m->nargs) {
		prog_error(c->p, n->loc, "The map passed to %s() should not be indexed by a key", n->name);
		return -1;
	}
	n->map = m->map;
	return check_map_defined(c, m, mi);
}

/* printf argument checking against the conversion specifiers. */

/* The arguments of printf(), cat() or system(), each checked (every
 * error said); the first of type 'none' fails its conversion too. */
static int check_printf_args(struct checker *c, struct node *n, const char *spec)
{
	int i, rc = 0, none = 0;

	for (i = 1; i < n->nargs; i++)
		if (check_expr(c, n->args[i])) {
			rc = -1;
			if (n->args[i]->none && !none)
				none = i;
		}
	if (none)
		prog_error(c->p, n->loc, "%s: %%%c specifier expects a value of type %s (none supplied)",
			   n->name, spec[none - 1], spec[none - 1] == 's' ? "string" : "integer");
	return rc;
}

/* printf(), cat() and system(): a format and its arguments, checked as
 * bpftrace checks them, with the function's name in the messages. */
static int check_printf(struct checker *c, struct node *n)
{
	const char *fn = n->name;
	struct node *f;
	const char *s;
	int want = 0, i;
	char spec[LANG_MAX_FMT_ARGS + 1];

	if (n->nargs < 1) {
		prog_error(c->p, n->loc, "%s() requires at least one argument (0 provided)", fn);
		return -1;
	}
	f = n->args[0];
	if (f->kind != N_STR) {
		char tn[64];

		if (check_expr(c, f))
			return -1;
		snprintf(tn, sizeof(tn), "%s", f->type.kind == LANG_T_INT ? "integer" : "string");
		prog_error(c->p, n->loc, "%s() expects a string literal (%s provided)", fn, tn);
		return -1;
	}
	{
		size_t pos = 0, st, en;
		char conv;
		int wide;

		while (lang_fmt_token(f->name, pos, &st, &en, &conv, &wide)) {
			if (want == LANG_MAX_FMT_ARGS) {
				prog_error(c->p, n->loc, "%s: Too many arguments for format string (at most %d)", fn,
					   LANG_MAX_FMT_ARGS);
				return -1;
			}
			spec[want++] = conv;
			pos = en;
		}
		(void)s;
	}
	if (n->nargs - 1 < want) {
		prog_error(c->p, n->loc, "%s: Not enough arguments for format string (%d supplied, %d expected)", fn,
			   n->nargs - 1, want);
		return -1;
	}
	if (n->nargs - 1 > want) {
		prog_error(c->p, n->loc, "%s: Too many arguments for format string (%d supplied, %d expected)", fn,
			   n->nargs - 1, want);
		return -1;
	}
	if (check_printf_args(c, n, spec))
		return -1;
	for (i = 1; i < n->nargs; i++) {
		struct node *a = n->args[i];
		char k = spec[i - 1];

		if (c->collect)
			continue;
		if (a->type.kind == LANG_T_NONE) {
			prog_error(c->p, a->loc, "%s: argument %d has no value", fn, i);
			return -1;
		}
		if (a->agg) {
			/* an aggregate's value is not printable, as in bpftrace */
			prog_error(c->p, n->loc, "%s: %%%c specifier expects a value of type %s (%s supplied)", fn,
				   k, k == 's' ? "string" : "integer", kind_names[a->agg]);
			return -1;
		}
		if (a->type.kind == LANG_T_TUPLE) {
			prog_error(c->p, n->loc, "%s: %%%c specifier expects a value of type %s (tuple supplied)", fn,
				   k, k == 's' ? "string" : "integer");
			return -1;
		}
		bool is_buf_spec = k == 'r' || k == 'R' || k == 'H';

		if (is_buf_spec && a->type.kind != LANG_T_BUF) {
			prog_error(c->p, n->loc, "%s: %%%s specifier expects a value of type buffer (%s supplied)", fn,
				   k == 'r' ? "r" : k == 'R' ? "rx" : "rh",
				   a->type.kind == LANG_T_INT ? "integer" : "string");
			return -1;
		}
		if (k != 's' && !is_buf_spec && a->type.kind != LANG_T_INT) {
			prog_error(c->p, n->loc, "%s: %%%c specifier expects a value of type integer (%s supplied)", fn,
				   k, a->type.kind == LANG_T_BUF ? "buffer" : "string");
			return -1;
		}
		if (k == 's' && (a->type.kind == LANG_T_INT || a->type.kind == LANG_T_BUF)) {
			prog_error(c->p, n->loc, "%s: %%s specifier expects a value of type string (%s supplied)", fn,
				   a->type.kind == LANG_T_INT ? "integer" : "buffer");
			return -1;
		}
	}
	return 0;
}

/* join(ARRAY[, DELIM]): the strings of a NULL-terminated array of
 * pointers (argv-like), joined by DELIM (a string literal, " " by
 * default) into one output line. */
static int check_join(struct checker *c, struct node *n)
{
	char tn[64];

	if (need_args(c, n, 1, 2) || check_expr(c, n->args[0]))
		return -1;
	if (!is_int(n->args[0]) && !c->collect) {
		type_kind_name(&n->args[0]->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "join() only supports int or pointer arguments (%s provided)", tn);
		return -1;
	}
	if (n->nargs == 2 && n->args[1]->kind != N_STR) {
		if (check_expr(c, n->args[1]))
			return -1;
		type_kind_name(&n->args[1]->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "join() expects a string literal (%s provided)", tn);
		return -1;
	}
	return 0;
}

/* strncmp(a, b, N): 0 when the strings' first N bytes (up to their ends)
 * are equal, else 1, as bpftrace; N an integer literal. */
static int check_strncmp(struct checker *c, struct node *n)
{
	if (need_args(c, n, 3, 3))
		return -1;
	for (int k = 0; k < 3; k++)
		if (check_expr(c, n->args[k]))
			return -1;
	if (c->collect)
		goto out;
	for (int k = 0; k < 2; k++)
		if (n->args[k]->type.kind != LANG_T_STR) {
			char tn[64];

			type_kind_name(&n->args[k]->type, tn, sizeof(tn));
			prog_error(c->p, n->loc, "strncmp() only supports string arguments (%s provided)", tn);
			return -1;
		}
	if (n->args[2]->kind != N_INT || n->args[2]->ival < 0) {
		char tn[64];

		type_kind_name(&n->args[2]->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "strncmp() expects a integer literal (%s provided)", tn);
		return -1;
	}
out:
	n->type = T_U64;
	return 0;
}

/* sizeof(TYPE) or sizeof(EXPR): a constant, the bytes bpftrace gives the
 * value (8 for integers, a string's buffer...). */
static int check_sizeof(struct checker *c, struct node *n)
{
	static const struct { const char *name; int size; } types[] = {
		{ "int8", 1 }, { "int16", 2 }, { "int32", 4 }, { "int64", 8 },
		{ "uint8", 1 }, { "uint16", 2 }, { "uint32", 4 }, { "uint64", 8 },
	};
	struct node *a;
	int64_t size = -1;

	if (need_args(c, n, 1, 1))
		return -1;
	a = n->args[0];
	if (a->kind == N_BUILTIN && a->name)
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcmp(a->name, types[i].name))
				size = types[i].size;
	if (size < 0) {
		if (check_expr(c, a))
			return -1;
		size = a->type.size;
		/* a variable keeps the size of its type as first assigned
		 * (its register or slot is wider) */
		if (a->kind == N_VAR && c->p->vars[a->var].decl.size)
			size = c->p->vars[a->var].decl.size;
	}
	n->type = T_U64;
	if (c->collect)
		return 0;
	if (size <= 0) {
		prog_error(c->p, n->loc, "sizeof() of a value with no size");
		return -1;
	}
	n->kind = N_INT;
	n->ival = size;
	n->nargs = 0;
	return 0;
}

/* reg("NAME"): a register of the probed thread, by bpftrace's name for
 * it (kp_arch.h); the instruction pointer at an entry is the probed
 * address. */
static int check_reg(struct checker *c, struct node *n)
{
	static const char *const names[] = { KP_REG_NAMES };
	struct node *a;

	_Static_assert(sizeof(names) / sizeof(names[0]) * 8 == sizeof(struct pt_regs),
		       "KP_REG_NAMES names every word of struct pt_regs");
	if (need_args(c, n, 1, 1))
		return -1;
	a = n->args[0];
	if (a->kind != N_STR) {
		char tn[64];

		if (check_expr(c, a))
			return -1;
		type_kind_name(&a->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "reg() expects a string literal (%s provided)", tn);
		return -1;
	}
	for (int k = 0; k < c->pr->natt; k++) {
		int kind = c->pr->att[k].kind;

		if (kind == LANG_P_BEGIN || kind == LANG_P_END || kind == LANG_P_INTERVAL) {
			prog_error(c->p, n->loc, "reg can not be used with \"%s\" probes",
				   kind == LANG_P_BEGIN ? "BEGIN" : kind == LANG_P_END ? "END" : "interval");
			return -1;
		}
	}
	n->ival = -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(a->name, names[i]))
			n->ival = (int64_t)i * 8;
	if (n->ival < 0) {
		prog_error(c->p, n->loc, "'%s' is not a valid register on this architecture (%s)",
			   a->name, KP_ARCH_NAME);
		return -1;
	}
	n->post = !strcmp(a->name, KP_REG_IP);
	n->type = T_U64;
	return 0;
}

/* strftime(FMT, NS): a time stamp the tool prints as local time in the
 * format FMT (a string literal; %f the microseconds), NS nanoseconds of
 * nsecs' clock. */
static int check_strftime(struct checker *c, struct node *n)
{
	char tn[64];

	if (n->nargs < 2) {
		prog_error(c->p, n->loc, "strftime() requires at least 2 arguments (%d provided)", n->nargs);
		return -1;
	}
	if (n->nargs > 2) {
		prog_error(c->p, n->loc, "strftime() takes up to 2 arguments (%d provided)", n->nargs);
		return -1;
	}
	if (check_expr(c, n->args[0]) || check_expr(c, n->args[1]))
		return -1;
	if (n->args[0]->kind != N_STR && !c->collect) {
		type_kind_name(&n->args[0]->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "strftime() expects a string literal (%s provided)", tn);
		return -1;
	}
	if (!is_int(n->args[1]) && !c->collect) {
		type_kind_name(&n->args[1]->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "strftime() only supports integer arguments (%s provided)", tn);
		return -1;
	}
	n->type.kind = LANG_T_TIMESTAMP;
	n->type.is_signed = 0;
	n->type.size = 16;
	return 0;
}

/* buf(DATA, LEN): LEN bytes (at most LANG_STRLEN, longer literals warned
 * about as bpftrace does) of the target's memory at DATA, or of the
 * string DATA; printed with %r, non-printable bytes as \xNN. */
static int check_buf(struct checker *c, struct node *n)
{
	struct node *data, *len;
	char tn[64];

	if (need_args(c, n, 1, 2) || check_expr(c, n->args[0]))
		return -1;
	data = n->args[0];
	if (n->nargs == 1 && !c->collect) {
		type_kind_name(&data->type, tn, sizeof(tn));
		prog_error(c->p, n->loc, "buf() expects a length argument for non-array type %s", tn);
		return -1;
	}
	len = n->nargs > 1 ? n->args[1] : NULL;
	if (len && check_expr(c, len))
		return -1;
	if (!c->collect) {
		if (!is_int(data) && data->type.kind != LANG_T_STR) {
			type_name(&data->type, tn, sizeof(tn));
			prog_error(c->p, n->loc, "buf() expects an integer, a pointer or a string (%s provided)", tn);
			return -1;
		}
		if (!is_int(len)) {
			type_kind_name(&len->type, tn, sizeof(tn));
			prog_error(c->p, n->loc, "buf() expects an integer length (%s provided)", tn);
			return -1;
		}
		if (len->kind == N_UNOP && len->op == OP_NEG && len->a->kind == N_INT &&
		    len->a->ival > 0) {
			prog_error(c->p, n->loc, "buf cannot use negative length (-%lld)",
				   (long long)len->a->ival);
			return -1;
		}
		if (len->kind == N_INT && (len->ival < 0 || len->ival > LANG_STRLEN))
			prog_warning(c->p, n->loc, "buf() length is too long and will be shortened to %d "
				     "bytes (see BPFTRACE_STRLEN)", LANG_STRLEN);
	}
	n->type.kind = LANG_T_BUF;
	n->type.is_signed = 0;
	n->type.size = LANG_BUF_SIZE;
	return 0;
}

static int check_call(struct checker *c, struct node *n, int as_stmt)
{
	const char *f = n->name;
	size_t i;
	int k;

	if (!strcmp(f, "printf") || !strcmp(f, "cat") || !strcmp(f, "system")) {
		if (!as_stmt)
			goto non_value;
		if (f[0] == 's' && !(c->p->opts && c->p->opts->unsafe)) {
			prog_error(c->p, n->loc, "system() is an unsafe function being used in safe mode");
			return -1;
		}
		return check_printf(c, n);
	}
	if (!strcmp(f, "print")) {
		if (need_args(c, n, 1, 3))
			return -1;
		/* an indexed map too: bpftrace refuses print(@x[1]) */
		if (n->args[0]->kind == N_MAP) {
			struct mapinfo *mi;

			if (check_print_map_arg(c, n, n->args[0]) ||
			    (n->nargs > 1 && check_expr(c, n->args[1])) ||
			    (n->nargs > 2 && check_expr(c, n->args[2])))
				return -1;
			mi = map_get(c, n->args[0]);
			if (!c->collect && n->nargs > 1 && mi && mi->val_known &&
			    mi->d.kind == LANG_M_STATS)
				prog_warning(c->p, n->loc, "print()'s top and div arguments are ignored "
					     "when used on stats() maps.");
			return 0;
		}
		if (n->nargs > 1) {
			prog_error(c->p, n->loc, "Non-map print() only takes 1 argument, %d found", n->nargs);
			return -1;
		}
		return check_expr(c, n->args[0]);
	}
	if (!strcmp(f, "clear") || !strcmp(f, "zero")) {
		if (need_args(c, n, 1, 1))
			return -1;
		return check_print_map_arg(c, n, n->args[0]);
	}
	if (!strcmp(f, "delete")) {
		struct mapinfo *mi;

		if (!as_stmt) {
			prog_error(c->p, n->loc, "delete() should not be used in an assignment or as a map key");
			return -1;
		}
		if (need_args(c, n, 1, 1))
			return -1;
		if (n->args[0]->kind != N_MAP) {
			prog_error(c->p, n->loc, "delete() expects a map to be provided");
			return -1;
		}
		mi = map_get(c, n->args[0]);
		if (!mi || check_map_keys(c, n->args[0], mi))
			return -1;
		n->map = n->args[0]->map;
		return check_map_defined(c, n->args[0], mi);
	}
	if (!strcmp(f, "time")) {
		if (need_args(c, n, 0, 1))
			return -1;
		if (n->nargs && n->args[0]->kind != N_STR) {
			if (check_expr(c, n->args[0]))
				return -1;
			prog_error(c->p, n->loc, "time() expects a string literal (%s provided)",
				   base_type_name(&n->args[0]->type));
			return -1;
		}
		return 0;
	}
	if (!strcmp(f, "exit")) {
		return need_args(c, n, 0, 0);
	}
	if (!strcmp(f, "signal")) {
		static const char *const sigs[] = {
			"SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS",
			"SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM",
			"SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP",
		};

		if (need_args(c, n, 1, 1))
			return -1;
		if (probe_kinds_allow(c, n, 1, 1, 1, "signal can only be used with uprobe and uretprobe probes"))
			return -1;
		if (n->args[0]->kind == N_STR) {
			for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
				if (!strcmp(n->args[0]->name, sigs[i]) ||
				    !strcmp(n->args[0]->name, sigs[i] + 3)) {
					n->args[0]->kind = N_INT;
					n->args[0]->ival = (int64_t)i + 1;
					break;
				}
			if (n->args[0]->kind == N_STR) {
				prog_error(c->p, n->loc, "%s is not a valid signal", n->args[0]->name);
				return -1;
			}
		}
		if (check_expr(c, n->args[0]))
			return -1;
		if (!is_int(n->args[0]) && !c->collect) {
			prog_error(c->p, n->loc, "signal() only accepts an integer or a signal name");
			return -1;
		}
		if (n->args[0]->kind == N_INT && (n->args[0]->ival < 1 || n->args[0]->ival > 64)) {
			prog_error(c->p, n->loc, "%ld is not a valid signal, allowed range: [1,64]", (long)n->args[0]->ival);
			return -1;
		}
		return 0;
	}
	if (!strcmp(f, "override")) {
		if (need_args(c, n, 1, 1))
			return -1;
		if (probe_kinds_allow(c, n, 1, 0, 0, "override() can only be used with uprobe probes at a function entry"))
			return -1;
		for (k = 0; k < c->pr->natt; k++)
			if (c->pr->att[k].offset) {
				prog_error(c->p, n->loc, "override() can only be used at a function entry (no +offset)");
				return -1;
			}
		if (check_expr(c, n->args[0]))
			return -1;
		if (!is_int(n->args[0]) && !c->collect) {
			prog_error(c->p, n->loc, "override() only supports integer arguments");
			return -1;
		}
		return 0;
	}
	if (!strcmp(f, "str")) {
		const struct node *len = n->nargs == 2 ? n->args[1] : NULL;

		if (need_args(c, n, 1, 2))
			return -1;
		if (n->args[0]->kind == N_BUILTIN && n->args[0]->op == -1)
			positional_as_string(c, n->args[0]);	/* keeps op -1: see below */
		for (k = 0; k < n->nargs; k++)
			if (check_expr(c, n->args[k]))
				return -1;
		if (len && len->kind == N_UNOP && len->op == OP_NEG && len->a->kind == N_INT &&
		    len->a->ival > 0) {
			/* sic: bpftrace's message has no space after str */
			prog_error(c->p, n->loc, "strcannot use negative length (-%lld)",
				   (long long)len->a->ival);
			return -1;
		}
		/* str($N) is the parameter itself; bpftrace refuses str() of
		 * any other string */
		if (!c->collect && n->args[0]->type.kind == LANG_T_STR && n->args[0]->kind == N_STR &&
		    n->args[0]->op == -1) {
			struct node *a = n->args[0];

			if (len && len->kind == N_INT && (uint64_t)len->ival < a->slen) {
				a->slen = (size_t)len->ival;	/* str($N, LEN): its first LEN bytes */
				if (check_expr(c, a))
					return -1;
			}
			n->type = a->type;
			n->post = 1;	/* str() of a string: itself */
			return 0;
		}
		if ((!c->collect && !is_int(n->args[0])) || n->args[0]->agg) {
			char tn[64];

			value_name(n->args[0], tn, sizeof(tn));
			prog_error(c->p, n->loc, "str() expects an integer or a pointer type as first argument (%s provided)", tn);
			return -1;
		}
		if (n->nargs == 2 && !c->collect && !is_int(n->args[1])) {
			char tn[64];

			type_name(&n->args[1]->type, tn, sizeof(tn));
			prog_error(c->p, n->loc, "str() only supports integer arguments (%s provided)",
				   n->args[1]->type.kind == LANG_T_STR ? "string" : tn);
			return -1;
		}
		n->type.kind = LANG_T_STR;
		n->type.size = LANG_STRLEN;
		return 0;
	}
	if (!strcmp(f, "usym")) {
		if (need_args(c, n, 1, 1) || check_expr(c, n->args[0]))
			return -1;
		if (!is_int(n->args[0]) && !c->collect) {
			prog_error(c->p, n->loc, "usym() expects an integer or pointer argument");
			return -1;
		}
		n->type.kind = LANG_T_USYM;
		n->type.size = 8;
		return 0;
	}
	if (!strcmp(f, "ustack")) {
		int64_t frames = LANG_USTACK_MAX;
		bool perf = false;

		if (need_args(c, n, 0, 2))
			return -1;
		for (k = 0; k < n->nargs; k++) {
			struct node *a = n->args[k];

			if (a->kind == N_BUILTIN && a->name && (!strcmp(a->name, "perf") || !strcmp(a->name, "bpftrace"))) {
				if (k) {
					prog_error(c->p, a->loc, "ustack() takes the mode first: ustack(mode, frames)");
					return -1;
				}
				perf = !strcmp(a->name, "perf");
				continue;
			}
			if (a->kind != N_INT) {
				prog_error(c->p, n->loc, "ustack() expects an integer literal or a mode (bpftrace, perf)");
				return -1;
			}
			frames = a->ival;
		}
		if (frames < 1 || frames > LANG_USTACK_MAX) {
			prog_error(c->p, n->loc, "ustack() frames must be in [1, %d] (%ld provided)",
				   LANG_USTACK_MAX, (long)frames);
			return -1;
		}
		n->kind = N_BUILTIN;
		n->op = B_USTACK;
		n->post = 1;
		n->ival = frames;
		n->type.kind = perf ? LANG_T_USTACK_PERF : LANG_T_USTACK;
		n->type.size = 8 + 8 * LANG_USTACK_MAX;
		return 0;
	}
	if (!strcmp(f, "join")) {
		if (!as_stmt)
			goto non_value;
		return check_join(c, n);
	}
	if (!strcmp(f, "strncmp"))
		return check_strncmp(c, n);
	if (!strcmp(f, "sizeof"))
		return check_sizeof(c, n);
	if (!strcmp(f, "reg"))
		return check_reg(c, n);
	if (!strcmp(f, "strftime"))
		return check_strftime(c, n);
	if (!strcmp(f, "buf"))
		return check_buf(c, n);
	for (i = 0; i < sizeof(unsupported_funcs) / sizeof(unsupported_funcs[0]); i++)
		if (!strcmp(f, unsupported_funcs[i])) {
			prog_error(c->p, n->loc, "%s() is not supported by kprobe run", f);
			return -1;
		}
	{
		struct loc l = n->loc;

		l.col_end = (int)n->slen;
		prog_error(c->p, l, "Unknown function: %s", f);
	}
	return -1;
non_value:
	prog_error(c->p, n->loc, "%s() should not be used in an assignment or as a map key", f);
	return -1;
}

/* @dst = @src in a collecting pass: @dst's type is @src's value type,
 * once @src has one (a plain integer or string); until then, and for
 * other values, it may come from a later pass. */
static int collect_map_copy(struct checker *c, struct node *s, struct node *lhs,
			    struct mapinfo *mi, struct node *rhs)
{
	const struct mapinfo *src;

	if (s->op || rhs->kind != N_MAP || rhs->map < 0)
		return 0;
	src = &c->p->maps[rhs->map];
	if (!src->val_known || (src->d.kind != LANG_M_INT && src->d.kind != LANG_M_STR))
		return 0;
	if (mi->val_known)
		return 0;	/* compared in the last pass, with its words */
	return set_map_kind(c, lhs, mi, src->d.kind, &src->d.val, rhs);
}

/* A key of type 'none' in an assignment's map: bpftrace's words, its
 * reason left empty. */
static int map_key_none(struct checker *c, struct node *m)
{
	for (int i = 0; i < m->nargs; i++)
		if (m->args[i]->none) {
			/* at the key's place, as its Undefined map error */
			prog_error(c->p, m->args[i]->loc, "Invalid expression for assignment: ");
			break;
		}
	return -1;
}

/* A value of type 'none' assigned to a map with no type yet: the map is
 * undefined here, and reads as 'none' elsewhere with no error of its own
 * (as bpftrace's final pass has it). */
static void map_assigned_none(struct checker *c, struct node *m, struct node *val,
			      struct mapinfo *mi)
{
	prog_error(c->p, m->loc, "Undefined map: %s", mi->name);
	prog_error(c->p, val->loc, "Invalid expression for assignment: none");
	mi->none = 1;
}

/* A new variable given a value of type 'none': bpftrace says it is
 * undefined, at the '=' (its place for the statement), and its uses
 * are of type 'none'. */
static void var_assigned_none(struct checker *c, struct node *s, struct node *val)
{
	struct loc eq = s->loc;

	eq.col = (int)(s->ival >> 32);
	eq.col_end = (int)(uint32_t)s->ival;
	prog_error(c->p, eq, "Undefined variable: $%s", s->a->name);
	prog_error(c->p, val->loc, "Invalid expression for assignment: none");
}

static int check_assign(struct checker *c, struct node *s)
{
	struct node *lhs = s->a, *rhs = s->b;
	int bad, none;

	if (lhs->kind == N_MAP) {
		struct mapinfo *mi = map_get(c, lhs);

		if (!mi)
			return -1;
		if (rhs->kind == N_CALL && agg_kind(rhs->name)) {
			if (s->op) {
				prog_error(c->p, s->loc, "compound assignment of %s() is not supported", rhs->name);
				return -1;
			}
			if (check_map_keys(c, lhs, mi))
				return map_key_none(c, lhs);
			return check_agg(c, rhs, lhs, mi);
		}
		if (rhs->kind == N_CALL && (!strcmp(rhs->name, "delete") || !strcmp(rhs->name, "printf") ||
					    !strcmp(rhs->name, "cat") || !strcmp(rhs->name, "system") ||
					    !strcmp(rhs->name, "print") || !strcmp(rhs->name, "clear") ||
					    !strcmp(rhs->name, "zero") || !strcmp(rhs->name, "exit") ||
					    !strcmp(rhs->name, "time") || !strcmp(rhs->name, "signal") ||
					    !strcmp(rhs->name, "override"))) {
			prog_error(c->p, rhs->loc, "%s() should not be used in an assignment or as a map key", rhs->name);
			return -1;
		}
		if (check_map_keys(c, lhs, mi)) {
			map_key_none(c, lhs);
			check_expr(c, rhs);	/* its own errors said too */
			return -1;
		}
		if (check_expr(c, rhs)) {
			if (rhs->none && !mi->val_known)
				map_assigned_none(c, lhs, rhs, mi);
			return -1;
		}
		if (c->collect && rhs->type.kind == LANG_T_INT && read_of_map(rhs))
			return collect_map_copy(c, s, lhs, mi, rhs);
		if (c->collect && tuple_of_untyped_map(c->p, rhs))
			return 0;
		if (rhs->type.kind == LANG_T_NONE) {
			prog_error(c->p, rhs->loc, "Invalid expression for assignment: no value");
			return -1;
		}
		if (s->op && rhs->type.kind != LANG_T_INT) {
			prog_error(c->p, s->loc, "compound assignment needs an integer");
			return -1;
		}
		{
			struct lang_type t = rhs->type;

			if (s->op) {	/* @m OP= v is @m = @m OP v */
				struct lang_type m = T_I64;

				m.is_signed = (uint8_t)map_read_signed(c, mi);
				compound_warnings(c, s, &m, rhs);
				t.is_signed = (uint8_t)binop_signed(s->op, map_read_signed(c, mi),
								    rhs->type.is_signed);
			}
			if (mi->val_known && mi->d.kind == LANG_M_TUPLE &&
			    tuple_mismatch(c, s, &mi->d.val, &t))
				return -1;
			if (set_map_kind(c, lhs, mi, kind_of_value(&t), &t, rhs))
				return -1;
			if (mi->d.kind == LANG_M_INT && !c->collect && rhs->cast.kind == 0 && !rhs->agg)
				mi->d.val.is_signed = t.is_signed;
		}
		return 0;
	}
	/* a scratch variable; one whose value failed is still assigned, an
	 * integer, so that its uses do not fail too (bpftrace types them so) */
	bad = check_expr(c, rhs);
	none = bad && rhs->none;
	if (bad)
		rhs->type = T_I64;
	else if (rhs->type.kind == LANG_T_NONE) {
		prog_error(c->p, rhs->loc, "Invalid expression for assignment: no value");
		return -1;
	}
	{
		struct var *v = var_find(c, lhs->name);
		struct prog *p = c->p;

		if (!v) {
			if (s->op) {
				prog_error(p, lhs->loc, "Undefined or undeclared variable: $%s", lhs->name);
				return -1;
			}
			if (p->nvars == p->cvars) {
				int cap = p->cvars ? p->cvars * 2 : 16;
				struct var *nv = realloc(p->vars, sizeof(*nv) * (size_t)cap);

				if (!nv) {
					prog_error(p, lhs->loc, "out of memory");
					return -1;
				}
				p->vars = nv;
				p->cvars = cap;
			}
			if (none)
				var_assigned_none(c, s, rhs);
			v = &p->vars[p->nvars++];
			memset(v, 0, sizeof(*v));
			v->name = lhs->name;
			v->probe = c->probe_no;
			v->none = none;
			v->type = none ? (struct lang_type){ 0 } : rhs->type;
			v->agg = none ? 0 : rhs->agg;
			if (v->type.kind == LANG_T_INT)
				v->type.size = 8;
			if (v->type.kind == LANG_T_STR)
				v->type.size = LANG_STRLEN;
			v->reg = -1;
			v->off = -1;
			v->decl = rhs->type;
		} else if (v->none) {
			/* its error was said where it got 'none' */
		} else if (tuple_mismatch(c, s, &v->type, &rhs->type)) {
			return -1;
		} else if (v->type.kind != rhs->type.kind || (!bad && v->agg != rhs->agg)) {
			char have[64], want[64];
			struct loc eq = s->loc;

			eq.col = (int)(s->ival >> 32);
			eq.col_end = (int)(uint32_t)s->ival;
			value_name(rhs, have, sizeof(have));
			if (v->agg)
				snprintf(want, sizeof(want), "%s", kind_names[v->agg]);
			else
				type_short(&v->decl, want, sizeof(want));
			prog_error(p, eq, "Type mismatch for $%s: trying to assign value of type '%s' when variable already contains a value of type '%s'",
				   lhs->name, have, want);
			return -1;
		}
		if (s->op && !bad)
			compound_warnings(c, s, &v->type, rhs);
		lhs->var = (int)(v - p->vars);
		lhs->type = v->type;
	}
	return bad ? -1 : 0;
}

static int check_stmts(struct checker *c, struct node *s);

/* A read of a hist, lhist or stats map in the expression e that nothing
 * refused (bpftrace lets a few such uses by: an assignment, a tuple, a
 * comparison of two), or NULL: its value is nothing to compute with. */
static const struct node *unreadable_in(const struct node *e)
{
	const struct node *u = NULL;

	if (!e || e->unreadable)
		return e;
	if (e->kind >= S_EXPR && e->kind <= S_RETURN)
		return NULL;
	if ((u = unreadable_in(e->a)) || (u = unreadable_in(e->b)) || (u = unreadable_in(e->c)))
		return u;
	for (int i = 0; i < e->nargs && !u; i++)
		u = unreadable_in(e->args[i]);
	return u;
}

/* After an expression of a statement checked without an error. */
static int refuse_unreadable(struct checker *c, const struct node *e)
{
	const struct node *u = c->collect ? NULL : unreadable_in(e);

	if (!u)
		return 0;
	prog_error(c->p, u->loc, "the value of a %s() map can not be read in an expression",
		   kind_names[u->agg]);
	return -1;
}

static int check_stmt(struct checker *c, struct node *s)
{
	switch (s->kind) {
	case S_EXPR:
		if (s->a->kind == N_CALL)
			return check_call(c, s->a, 1) || refuse_unreadable(c, s->a);
		return check_expr(c, s->a) || refuse_unreadable(c, s->a);
	case S_ASSIGN:
		return check_assign(c, s) || refuse_unreadable(c, s->a) || refuse_unreadable(c, s->b);
	case S_IF: {
		/* the condition's errors, then both branches' (bpftrace's
		 * visitor goes on into them) */
		int rcond = check_expr(c, s->a), bad = rcond && !s->a->none, rb, rc = 0;

		/* (a none condition is refused as one) */
		if (!bad && !is_plain_int(s->a) && !c->collect) {
			/* bpftrace's words, and its place: none (1:1-1) */
			static const struct loc nowhere = { 1, 1, 1 };

			prog_error(c->p, nowhere, "Invalid condition in if(): %s",
				   s->a->agg ? kind_names[s->a->agg] : base_type_name(&s->a->type));
			bad = 1;
		} else if (!rcond && refuse_unreadable(c, s->a)) {
			bad = 1;
		}
		rb = check_stmts(c, s->b);
		if (s->c)
			rc = s->c->kind == S_IF ? check_stmt(c, s->c) : check_stmts(c, s->c);
		return bad || rb || rc ? -1 : 0;
	}
	case S_UNROLL:
		if (s->post) {	/* unroll($N): the parameter's value */
			long long v;

			struct loc l = s->loc;

			l.col_end--;	/* bpftrace points at unroll( up to the parameter */
			if (positional_value(c->p, l, s->ival, false, &v))
				return -1;
			s->ival = v;
			s->post = 0;
		}
		{
			int bad = 0;

			/* said, and the body checked still, as bpftrace does */
			if (s->ival > 100) {
				prog_error(c->p, s->loc, "unroll maximum value is 100");
				bad = 1;
			} else if (s->ival < 1) {
				prog_error(c->p, s->loc, "unroll minimum value is 1");
				bad = 1;
			}
			return check_stmts(c, s->b) || bad ? -1 : 0;
		}
	case S_WHILE: {
		int r;

		if (check_expr(c, s->a))
			return -1;
		if (!is_int(s->a) && !c->collect) {
			prog_error(c->p, s->a->loc, "Invalid condition in while(): %s", "not an integer");
			return -1;
		}
		c->loop_depth++;
		r = check_stmts(c, s->b);
		c->loop_depth--;
		return r;
	}
	case S_BREAK:
	case S_CONTINUE:
		if (!c->loop_depth) {
			prog_error(c->p, s->loc, "%s used outside of a loop", s->kind == S_BREAK ? "break" : "continue");
			return -1;
		}
		return 0;
	case S_RETURN:
		return 0;
	default:
		prog_error(c->p, s->loc, "unexpected statement");
		return -1;
	}
}

/* Every statement, the ones after a failing one too (bpftrace reports
 * every error of a pass); -1 when one failed. */
static int check_stmts(struct checker *c, struct node *s)
{
	int rc = 0;

	for (; s; s = s->next)
		if (check_stmt(c, s))
			rc = -1;
	return rc;
}

/* A bare target name that leads to a file of another name: its path,
 * which the probe then names, and bpftrace prints. */
static void resolve_target_path(struct checker *c, struct attach *a)
{
	const struct lang_compile_opts *o = c->p->opts;
	char path[4096], *copy;
	size_t n;

	if (!o->target_path || strchr(a->target, '/') ||
	    !o->target_path(a->target, path, sizeof(path), o->param_arg))
		return;
	n = strlen(path) + 1;
	copy = prog_alloc(c->p, n);
	if (copy) {
		memcpy(copy, path, n);
		a->target = copy;
	}
}

/* The file a probe names, there to attach to, as bpftrace requires
 * before it checks anything else (a glob is matched later). */
static int check_target_file(struct checker *c, struct attach *a)
{
	const struct lang_compile_opts *o = c->p->opts;

	if (!c->collect || !o || !o->target_exists || !*a->target || strpbrk(a->target, "*?["))
		return 0;
	if (o->target_exists(a->target, o->param_arg)) {
		resolve_target_path(c, a);
		return 0;
	}
	prog_error(c->p, a->loc, "%s target file '%s' does not exist or is not executable",
		   a->kind == LANG_P_USDT ? "usdt" : "uprobe", a->target);
	return -1;
}

static int check_attach(struct checker *c, struct attach *a)
{
	switch (a->kind) {
	case LANG_P_USDT:
		if (!*a->func) {
			prog_error(c->p, a->loc, "invalid probe: %s", a->text);
			return -1;
		}
		return check_target_file(c, a);
	case LANG_P_UPROBE:
	case LANG_P_URETPROBE:
		return check_target_file(c, a);
	case 0: {
		static const char *const known[] = {
			"kprobe", "kretprobe", "tracepoint", "rawtracepoint", "profile", "software",
			"hardware", "watchpoint", "asyncwatchpoint", "kfunc", "kretfunc", "fentry",
			"fexit", "iter", "k", "kr", "t", "rt", "p", "s", "h", "w", "aw", "f", "fr",
		};
		size_t i;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (!strcmp(a->target, known[i])) {
				prog_error(c->p, a->loc, "%s probes are not supported by kprobe run (user-space probes only)",
					   a->target);
				return -1;
			}
		if (!strcmp(a->target, "uprobe") || !strcmp(a->target, "uretprobe") ||
		    !strcmp(a->target, "u") || !strcmp(a->target, "ur") ||
		    !strcmp(a->target, "interval") || !strcmp(a->target, "i"))
			prog_error(c->p, a->loc, "Invalid probe: %s (expected %s)", a->text,
				   a->target[0] == 'i' ? "interval:s:N or interval:ms:N" : "uprobe:OBJ:FUNC");
		else
			prog_error(c->p, a->loc, "Invalid probe type: %s", a->target);
		return -1;
	}
	default:
		return 0;
	}
}

static int check_probe(struct checker *c, struct probe *pr)
{
	int i, rc = 0;

	c->pr = pr;
	for (i = 0; i < pr->natt; i++)
		if (check_attach(c, &pr->att[i]))
			return -1;
	if (pr->pred) {
		if (check_expr(c, pr->pred)) {
			if (pr->pred->none)
				prog_error(c->p, pr->pred_loc, "Invalid type for predicate: none");
			rc = -1;
		} else if (!c->collect && !is_plain_int(pr->pred)) {
			prog_error(c->p, pr->pred_loc, "Invalid type for predicate: %s",
				   pr->pred->agg ? kind_names[pr->pred->agg] :
				   pr->pred->type.kind == LANG_T_STR ? "string" : "not an integer");
			rc = -1;
		} else if (refuse_unreadable(c, pr->pred)) {
			rc = -1;
		}
	}
	return check_stmts(c, pr->body) || rc;
}

/* Collecting passes: a map whose value is another map's gets its type
 * from that map's once the source is typed, whatever their order in the
 * program (as bpftrace's repeated passes type it); each pass after the
 * first runs only if the one before typed a map more. */
#define COLLECT_PASSES 4

static int maps_known(const struct prog *p)
{
	int n = 0;

	for (int i = 0; i < p->nmaps; i++)
		n += p->maps[i].val_known;
	return n;
}

int lang_check(struct prog *p)
{
	struct checker c = { .p = p };
	struct probe *pr;
	int pass;

	/* every error of the pass that finds one is reported, as bpftrace's
	 * passes do; the next pass does not run */
	p->all_errors = true;
	for (pass = 0; pass < COLLECT_PASSES + 1; pass++) {
		int failed = 0, known = maps_known(p);

		c.collect = pass < COLLECT_PASSES;
		c.probe_no = 0;
		p->nvars = 0;
		for (pr = p->probes; pr; pr = pr->next, c.probe_no++)
			if (check_probe(&c, pr))
				failed = 1;
		if (failed || p->failed)
			goto out;
		/* a pass that typed no map more: the next one is the last */
		if (c.collect && maps_known(p) == known)
			pass = COLLECT_PASSES - 1;
	}
	for (int i = 0; i < p->nmaps; i++) {
		struct mapinfo *mi = &p->maps[i];

		if (!mi->val_known && !mi->none)
			prog_error(p, mi->first, "Undefined map: %s", mi->name);
	}
out:
	p->all_errors = false;
	return p->failed ? -1 : 0;
}
