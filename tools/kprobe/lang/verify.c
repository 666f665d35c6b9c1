/* lang_image_load: the agent-side verifier.  The image comes from another
 * process and is trusted in nothing: every count, offset, operand and
 * jump is checked here, so the interpreter can run it without checks of
 * its own and in bounded time (forward jumps only, but LOOP which the VM
 * pays for from a per-run budget). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lang_int.h"
#include "maps_int.h"

struct vctx {
	struct lang_image *img;
	char *why;
	size_t whylen;
};

static int bad(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct vctx *v, const char *fmt, ...)
{
	va_list ap;

	if (v->why && v->whylen) {
		va_start(ap, fmt);
		vsnprintf(v->why, v->whylen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static int str_ok(const struct lang_image *img, uint32_t off)
{
	return off < img->hdr->pool_len;
}

static uint32_t type_storage(const struct lang_type *t)
{
	switch (t->kind) {
	case LANG_T_INT:
	case LANG_T_USYM:
	case LANG_T_PROBE:
		return 8;
	case LANG_T_STR:
		return LANG_STRLEN;
	case LANG_T_USTACK:
	case LANG_T_USTACK_PERF:
		return 8 + 8 * LANG_USTACK_MAX;
	case LANG_T_TIMESTAMP:
		return 16;
	case LANG_T_BUF:
		return LANG_BUF_SIZE;
	default:
		return 0;
	}
}

/* Where the tuples inside a tuple begin and end: each ends after it
 * begins, and all have ended at the last part. */
static bool nest_ok(const uint8_t *nest, unsigned n)
{
	int depth = 0;

	for (unsigned k = 0; k < n; k++) {
		depth += LANG_NEST_OPENS(nest[k]) - LANG_NEST_CLOSES(nest[k]);
		if (depth < 0)
			return false;
	}
	return depth == 0;
}

/* A tuple value: 2 or more parts, each an integer, string, symbol or
 * probe at its storage size; 0 when the description is not one. */
static uint32_t tuple_size(const struct lang_map_desc *d)
{
	uint32_t size = 0;

	if (d->val.kind != LANG_T_TUPLE || d->nvparts < 2 || d->nvparts > LANG_MAX_TUPLE)
		return 0;
	for (unsigned k = 0; k < d->nvparts; k++) {
		const struct lang_type *t = &d->vparts[k];
		uint32_t s = type_storage(t);

		if (t->kind == LANG_T_USTACK || t->kind == LANG_T_USTACK_PERF ||
		    t->kind == LANG_T_TIMESTAMP || t->kind == LANG_T_BUF || !s || t->size != s)
			return 0;
		size += s;
	}
	return size == d->val.size && nest_ok(d->vnest, d->nvparts) ? size : 0;
}

static uint32_t expected_val_size(const struct lang_map_desc *d)
{
	switch (d->kind) {
	case LANG_M_TUPLE: return tuple_size(d);
	case LANG_M_INT: case LANG_M_USYM: case LANG_M_PROBE:
	case LANG_M_COUNT: case LANG_M_SUM: case LANG_M_MIN: case LANG_M_MAX:
		return 8;
	case LANG_M_STR: return LANG_STRLEN;
	case LANG_M_USTACK: return 8 + 8 * LANG_USTACK_MAX;
	case LANG_M_AVG: case LANG_M_STATS: case LANG_M_TIMESTAMP: return 16;
	case LANG_M_BUF: return LANG_BUF_SIZE;
	case LANG_M_HIST: return 8 * LANG_HIST_BUCKETS;
	case LANG_M_LHIST:
		if (d->lhist_step < 1 || d->lhist_min < 0 || d->lhist_min > d->lhist_max ||
		    (d->lhist_max - d->lhist_min) / d->lhist_step > 1000)
			return 0;
		return 8 * lang_lhist_nbuckets(d->lhist_min, d->lhist_max, d->lhist_step);
	default: return 0;
	}
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Whether map m keeps per-thread shards: a keyless aggregation whose
 * updates add up (not min/max, whose common case, no new extreme, is a
 * plain load already), that no instruction deletes (a delete on the hit
 * path would have to reset other threads' shards). */
static bool map_sharded(const struct lang_image *img, uint32_t m)
{
	const struct lang_map_desc *d = &img->maps[m];
	uint32_t pc;

	if (d->nkeys)
		return false;
	switch (d->kind) {
	case LANG_M_COUNT: case LANG_M_SUM: case LANG_M_AVG: case LANG_M_STATS:
	case LANG_M_HIST: case LANG_M_LHIST:
		break;
	default:
		return false;
	}
	for (pc = 0; pc < img->hdr->ninsns; pc++)
		if (img->insns[pc].op == LANG_OP_MAP_DEL && img->insns[pc].b == m)
			return false;
	return true;
}

/* Whether instruction in names map m (an operation on it, or an event
 * about it: print, clear, zero). */
static bool insn_names_map(const struct lang_insn *in, uint32_t m)
{
	switch (in->op) {
	case LANG_OP_MAP_GET: case LANG_OP_MAP_GETX: case LANG_OP_MAP_HAS: case LANG_OP_MAP_SET:
	case LANG_OP_MAP_SETX: case LANG_OP_MAP_AGG: case LANG_OP_MAP_DEL:
		return in->b == m;
	case LANG_OP_EMIT:
		return (in->dst == LANG_EV_PRINT_MAP || in->dst == LANG_EV_CLEAR ||
			in->dst == LANG_EV_ZERO) && in->aux == m;
	default:
		return false;
	}
}

/* Whether map m is a map of thread values (lang_image.map_tval_off),
 * one by one 8-byte key that only fast forms keyed by the thread's own
 * tid use: an int map of the latency pattern (its entry half storing
 * nsecs, its return half), or a count map of `@m[tid] = count()`.  The
 * fast forms run from their descriptors (their code never runs); any
 * other probe's code must not name the map.  Read before the probes are
 * checked: a descriptor that fails its check fails the whole image
 * anyway. */
static bool map_thread_valued(const struct lang_image *img, uint32_t m)
{
	const struct lang_map_desc *d = &img->maps[m];
	bool stored = false;
	uint32_t p, pc;

	if ((d->kind != LANG_M_INT && d->kind != LANG_M_COUNT) || d->nkeys != 1 ||
	    d->key_size != 8 || d->max_keys < LANG_SHARDS)
		return false;
	for (p = 0; p < img->hdr->nprobes; p++) {
		const struct lang_probe_desc *pd = &img->probes[p];

		if (pd->fast == LANG_FAST_STORE_KEY && pd->fast_map == m) {
			if (d->kind != LANG_M_INT || pd->fast_src != LANG_SRC_TID ||
			    pd->fast_src2 != LANG_SRC_NSECS)
				return false;
			stored = true;
			continue;
		}
		if (pd->fast == LANG_FAST_DELTA_HIST && pd->fast_map2 == m) {
			if (d->kind != LANG_M_INT || pd->fast_src != LANG_SRC_TID)
				return false;
			continue;
		}
		if (pd->fast == LANG_FAST_COUNT_KEY && pd->fast_map == m) {
			if (d->kind != LANG_M_COUNT || pd->fast_src != LANG_SRC_TID)
				return false;
			stored = true;
			continue;
		}
		if (pd->fast != LANG_FAST_NONE && pd->fast != LANG_FAST_PRED_ONLY) {
			if (pd->fast_map == m)
				return false;
			continue;	/* its code never runs */
		}
		if (pd->code > img->hdr->ninsns || pd->ncode > img->hdr->ninsns - pd->code)
			return false;
		for (pc = pd->code; pc < pd->code + pd->ncode; pc++)
			if (insn_names_map(&img->insns[pc], m))
				return false;
	}
	return stored;
}

/* A sharded map's base after its slot; its shards' place in the threads'
 * blocks (in map_shard_off until place_shards() makes it a region
 * offset): the value, and a hist's late sample after it. */
static uint64_t layout_base(struct lang_image *img, uint32_t m, size_t off, uint64_t bytes,
			    uint32_t *block)
{
	uint32_t vs = (uint32_t)align8(img->maps[m].val_size);

	img->map_base_off[m] = off + (size_t)bytes;
	img->map_shard_off[m] = *block;
	img->map_shard_stride[m] = 1;	/* sharded: placed below */
	*block += vs + (img->maps[m].kind == LANG_M_HIST ? 8 : 0);
	return bytes + vs;
}

/* The shards after the maps: LANG_SHARDS blocks, one per thread, each
 * holding that thread's shard of every sharded map side by side (a thread
 * reaches all of them from one pointer), on cache lines of its own. */
static size_t place_shards(struct lang_image *img, size_t off, uint32_t block,
			   const bool *tval)
{
	uint32_t m;

	if (!block)
		return off;
	img->shard_block = (uint32_t)align64(block);
	img->shards_off = align64(off);
	for (m = 0; m < img->hdr->nmaps; m++) {
		if (tval[m])
			img->map_tval_off[m] += img->shards_off;
		if (!img->map_shard_stride[m])
			continue;
		img->map_shard_off[m] += img->shards_off;
		img->map_shard_stride[m] = img->shard_block;
	}
	return img->shards_off + (size_t)LANG_SHARDS * img->shard_block;
}

static int check_maps(struct vctx *v)
{
	struct lang_image *img = v->img;
	size_t off = align8(sizeof(struct region_hdr));
	uint32_t m, block = 0;
	bool tval[LANG_MAX_MAPS] = { false };

	for (m = 0; m < img->hdr->nmaps; m++) {
		const struct lang_map_desc *d = &img->maps[m];
		uint32_t ks = 0, k, cap;
		uint64_t bytes;

		if (!str_ok(img, d->name))
			return bad(v, "map %u: bad name", m);
		if (d->nkeys > LANG_MAX_KEY_PARTS)
			return bad(v, "map %u: too many keys", m);
		for (k = 0; k < d->nkeys; k++) {
			uint32_t s = type_storage(&d->keys[k]);

			if (!s || d->keys[k].size != s)
				return bad(v, "map %u: bad key part %u", m, k);
			ks += s;
		}
		if (ks != d->key_size)
			return bad(v, "map %u: key size %u, parts make %u", m, d->key_size, ks);
		if (!d->kind || d->kind > LANG_M_LHIST || expected_val_size(d) != d->val_size)
			return bad(v, "map %u: bad kind or value size", m);
		if (d->nkeys ? (d->max_keys < 1 || d->max_keys > (1u << 20)) : d->max_keys != 1)
			return bad(v, "map %u: bad key limit %u", m, d->max_keys);
		cap = 1;
		if (d->nkeys)
			while (cap < 2 * d->max_keys)
				cap <<= 1;
		img->map_cap[m] = cap;
		img->map_slot[m] = (uint32_t)(8 + align8(d->key_size) + align8(d->val_size));
		img->map_off[m] = off;
		bytes = sizeof(struct map_hdr) + (uint64_t)cap * img->map_slot[m];
		if (map_sharded(img, m))
			bytes = layout_base(img, m, off, bytes, &block);
		if (map_thread_valued(img, m)) {
			/* a thread's entry, in its block (placed below) */
			tval[m] = true;
			img->map_tval_off[m] = block;
			block += sizeof(struct lang_tval);
		}
		if (bytes > (1ull << 34) || off + bytes > (1ull << 36))
			return bad(v, "map %u: too large", m);
		off += align8((size_t)bytes);
	}
	img->region_size = place_shards(img, off, block, tval);
	return 0;
}

static int check_fmts(struct vctx *v)
{
	struct lang_image *img = v->img;
	uint32_t f;

	for (f = 0; f < img->hdr->nfmts; f++) {
		const struct lang_fmt_desc *d = &img->fmts[f];
		uint32_t a, end = 0;

		if (!str_ok(img, d->fmt) || d->nargs > LANG_MAX_FMT_ARGS || d->rec_size > LANG_MAX_STACK)
			return bad(v, "format %u: bad header", f);
		for (a = 0; a < d->nargs; a++) {
			uint32_t s = type_storage(&d->arg[a]);

			if (!s || d->arg[a].size != s || d->arg_off[a] != end)
				return bad(v, "format %u: bad argument %u", f, a);
			end += s;
		}
		if (end != d->rec_size)
			return bad(v, "format %u: record size", f);
		if (!nest_ok(d->nest, d->nargs))
			return bad(v, "format %u: tuples inside", f);
	}
	return 0;
}

/* [off, off+len) inside the scratch area. */
static int in_stack(const struct lang_image *img, uint64_t off, uint64_t len)
{
	return off <= img->hdr->stack_size && len <= img->hdr->stack_size - off;
}

static int reg_ok(const struct lang_image *img, unsigned r)
{
	return r < img->hdr->nregs;
}

static int map_value_kind(const struct lang_map_desc *d, int op)
{
	switch (op) {
	case LANG_OP_MAP_GET:
		return d->kind == LANG_M_INT || d->kind == LANG_M_USYM || d->kind == LANG_M_PROBE ||
		       d->kind == LANG_M_COUNT || d->kind == LANG_M_SUM || d->kind == LANG_M_MIN ||
		       d->kind == LANG_M_MAX || d->kind == LANG_M_AVG;
	case LANG_OP_MAP_SET:
		return d->kind == LANG_M_INT || d->kind == LANG_M_USYM || d->kind == LANG_M_PROBE;
	case LANG_OP_MAP_GETX:
	case LANG_OP_MAP_SETX:
		return d->kind == LANG_M_STR || d->kind == LANG_M_USTACK || d->kind == LANG_M_TUPLE ||
		       d->kind == LANG_M_TIMESTAMP || d->kind == LANG_M_BUF;
	case LANG_OP_MAP_AGG:
		return d->kind >= LANG_M_COUNT && d->kind <= LANG_M_LHIST;
	default:
		return 1;	/* has, delete */
	}
}

static int check_insn(struct vctx *v, uint32_t pc)
{
	const struct lang_image *img = v->img;
	const struct lang_insn *in = &img->insns[pc];
	uint64_t imm = (uint64_t)in->imm, lo = imm & 0xffffffffu, hi = imm >> 32;
	const struct lang_map_desc *d;

	if (in->op >= LANG_OP__COUNT)
		return bad(v, "insn %u: bad opcode %u", pc, in->op);
	switch (in->op) {
	case LANG_OP_RET:
	case LANG_OP_EXIT:
		return 0;
	case LANG_OP_MOVI:
		return reg_ok(img, in->dst) ? 0 : bad(v, "insn %u: bad register", pc);
	case LANG_OP_MOV: case LANG_OP_NEG: case LANG_OP_NOT: case LANG_OP_LNOT:
		return reg_ok(img, in->dst) && reg_ok(img, in->a) ? 0 : bad(v, "insn %u: bad register", pc);
	case LANG_OP_SEXT: case LANG_OP_ZEXT:
		if (in->aux != 8 && in->aux != 16 && in->aux != 32)
			return bad(v, "insn %u: bad width", pc);
		return reg_ok(img, in->dst) && reg_ok(img, in->a) ? 0 : bad(v, "insn %u: bad register", pc);
	case LANG_OP_JMP:
		return 0;	/* targets: check_jumps */
	case LANG_OP_JZ: case LANG_OP_JNZ:
		return reg_ok(img, in->a) ? 0 : bad(v, "insn %u: bad register", pc);
	case LANG_OP_LOOP:
		return 0;
	case LANG_OP_CTX:
		if (!reg_ok(img, in->dst) || !in->aux || in->aux > LANG_SRC_LAST ||
		    imm >= LANG_MAX_USDT_ARGS)
			return bad(v, "insn %u: bad builtin", pc);
		return 0;
	case LANG_OP_REG:
		if (!reg_ok(img, in->dst) || (in->aux & 7) || in->aux + 8 > sizeof(struct pt_regs) ||
		    (imm != 0 && imm != 1))
			return bad(v, "insn %u: bad register read", pc);
		return 0;
	case LANG_OP_BUF:
		if (!reg_ok(img, in->a) || !reg_ok(img, in->b) || !in_stack(img, in->aux, LANG_BUF_SIZE) ||
		    (in->imm != -1 && (in->imm < 0 || !in_stack(img, imm, LANG_STRLEN))))
			return bad(v, "insn %u: bad buf", pc);
		return 0;
	case LANG_OP_LOAD:
		if (in->aux != 1 && in->aux != 2 && in->aux != 4 && in->aux != 8)
			return bad(v, "insn %u: bad load size", pc);
		return reg_ok(img, in->dst) && reg_ok(img, in->a) ? 0 : bad(v, "insn %u: bad register", pc);
	case LANG_OP_STR:
		if (!reg_ok(img, in->a) || !reg_ok(img, in->b) || !in_stack(img, in->aux, LANG_STRLEN) ||
		    (in->imm != -1 && (in->imm < 0 || in->imm > LANG_STRLEN)))
			return bad(v, "insn %u: bad str operands", pc);
		return 0;
	case LANG_OP_STST:
		return reg_ok(img, in->a) && in_stack(img, in->aux, 8) ? 0 : bad(v, "insn %u: bad store", pc);
	case LANG_OP_STLD:
		return reg_ok(img, in->dst) && in_stack(img, in->aux, 8) ? 0 : bad(v, "insn %u: bad load", pc);
	case LANG_OP_STCPY:
		return in_stack(img, in->aux, hi) && in_stack(img, lo, hi) ? 0 : bad(v, "insn %u: bad copy", pc);
	case LANG_OP_STZERO:
		return in_stack(img, in->aux, imm) ? 0 : bad(v, "insn %u: bad zero", pc);
	case LANG_OP_STPOOL:
		if (!in_stack(img, in->aux, hi) || lo > img->hdr->pool_len || hi > img->hdr->pool_len - lo)
			return bad(v, "insn %u: bad pool copy", pc);
		return 0;
	case LANG_OP_STREQ:
		if (!reg_ok(img, in->dst) || !in_stack(img, in->aux, in->b) || !in_stack(img, imm, in->b))
			return bad(v, "insn %u: bad string compare", pc);
		return 0;
	case LANG_OP_COMM:
		return in_stack(img, in->aux, LANG_STRLEN) ? 0 : bad(v, "insn %u: bad comm", pc);
	case LANG_OP_USTACK:
		if (!in_stack(img, in->aux, 8 + 8 * LANG_USTACK_MAX) || in->imm < 1 || in->imm > LANG_USTACK_MAX)
			return bad(v, "insn %u: bad ustack", pc);
		return 0;
	case LANG_OP_MAP_GET: case LANG_OP_MAP_GETX: case LANG_OP_MAP_HAS: case LANG_OP_MAP_SET:
	case LANG_OP_MAP_SETX: case LANG_OP_MAP_AGG: case LANG_OP_MAP_DEL:
		if (in->b >= img->hdr->nmaps)
			return bad(v, "insn %u: bad map %u", pc, in->b);
		d = &img->maps[in->b];
		if (!map_value_kind(d, in->op))
			return bad(v, "insn %u: operation does not fit map %u", pc, in->b);
		if (d->nkeys && !in_stack(img, in->aux, d->key_size))
			return bad(v, "insn %u: bad key offset", pc);
		if ((in->op == LANG_OP_MAP_GET || in->op == LANG_OP_MAP_HAS) && !reg_ok(img, in->dst))
			return bad(v, "insn %u: bad register", pc);
		if ((in->op == LANG_OP_MAP_SET || in->op == LANG_OP_MAP_AGG) && !reg_ok(img, in->a))
			return bad(v, "insn %u: bad register", pc);
		if (in->op == LANG_OP_MAP_AGG && (in->imm < 0 || in->imm > d->nkeys))
			return bad(v, "insn %u: bad tid key part", pc);
		if ((in->op == LANG_OP_MAP_GETX || in->op == LANG_OP_MAP_SETX) && !in_stack(img, imm, d->val_size))
			return bad(v, "insn %u: bad value offset", pc);
		return 0;
	case LANG_OP_EMIT:
		if (!in_stack(img, lo, hi))
			return bad(v, "insn %u: bad event data", pc);
		switch (in->dst) {
		case LANG_EV_PRINTF:
		case LANG_EV_PRINT_VALUE:
		case LANG_EV_CAT:
		case LANG_EV_SYSTEM:
			if (in->aux >= img->hdr->nfmts || img->fmts[in->aux].rec_size != hi)
				return bad(v, "insn %u: bad format", pc);
			return 0;
		case LANG_EV_TIME:
			return in->aux < img->hdr->nfmts ? 0 : bad(v, "insn %u: bad format", pc);
		case LANG_EV_JOIN:
			if (in->aux >= img->hdr->nfmts || hi != LANG_JOIN_REC)
				return bad(v, "insn %u: bad join", pc);
			return 0;
		case LANG_EV_PRINT_MAP:
			if (hi != 16)
				return bad(v, "insn %u: bad print arguments", pc);
			/* fall through */
		case LANG_EV_CLEAR:
		case LANG_EV_ZERO:
			return in->aux < img->hdr->nmaps ? 0 : bad(v, "insn %u: bad map", pc);
		default:
			return bad(v, "insn %u: bad event type %u", pc, in->dst);
		}
	case LANG_OP_SIGNAL:
	case LANG_OP_OVERRIDE:
		return reg_ok(img, in->a) ? 0 : bad(v, "insn %u: bad register", pc);
	default:
		/* binary ALU and compares */
		if (in->op >= LANG_OP_ADD && in->op <= LANG_OP_GEU)
			return reg_ok(img, in->dst) && reg_ok(img, in->a) && reg_ok(img, in->b) ?
			       0 : bad(v, "insn %u: bad register", pc);
		return bad(v, "insn %u: bad opcode %u", pc, in->op);
	}
}

/* Jumps stay inside the probe's code; only LOOP goes backward; the last
 * instruction is RET, so control never runs off the end. */
static int check_jumps(struct vctx *v, const struct lang_probe_desc *p, unsigned i)
{
	const struct lang_insn *in = v->img->insns;
	uint32_t pc, end = p->code + p->ncode;

	if (in[end - 1].op != LANG_OP_RET)
		return bad(v, "probe %u: code does not end with RET", i);
	for (pc = p->code; pc < end; pc++) {
		switch (in[pc].op) {
		case LANG_OP_JMP: case LANG_OP_JZ: case LANG_OP_JNZ:
			if (in[pc].aux <= pc || in[pc].aux >= end)
				return bad(v, "probe %u: insn %u jumps to %u", i, pc, in[pc].aux);
			break;
		case LANG_OP_LOOP:
			if (in[pc].aux > pc || in[pc].aux < p->code)
				return bad(v, "probe %u: insn %u loops to %u", i, pc, in[pc].aux);
			break;
		default:
			break;
		}
	}
	return 0;
}

/* The map of the latency pattern's start values: integers by one 8-byte
 * key. */
static bool keyed_int_map(const struct lang_map_desc *d)
{
	return d->kind == LANG_M_INT && d->nkeys == 1 && d->key_size == 8;
}

/* A second source of a fast form: a context value, never an argument
 * (fast_arg is the first source's). */
static bool fast_value_src(uint8_t src)
{
	return src && src <= LANG_SRC_PROBE && src != LANG_SRC_ARG;
}

static int check_fast(struct vctx *v, const struct lang_probe_desc *p, unsigned i)
{
	const struct lang_image *img = v->img;
	const struct lang_map_desc *d;

	if (p->fast == LANG_FAST_NONE)
		return p->pred ? bad(v, "probe %u: a fast filter without a fast form", i) : 0;
	if (p->fast > LANG_FAST_DELTA_HIST || p->fast_src > LANG_SRC_PROBE || p->fast_arg >= LANG_MAX_USDT_ARGS ||
	    (p->fast != LANG_FAST_COUNT_KEYLESS && p->fast != LANG_FAST_PRED_ONLY && !p->fast_src))
		return bad(v, "probe %u: bad fast form", i);
	/* a filter: PRED_ONLY's, or in front of a count or hist */
	if (p->pred && (!p->pred_src || p->pred_src > LANG_SRC_PROBE ||
			p->pred_arg >= LANG_MAX_USDT_ARGS || p->fast_cmp < LANG_OP_EQ ||
			p->fast_cmp > LANG_OP_GEU))
		return bad(v, "probe %u: bad fast filter", i);
	if (p->fast == LANG_FAST_PRED_ONLY)
		return p->pred ? 0 : bad(v, "probe %u: bad fast filter", i);
	if (p->pred && p->fast != LANG_FAST_COUNT_KEYLESS && p->fast != LANG_FAST_COUNT_KEY &&
	    p->fast != LANG_FAST_HIST)
		return bad(v, "probe %u: a fast filter on a form without one", i);
	if (p->fast_map >= img->hdr->nmaps)
		return bad(v, "probe %u: bad fast map", i);
	d = &img->maps[p->fast_map];
	switch (p->fast) {
	case LANG_FAST_COUNT_KEYLESS:
		return d->kind == LANG_M_COUNT && !d->nkeys ? 0 : bad(v, "probe %u: fast map mismatch", i);
	case LANG_FAST_COUNT_KEY:
		return d->kind == LANG_M_COUNT && d->nkeys == 1 && d->key_size == 8 ?
		       0 : bad(v, "probe %u: fast map mismatch", i);
	case LANG_FAST_HIST:
		return d->kind == LANG_M_HIST && !d->nkeys ? 0 : bad(v, "probe %u: fast map mismatch", i);
	case LANG_FAST_STORE_KEY:
		return keyed_int_map(d) && fast_value_src(p->fast_src2) ?
		       0 : bad(v, "probe %u: fast map mismatch", i);
	case LANG_FAST_DELTA_HIST:
		return d->kind == LANG_M_HIST && !d->nkeys && p->fast_map2 < img->hdr->nmaps &&
		       keyed_int_map(&img->maps[p->fast_map2]) && fast_value_src(p->fast_src2) ?
		       0 : bad(v, "probe %u: fast map mismatch", i);
	default:
		return bad(v, "probe %u: bad fast form", i);
	}
}

static int check_probes(struct vctx *v)
{
	struct lang_image *img = v->img;
	uint32_t i;

	for (i = 0; i < img->hdr->nprobes; i++) {
		const struct lang_probe_desc *p = &img->probes[i];

		if (!p->kind || p->kind > LANG_P_INTERVAL)
			return bad(v, "probe %u: bad kind", i);
		if (!str_ok(img, p->target) || !str_ok(img, p->func) || !str_ok(img, p->provider) ||
		    !str_ok(img, p->text))
			return bad(v, "probe %u: bad name", i);
		if (!p->ncode || p->code > img->hdr->ninsns || p->ncode > img->hdr->ninsns - p->code)
			return bad(v, "probe %u: bad code range", i);
		if (p->kind == LANG_P_INTERVAL && !p->interval_ns)
			return bad(v, "probe %u: bad interval", i);
		if (check_jumps(v, p, i) || check_fast(v, p, i))
			return -EINVAL;
	}
	return 0;
}

/* Which keyed aggregations only threads' own tids key
 * (lang_image.map_tid_owned), from the verified probes: a fast form runs
 * from its descriptor (its code never runs), any other probe runs its
 * code, where a MAP_AGG's imm names the key part (1 + index) the compiler
 * filled from `tid`.  That claim is the tool's: a false one can only make
 * the program's own counts racy, never touch memory outside the map. */
static void mark_tid_owned(struct lang_image *img)
{
	uint8_t part[LANG_MAX_MAPS];
	uint32_t m, p, pc;

	for (m = 0; m < img->hdr->nmaps; m++) {
		const struct lang_map_desc *d = &img->maps[m];

		part[m] = 0;
		img->map_tid_owned[m] = d->nkeys && d->kind >= LANG_M_COUNT &&
					d->kind <= LANG_M_LHIST && d->kind != LANG_M_MIN &&
					d->kind != LANG_M_MAX;
	}
	for (p = 0; p < img->hdr->nprobes; p++) {
		const struct lang_probe_desc *d = &img->probes[p];

		if (d->fast == LANG_FAST_COUNT_KEY) {
			if (d->fast_src != LANG_SRC_TID ||
			    (part[d->fast_map] && part[d->fast_map] != 1))
				img->map_tid_owned[d->fast_map] = false;
			part[d->fast_map] = 1;
			continue;
		}
		if (d->fast && d->fast != LANG_FAST_PRED_ONLY) {
			img->map_tid_owned[d->fast_map] = false;
			continue;
		}
		for (pc = d->code; pc < d->code + d->ncode; pc++) {
			const struct lang_insn *in = &img->insns[pc];

			if (in->op == LANG_OP_MAP_AGG) {
				if (!in->imm || (part[in->b] && part[in->b] != in->imm))
					img->map_tid_owned[in->b] = false;
				part[in->b] = (uint8_t)in->imm;
			} else if (in->op == LANG_OP_MAP_SET || in->op == LANG_OP_MAP_SETX) {
				img->map_tid_owned[in->b] = false;
			}
		}
	}
}

int lang_image_load(struct lang_image *img, const void *image, size_t len, char *why, size_t whylen)
{
	struct vctx v = { img, why, whylen };
	const struct lang_image_hdr *h = image;
	const uint8_t *b = image;
	uint64_t off, need;
	uint32_t pc;

	if (why && whylen)
		why[0] = 0;
	if (!img || !image)
		return -EINVAL;
	memset(img, 0, sizeof(*img));
	if ((uintptr_t)image & 7)
		return bad(&v, "image not 8-byte aligned");
	if (len < sizeof(*h))
		return bad(&v, "image too short");
	if (h->magic != LANG_MAGIC || h->version != LANG_VERSION)
		return bad(&v, "not a program image of this version");
	if (h->total_len != len)
		return bad(&v, "image length %u, received %zu", h->total_len, len);
	if (!h->nregs || h->nregs > LANG_MAX_REGS || h->stack_size > LANG_MAX_STACK ||
	    h->nprobes > LANG_MAX_PROBES || h->nmaps > LANG_MAX_MAPS || h->nfmts > LANG_MAX_FMTS ||
	    h->ninsns > LANG_MAX_INSNS || h->pool_len > LANG_MAX_POOL || !h->pool_len)
		return bad(&v, "image counts out of range");
	need = align8(sizeof(*h)) + align8((uint64_t)sizeof(struct lang_probe_desc) * h->nprobes) +
	       align8((uint64_t)sizeof(struct lang_map_desc) * h->nmaps) +
	       align8((uint64_t)sizeof(struct lang_fmt_desc) * h->nfmts) +
	       (uint64_t)sizeof(struct lang_insn) * h->ninsns + align8(h->pool_len);
	if (need != len)
		return bad(&v, "image sections do not add up");
	img->base = b;
	img->len = len;
	img->hdr = h;
	off = align8(sizeof(*h));
	img->probes = (const void *)(b + off);
	off += align8(sizeof(struct lang_probe_desc) * (uint64_t)h->nprobes);
	img->maps = (const void *)(b + off);
	off += align8(sizeof(struct lang_map_desc) * (uint64_t)h->nmaps);
	img->fmts = (const void *)(b + off);
	off += align8(sizeof(struct lang_fmt_desc) * (uint64_t)h->nfmts);
	img->insns = (const void *)(b + off);
	off += sizeof(struct lang_insn) * (uint64_t)h->ninsns;
	img->pool = (const char *)(b + off);
	if (img->pool[h->pool_len - 1] != 0)
		return bad(&v, "string pool not terminated");
	if (check_maps(&v) || check_fmts(&v))
		goto fail;
	for (pc = 0; pc < h->ninsns; pc++)
		if (check_insn(&v, pc))
			goto fail;
	if (check_probes(&v))
		goto fail;
	mark_tid_owned(img);
	return 0;
fail:
	memset(img, 0, sizeof(*img));
	return -EINVAL;
}

const char *lang_image_str(const struct lang_image *img, uint32_t off)
{
	if (!img || !img->hdr || off >= img->hdr->pool_len)
		return "";
	return img->pool + off;
}
