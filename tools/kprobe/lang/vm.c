/* The interpreter, run on the hit path of a probe inside the target.
 *
 * It trusts only what lang_image_load verified: registers, scratch
 * offsets, map indexes and jump targets are in range, so the loop below
 * checks nothing but the loop budget.  Its state is this frame (registers
 * and the scratch area); it takes no lock, allocates nothing and makes no
 * system call (the ops it calls promise the same). */
#include <errno.h>
#include <string.h>

#include "kp_arch.h"
#include "lang_int.h"
#include "maps_int.h"
#include "maps_impl.h"

/* The services: through ctx->ops, or, built with LANG_DIRECT_OPS (the
 * agent), by direct calls to the lang_ext_* functions the agent defines,
 * which libkprobes' handler analysis can follow (see lang.h). */
#ifdef LANG_DIRECT_OPS
#define HAS_OP(c, name) 1
#define OP(c, name, ...) lang_ext_##name(__VA_ARGS__)
#else
#define HAS_OP(c, name) ((c)->ops->name != NULL)
#define OP(c, name, ...) (c)->ops->name(__VA_ARGS__)
#endif

/* Copies within the scratch area; the ranges may overlap in an image
 * from elsewhere.  Written out so that nothing here calls the C library. */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static void scratch_copy(uint8_t *d, const uint8_t *s, size_t n)
{
	size_t i;

	if (d == s)
		return;
	if (d < s || d >= s + n) {
		for (i = 0; i < n; i++)
			d[i] = s[i];
	} else {
		for (i = n; i-- > 0;)
			d[i] = s[i];
	}
}

/* strncmp(a, b, n) == 0 */
static int scratch_streq(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (a[i] != b[i])
			return 0;
		if (!a[i])
			return 1;
	}
	return 1;
}

/* The n-th integer argument register (kp_arch.h): a table, not a
 * switch, which the hit path's flags would not make a jump table anyway. */
static uint64_t arg_of(const struct pt_regs *r, unsigned n)
{
	static const uint16_t offsets[] = { KP_ARG_REG_OFFSETS };

	if (!r || n >= sizeof(offsets) / sizeof(offsets[0]))
		return 0;
	return *(const uint64_t *)((const char *)r + offsets[n]);
}

static uint64_t ctx_value(const struct lang_ctx *c, unsigned src, unsigned arg)
{
	switch (src) {
	case LANG_SRC_ARG:
		if (c->argv)
			return arg < c->nargv ? c->argv[arg] : 0;
		return arg_of(c->regs, arg);
	case LANG_SRC_RETVAL: return c->regs ? regs_return_value(c->regs) : 0;
	case LANG_SRC_FUNC: return c->func_addr;
	case LANG_SRC_PROBE: return c->probe_id;
	default: return HAS_OP(c, get) ? OP(c, get, (int)src, c->arg) : 0;
	}
}

/* buf(): the length (at most LANG_STRLEN), then that many bytes of the
 * target's memory at src (zeroes where it faults), or of the scratch
 * string from; the rest zeroed, so equal buffers are equal keys. */
static void read_buf(const struct lang_ctx *c, uint8_t *dst, uint64_t src, uint64_t len,
		     const uint8_t *from)
{
	if (len > LANG_STRLEN)
		len = LANG_STRLEN;
	memset(dst, 0, LANG_BUF_SIZE);
	memcpy(dst, &len, 8);
	if (from)
		memcpy(dst + 8, from, (size_t)len);
	else if (len && (!HAS_OP(c, read) || OP(c, read, dst + 8, (uintptr_t)src, (size_t)len, c->arg)))
		memset(dst + 8, 0, (size_t)len);
}

static void read_str(const struct lang_ctx *c, uint8_t *dst, uint64_t src, uint64_t max)
{
	uint64_t n = 0;

	memset(dst, 0, LANG_STRLEN);
	if (max > LANG_STRLEN - 1)
		max = LANG_STRLEN - 1;
	/* 8 bytes at a time while they stay within one page (a string near
	 * the end of a mapping must not fault the whole read), then byte by
	 * byte; a fault ends the string ("" if nothing was read, as bpftrace) */
	while (n < max) {
		uint64_t chunk = max - n, a = src + n;
		uint8_t buf[8];
		uint64_t k;

		if (chunk > 8)
			chunk = 8;
		if ((a & 4095) + chunk > 4096)
			chunk = 4096 - (a & 4095);
		if (OP(c, read, buf, (uintptr_t)a, (size_t)chunk, c->arg)) {
			memset(dst, 0, LANG_STRLEN);
			return;
		}
		for (k = 0; k < chunk; k++) {
			if (!buf[k])
				return;
			dst[n++] = buf[k];
		}
	}
}

static int64_t load(const struct lang_ctx *c, uint64_t addr, unsigned size, int sgn)
{
	union { uint8_t b[8]; uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; } u = { .u64 = 0 };

	if (OP(c, read, u.b, (uintptr_t)addr, size, c->arg))
		return 0;
	switch (size) {
	case 1: return sgn ? (int64_t)(int8_t)u.u8 : (int64_t)u.u8;
	case 2: return sgn ? (int64_t)(int16_t)u.u16 : (int64_t)u.u16;
	case 4: return sgn ? (int64_t)(int32_t)u.u32 : (int64_t)u.u32;
	default: return (int64_t)u.u64;
	}
}

static int64_t map_get(const struct lang_image *img, void *region, unsigned m, const void *key)
{
	const uint8_t *v = lang_map_lookup(img, region, m, key, 0);
	uint64_t sum[2];

	if (v && img->map_shard_off[m]) {
		/* an integer read needs the count and the sum at most */
		lang_map_sum(img, region, m, v, 0, sum, img->maps[m].val_size >= 16 ? 2 : 1);
		v = (const uint8_t *)sum;
	}
	return v ? lang_map_read_int(img, m, v) : 0;
}

/* The value of a keyless aggregation a thread with shard adds to: its
 * shard, or the map's value (locked adds); NULL when it can not be made
 * live. */
static int64_t *agg_target(const struct lang_image *img, void *region, unsigned m,
			   uint32_t shard, bool *owned)
{
	return mapi_agg_target(img, region, m, shard, owned);
}

/* A sharded map's value into scratch memory (which need not be
 * aligned), a word at a time. */
static void sum_words(const struct lang_image *img, void *region, unsigned m, const void *val,
		      uint8_t *dst, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		uint64_t w;

		lang_map_sum(img, region, m, val, k, &w, 1);
		memcpy(dst + 8 * (size_t)k, &w, 8);
	}
}

static void agg_add(int64_t *p, int64_t v, bool owned)
{
	if (owned)
		mapi_owner_add(p, v);
	else
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* The forms recognised at compile time; 1 when done, 0 to interpret. */
static int run_fast(const struct lang_image *img, const struct lang_probe_desc *p, struct lang_ctx *c)
{
	uint64_t x;
	int64_t *val;
	bool owned;

	if (p->pred && !lang_fast_pred(p, ctx_value(c, p->pred_src, p->pred_arg)))
		return 1;	/* the filter is false: nothing more to do */
	x = p->fast_src ? ctx_value(c, p->fast_src, p->fast_arg) : 0;
	switch (p->fast) {
	case LANG_FAST_COUNT_KEYLESS:
		val = agg_target(img, c->maps, p->fast_map, c->shard, &owned);
		if (val)
			agg_add(val, 1, owned);
		return 1;
	case LANG_FAST_COUNT_KEY:
		if (img->map_tval_off[p->fast_map] && c->shard) {
			mapi_tval_count(mapi_tval(img, c->maps, p->fast_map, c->shard), x);
			return 1;
		}
		val = (int64_t *)lang_map_lookup(img, c->maps, p->fast_map, &x, 1);
		/* a thread's own tid is a key no other thread updates (a tid
		 * is reused only once its thread is gone), when every writer
		 * of the map keys by it */
		if (val)
			agg_add(val, 1, p->fast_src == LANG_SRC_TID && img->map_tid_owned[p->fast_map]);
		return 1;
	case LANG_FAST_HIST:
		val = agg_target(img, c->maps, p->fast_map, c->shard, &owned);
		if (val)
			agg_add(&val[lang_hist_index((int64_t)x)], 1, owned);
		return 1;
	case LANG_FAST_PRED_ONLY:
		return 0;	/* the filter holds: the body is interpreted */
	case LANG_FAST_STORE_KEY:
		if (img->map_tval_off[p->fast_map] && c->shard) {
			mapi_tval_store(mapi_tval(img, c->maps, p->fast_map, c->shard), x,
					(int64_t)ctx_value(c, p->fast_src2, 0));
			return 1;
		}
		val = (int64_t *)lang_map_lookup(img, c->maps, p->fast_map, &x, 1);
		if (val)
			__atomic_store_n(val, (int64_t)ctx_value(c, p->fast_src2, 0), __ATOMIC_RELAXED);
		return 1;
	case LANG_FAST_DELTA_HIST: {
		struct lang_tval *e = NULL;
		int64_t start, *hist;

		/* a thread's own entry, or the slot of its key */
		if (img->map_tval_off[p->fast_map2] && c->shard) {
			e = mapi_tval(img, c->maps, p->fast_map2, c->shard);
			val = NULL;
			start = mapi_tval_read(e);
		} else {
			val = (int64_t *)lang_map_lookup(img, c->maps, p->fast_map2, &x, 0);
			start = val ? __atomic_load_n(val, __ATOMIC_RELAXED) : 0;
		}
		if (!start)
			return 1;	/* the filter is false */
		hist = agg_target(img, c->maps, p->fast_map, c->shard, &owned);
		if (hist) {
			int64_t d = (int64_t)(ctx_value(c, p->fast_src2, 0) - (uint64_t)start);

			agg_add(&hist[lang_hist_index(d)], 1, owned);
		}
		if (e)
			mapi_tval_delete(e);
		else
			lang_map_delete_val(img, c->maps, p->fast_map2, (uint8_t *)val);
		return 1;
	}
	default:
		return 0;
	}
}

static int emit(struct lang_ctx *c, int type, uint32_t id, const void *data, size_t len)
{
	return HAS_OP(c, emit) ? OP(c, emit, type, id, data, len, c->arg) : -ENOSYS;
}

/* The registers and the scratch area are sized by the verified header
 * (at most LANG_MAX_REGS and LANG_MAX_STACK bytes), so a small program
 * takes a small part of the probed thread's stack. */
static int interpret(const struct lang_image *img, const struct lang_probe_desc *p, struct lang_ctx *c)
{
	const struct lang_insn *code, *in;
	struct region_hdr *rh = c->maps;
	unsigned budget = LANG_LOOP_BUDGET;
	void *region = c->maps;
	uint64_t r[img->hdr->nregs];
	uint64_t stk[(img->hdr->stack_size + 7) / 8 + 1];
	uint8_t *s = (uint8_t *)stk;

	memset(r, 0, sizeof(r));
	memset(stk, 0, sizeof(stk));
	code = img->insns;
	in = code + p->code;
	for (;;) {
		switch (in->op) {
		case LANG_OP_RET:
			return 0;
		case LANG_OP_MOVI: r[in->dst] = (uint64_t)in->imm; break;
		case LANG_OP_MOV: r[in->dst] = r[in->a]; break;
		case LANG_OP_ADD: r[in->dst] = r[in->a] + r[in->b]; break;
		case LANG_OP_SUB: r[in->dst] = r[in->a] - r[in->b]; break;
		case LANG_OP_MUL: r[in->dst] = r[in->a] * r[in->b]; break;
		case LANG_OP_DIV: r[in->dst] = r[in->b] ? r[in->a] / r[in->b] : 0; break;
		case LANG_OP_MOD: r[in->dst] = r[in->b] ? r[in->a] % r[in->b] : 0; break;
		case LANG_OP_SDIV:
			if (!r[in->b] || ((int64_t)r[in->b] == -1 && r[in->a] == (uint64_t)INT64_MIN))
				r[in->dst] = r[in->b] ? r[in->a] : 0;
			else
				r[in->dst] = (uint64_t)((int64_t)r[in->a] / (int64_t)r[in->b]);
			break;
		case LANG_OP_SMOD:
			if (!r[in->b] || (int64_t)r[in->b] == -1)
				r[in->dst] = 0;
			else
				r[in->dst] = (uint64_t)((int64_t)r[in->a] % (int64_t)r[in->b]);
			break;
		case LANG_OP_AND: r[in->dst] = r[in->a] & r[in->b]; break;
		case LANG_OP_OR: r[in->dst] = r[in->a] | r[in->b]; break;
		case LANG_OP_XOR: r[in->dst] = r[in->a] ^ r[in->b]; break;
		case LANG_OP_SHL: r[in->dst] = r[in->a] << (r[in->b] & 63); break;
		case LANG_OP_SHR: r[in->dst] = r[in->a] >> (r[in->b] & 63); break;
		case LANG_OP_SAR: r[in->dst] = (uint64_t)((int64_t)r[in->a] >> (r[in->b] & 63)); break;
		case LANG_OP_EQ: r[in->dst] = r[in->a] == r[in->b]; break;
		case LANG_OP_NE: r[in->dst] = r[in->a] != r[in->b]; break;
		case LANG_OP_LT: r[in->dst] = (int64_t)r[in->a] < (int64_t)r[in->b]; break;
		case LANG_OP_LE: r[in->dst] = (int64_t)r[in->a] <= (int64_t)r[in->b]; break;
		case LANG_OP_GT: r[in->dst] = (int64_t)r[in->a] > (int64_t)r[in->b]; break;
		case LANG_OP_GE: r[in->dst] = (int64_t)r[in->a] >= (int64_t)r[in->b]; break;
		case LANG_OP_LTU: r[in->dst] = r[in->a] < r[in->b]; break;
		case LANG_OP_LEU: r[in->dst] = r[in->a] <= r[in->b]; break;
		case LANG_OP_GTU: r[in->dst] = r[in->a] > r[in->b]; break;
		case LANG_OP_GEU: r[in->dst] = r[in->a] >= r[in->b]; break;
		case LANG_OP_NEG: r[in->dst] = -r[in->a]; break;
		case LANG_OP_NOT: r[in->dst] = ~r[in->a]; break;
		case LANG_OP_LNOT: r[in->dst] = !r[in->a]; break;
		case LANG_OP_SEXT:
			r[in->dst] = in->aux == 8 ? (uint64_t)(int64_t)(int8_t)r[in->a] :
				     in->aux == 16 ? (uint64_t)(int64_t)(int16_t)r[in->a] :
				     (uint64_t)(int64_t)(int32_t)r[in->a];
			break;
		case LANG_OP_ZEXT:
			r[in->dst] = r[in->a] & (in->aux == 8 ? 0xffull : in->aux == 16 ? 0xffffull : 0xffffffffull);
			break;
		case LANG_OP_JMP:
			in = code + in->aux;
			continue;
		case LANG_OP_JZ:
			if (!r[in->a]) {
				in = code + in->aux;
				continue;
			}
			break;
		case LANG_OP_JNZ:
			if (r[in->a]) {
				in = code + in->aux;
				continue;
			}
			break;
		case LANG_OP_LOOP:
			if (!budget--) {
				__atomic_fetch_add(&rh->aborted, 1, __ATOMIC_RELAXED);
				return -E2BIG;
			}
			in = code + in->aux;
			continue;
		case LANG_OP_CTX:
			r[in->dst] = ctx_value(c, in->aux, (unsigned)in->imm);
			break;
		case LANG_OP_REG:
			r[in->dst] = c->regs ? *(const uint64_t *)(const void *)((const char *)c->regs + in->aux) -
						       (in->imm ? c->ip_bias : 0) :
					       0;
			break;
		case LANG_OP_BUF:
			read_buf(c, s + in->aux, r[in->a], r[in->b],
				 in->imm < 0 ? NULL : s + (uint64_t)in->imm);
			break;
		case LANG_OP_LOAD:
			r[in->dst] = (uint64_t)load(c, r[in->a], in->aux, in->imm != 0);
			break;
		case LANG_OP_STR:
			read_str(c, s + in->aux, r[in->a], in->imm < 0 ? r[in->b] : (uint64_t)in->imm);
			break;
		case LANG_OP_STST: memcpy(s + in->aux, &r[in->a], 8); break;
		case LANG_OP_STLD: memcpy(&r[in->dst], s + in->aux, 8); break;
		case LANG_OP_STCPY:
			scratch_copy(s + in->aux, s + ((uint64_t)in->imm & 0xffffffffu), (uint64_t)in->imm >> 32);
			break;
		case LANG_OP_STZERO: memset(s + in->aux, 0, (size_t)in->imm); break;
		case LANG_OP_STPOOL:
			memcpy(s + in->aux, img->pool + ((uint64_t)in->imm & 0xffffffffu), (uint64_t)in->imm >> 32);
			break;
		case LANG_OP_STREQ:
			r[in->dst] = (uint64_t)scratch_streq(s + in->aux, s + in->imm, in->b);
			break;
		case LANG_OP_COMM:
			memset(s + in->aux, 0, LANG_STRLEN);
			if (HAS_OP(c, comm))
				OP(c, comm, (char *)s + in->aux, c->arg);
			s[in->aux + LANG_COMM_LEN - 1] = 0;
			break;
		case LANG_OP_USTACK: {
			uint64_t *st = (uint64_t *)(void *)(s + in->aux);
			int n = 0;

			memset(st, 0, 8 + 8 * LANG_USTACK_MAX);
			if (HAS_OP(c, ustack) && c->regs)
				n = OP(c, ustack, c->regs, st + 1, (int)in->imm, c->arg);
			st[0] = n > 0 ? (uint64_t)(n > in->imm ? in->imm : n) : 0;
			break;
		}
		case LANG_OP_MAP_GET:
			r[in->dst] = (uint64_t)map_get(img, region, in->b, s + in->aux);
			break;
		case LANG_OP_MAP_GETX: {
			const uint8_t *v = lang_map_lookup(img, region, in->b, s + in->aux, 0);
			uint32_t n = img->maps[in->b].val_size;

			if (v && img->map_shard_off[in->b])
				sum_words(img, region, in->b, v, s + in->imm, n / 8);
			else if (v)
				memcpy(s + in->imm, v, n);
			else
				memset(s + in->imm, 0, n);
			break;
		}
		case LANG_OP_MAP_HAS:
			r[in->dst] = lang_map_lookup(img, region, in->b, s + in->aux, 0) != NULL;
			break;
		case LANG_OP_MAP_SET: {
			int64_t *v = (int64_t *)lang_map_lookup(img, region, in->b, s + in->aux, 1);

			if (v)
				__atomic_store_n(v, (int64_t)r[in->a], __ATOMIC_RELAXED);
			break;
		}
		case LANG_OP_MAP_SETX: {
			uint8_t *v = lang_map_lookup(img, region, in->b, s + in->aux, 1);

			if (v)
				memcpy(v, s + in->imm, img->maps[in->b].val_size);
			break;
		}
		case LANG_OP_MAP_AGG:
			lang_map_aggregate(img, region, in->b, s + in->aux, (int64_t)r[in->a],
					   c->shard);
			break;
		case LANG_OP_MAP_DEL:
			lang_map_delete(img, region, in->b, s + in->aux);
			break;
		case LANG_OP_EMIT:
			emit(c, in->dst, in->aux, s + ((uint64_t)in->imm & 0xffffffffu), (uint64_t)in->imm >> 32);
			break;
		case LANG_OP_SIGNAL:
			if (HAS_OP(c, signal))
				OP(c, signal, (int)r[in->a], c->arg);
			break;
		case LANG_OP_OVERRIDE:
			if (HAS_OP(c, override) && c->regs)
				OP(c, override, c->regs, r[in->a], c->arg);
			break;
		case LANG_OP_EXIT:
			if (!__atomic_exchange_n(&rh->exited, 1, __ATOMIC_RELAXED))
				emit(c, LANG_EV_EXIT, 0, NULL, 0);
			return LANG_RUN_EXIT;
		default:
			return -EINVAL;	/* the verifier let nothing else through */
		}
		in++;
	}
}

int lang_run(const struct lang_image *img, unsigned probe, struct lang_ctx *c)
{
	const struct lang_probe_desc *p;
	struct region_hdr *rh = c->maps;

	if (probe >= img->hdr->nprobes)
		return -EINVAL;
	p = &img->probes[probe];
	/* after exit() only END still runs, as in bpftrace */
	if (p->kind != LANG_P_END && __atomic_load_n(&rh->exited, __ATOMIC_RELAXED))
		return LANG_RUN_EXIT;
	if (p->fast && run_fast(img, p, c))
		return 0;
	return interpret(img, p, c);
}
