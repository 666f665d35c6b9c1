/* Maps in a preallocated region shared by the target (writers, on the hit
 * path) and the tool (reader).
 *
 * Layout, all derived from the verified image (never from the region):
 *   struct region_hdr
 *   per map at img->map_off[m]: struct map_hdr, then map_cap[m] slots of
 *   map_slot[m] bytes: a 64-bit word, the key, the value.
 *
 * The word of a slot: state in bits 0-1 (0 empty, 1 being written, 2 live,
 * 3 deleted), a generation in bits 2-17 bumped when a deleted slot takes a
 * new key, and the key's hash in bits 18-63.  Open addressing with linear
 * probing over twice max_keys slots; a writer claims an empty or deleted
 * slot with one compare-and-swap, writes the key, then publishes the word
 * (release).  A thread that meets a slot being written with its own hash
 * waits a bounded number of pauses, then gives up (the update counts as
 * dropped): nothing ever blocks.  Values are updated with atomic adds or
 * compare-and-swap loops (min/max), so counts from many threads add up.
 *
 * A keyless count, sum, avg, stats, hist or lhist that the program never
 * deletes is sharded: after its one slot comes a base, and after all the
 * maps come LANG_SHARDS blocks, one per thread, each holding that thread's
 * shard of every sharded map, on cache lines of its own.  A thread that
 * got a shard (lang_maps_take_shard) adds to it alone, with no locked
 * instruction (mapi_owner_add); threads beyond LANG_SHARDS add to the slot
 * with locked adds.  The value is the slot plus the shards less the base,
 * summed by whoever reads it; clear and zero move the base (the tool
 * alone writes it).  A map of thread values (the latency pattern's start
 * times, lang_image.map_tval_off) has an entry in each thread's block
 * too, which that thread alone writes; lang_map_next lists the live ones
 * after the slots.
 * Known races, all benign for the reader: an update that races with a
 * delete of the same key may land in the slot's next key; two inserts of
 * one key racing with a delete may both create it.
 *
 * The hit path's operations (lookup, insert, delete, the bucket index)
 * are inline code in maps_impl.h, which the agent's handlers for the fast
 * forms inline whole; the functions here are the calls built from it. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "lang_int.h"
#include "maps_impl.h"

#define map_at mapi_map
#define slot_at mapi_slot
#define slot_val mapi_val

uint64_t lang_key_hash(const void *key, size_t len)
{
	return mapi_key_hash(key, len);
}

/* The value of key in map m, or NULL; creates the entry when create.  An
 * entry that can not be created counts as dropped. */
uint8_t *lang_map_lookup(const struct lang_image *img, void *region, unsigned m,
			 const void *key, int create)
{
	return mapi_lookup(img, region, m, key, create);
}

int lang_map_delete(const struct lang_image *img, void *region, unsigned m, const void *key)
{
	uint8_t *val = lang_map_lookup(img, region, m, key, 0);

	if (!val)
		return -ENOENT;
	return lang_map_delete_val(img, region, m, val);
}

uint8_t *lang_map_revive(const struct lang_image *img, void *region, unsigned m, uint8_t *val,
			 uint64_t dead_w, const void *key)
{
	return mapi_revive(img, region, m, val, dead_w, key);
}

int lang_map_delete_val(const struct lang_image *img, void *region, unsigned m, uint8_t *val)
{
	return mapi_delete_val(img, region, m, val) ? -ENOENT : 0;
}

/* ---- bucket indexes, as bpftrace 0.17 computes them ---- */

unsigned lang_hist_index(int64_t v)
{
	return mapi_hist_index(v);
}

unsigned lang_lhist_nbuckets(int64_t min, int64_t max, int64_t step)
{
	return (unsigned)((uint64_t)(max - min) / (uint64_t)step) + 2;
}

unsigned lang_lhist_index(int64_t v, int64_t min, int64_t max, int64_t step)
{
	if (v < min)
		return 0;
	if (v > max)
		return (unsigned)((uint64_t)(max - min) / (uint64_t)step) + 1;
	return (unsigned)((uint64_t)(v - min) / (uint64_t)step) + 1;
}

/* ---- updates (hit path) ---- */

static void store_max(int64_t *p, int64_t v)
{
	int64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (v >= old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* adds v to *p: by its owner, or by anyone (locked) */
static void add_to(int64_t *p, int64_t v, bool owned)
{
	if (owned)
		mapi_owner_add(p, v);
	else
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

void lang_map_aggregate(const struct lang_image *img, void *region, unsigned m,
			const void *key, int64_t v, uint32_t shard)
{
	const struct lang_map_desc *d = &img->maps[m];
	bool owned = false;
	int64_t *val;

	switch (d->kind) {
	case LANG_M_MIN:
		/* bpftrace keeps 0xffffffff - v and its maximum, an absent
		 * entry reading 0: one is created only when that is >= 0 */
		v = (int64_t)(0xffffffffull - (uint64_t)v);
		/* fall through */
	case LANG_M_MAX:
		val = (int64_t *)lang_map_lookup(img, region, m, key, 0);
		if (!val) {
			if (v < 0)
				return;
			val = (int64_t *)lang_map_lookup(img, region, m, key, 1);
			if (!val)
				return;
		}
		store_max(val, v);
		return;
	default:
		break;
	}
	if (d->nkeys) {
		val = (int64_t *)lang_map_lookup(img, region, m, key, 1);
		/* a key holding the thread's own tid: no one else writes it */
		owned = img->map_tid_owned[m];
	} else
		val = mapi_agg_target(img, region, m, shard, &owned);
	if (!val)
		return;
	switch (d->kind) {
	case LANG_M_COUNT:
		add_to(val, 1, owned);
		break;
	case LANG_M_SUM:
		add_to(val, v, owned);
		break;
	case LANG_M_AVG:
	case LANG_M_STATS:
		add_to(&val[0], 1, owned);
		add_to(&val[1], v, owned);
		break;
	case LANG_M_HIST:
		add_to(&val[lang_hist_index(v)], 1, owned);
		break;
	case LANG_M_LHIST:
		add_to(&val[lang_lhist_index(v, d->lhist_min, d->lhist_max, d->lhist_step)], 1,
		       owned);
		break;
	default:
		break;
	}
}

uint32_t lang_maps_take_shard(void *region)
{
	return mapi_take_shard(region);
}

uint32_t lang_maps_take_thread_shard(const struct lang_image *img, void *region, uint64_t tid)
{
	uint32_t shard = mapi_take_shard(region);

	if (shard)
		mapi_tval_adopt(img, region, shard, tid);
	return shard;
}

void lang_map_hist_add_late(const struct lang_image *img, void *region, unsigned m,
			    uint32_t shard, unsigned idx)
{
	bool owned;
	int64_t *v;

	if (m >= img->hdr->nmaps || img->maps[m].kind != LANG_M_HIST || img->maps[m].nkeys ||
	    idx >= LANG_HIST_BUCKETS)
		return;
	v = mapi_agg_target(img, region, m, shard, &owned);
	if (v && owned)
		mapi_hist_add_late(v, idx);
	else if (v)
		__atomic_fetch_add(&v[idx], 1, __ATOMIC_RELAXED);
}

/* Words first to first + n - 1 of what sharded map m's slot and shards
 * hold, modulo 2^64 as the writers add: each shard's words, then (a
 * hist's) its late sample in its bucket (mapi_hist_add_late: the late
 * word read after the buckets, which its writer adds to after storing
 * it).  Every word is read whole (aligned 8 bytes), none written. */
static void sharded_total(const struct lang_image *img, const void *region, unsigned m,
			  const void *val, uint32_t first, uint64_t *out, uint32_t n)
{
	const uint64_t *slot = (const uint64_t *)val + first;
	bool hist = img->maps[m].kind == LANG_M_HIST;
	uint32_t k, s;

	for (k = 0; k < n; k++)
		out[k] = __atomic_load_n(&slot[k], __ATOMIC_RELAXED);
	for (s = 1; s <= LANG_SHARDS; s++) {
		const uint64_t *sv = (const uint64_t *)mapi_shard_val(img, (void *)region, m, s);
		uint64_t late;

		for (k = 0; k < n; k++)
			out[k] += __atomic_load_n(&sv[first + k], __ATOMIC_ACQUIRE);
		if (!hist)
			continue;
		late = __atomic_load_n(&sv[LANG_HIST_BUCKETS], __ATOMIC_RELAXED);
		if (late - 1 - first < n && late - 1 < LANG_HIST_BUCKETS)
			out[late - 1 - first]++;
	}
}

/* Words first to first + n - 1 of sharded map m's value (whose slot
 * value is val): the slot plus the shards less the base. */
void lang_map_sum(const struct lang_image *img, const void *region, unsigned m,
		  const void *val, uint32_t first, uint64_t *out, uint32_t n)
{
	const uint64_t *base =
		(const uint64_t *)((const uint8_t *)region + img->map_base_off[m]) + first;

	sharded_total(img, region, m, val, first, out, n);
	for (uint32_t k = 0; k < n; k++)
		out[k] -= __atomic_load_n(&base[k], __ATOMIC_RELAXED);
}

/* How many of the threads' live entries of map m in shards 1 to below
 * hold key, and (sum not NULL) the sum of their values. */
static unsigned tval_sum(const struct lang_image *img, const void *region, unsigned m,
			 uint64_t key, uint32_t below, int64_t *sum)
{
	unsigned n = 0;

	for (uint32_t s = 1; s < below; s++) {
		const struct lang_tval *e = mapi_tval(img, (void *)region, m, s);

		if (!__atomic_load_n(&e->live, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&e->key, __ATOMIC_RELAXED) != key)
			continue;
		n++;
		if (sum)
			*sum += __atomic_load_n(&e->val, __ATOMIC_RELAXED);
	}
	return n;
}

/* A count by tid that lang_map_next listed, in a slot or a thread's
 * entry: with the counts of the same key it did not list. */
static const void *tval_count_value(const struct lang_image *img, const void *region,
				    unsigned m, const void *val, void *buf)
{
	const uint8_t *shards = (const uint8_t *)region + img->shards_off;
	uint64_t key;
	int64_t v = 0;

	if (img->maps[m].kind != LANG_M_COUNT)
		return val;	/* a start time: the one listed */
	if ((const uint8_t *)val >= shards)
		memcpy(&key, (const uint8_t *)val - offsetof(struct lang_tval, val), 8);
	else
		memcpy(&key, (const uint8_t *)val - 8, 8);	/* the slot's */
	if ((const uint8_t *)val < shards)
		v = __atomic_load_n((const int64_t *)val, __ATOMIC_RELAXED);
	tval_sum(img, region, m, key, LANG_SHARDS + 1, &v);
	memcpy(buf, &v, 8);
	return buf;
}

const void *lang_map_value(const struct lang_image *img, const void *region, unsigned m,
			   const void *val, void *buf)
{
	if (m < img->hdr->nmaps && val && img->map_tval_off[m])
		return tval_count_value(img, region, m, val, buf);
	if (m >= img->hdr->nmaps || !val || !img->map_shard_off[m])
		return val;
	lang_map_sum(img, region, m, val, 0, buf, img->maps[m].val_size / 8);
	return buf;
}

/* Moves sharded map m's base up to what it holds (clear, zero): the
 * value reads zero, and an update racing with this lands whole on one
 * side of the read of its word. */
static void rebase(const struct lang_image *img, void *region, unsigned m)
{
	uint64_t *base = (uint64_t *)((uint8_t *)region + img->map_base_off[m]);
	const void *val = slot_val(img, m, slot_at(img, map_at(img, region, m), m, 0));
	uint32_t n = img->maps[m].val_size / 8, k;

	for (k = 0; k < n; k++) {
		uint64_t total;

		sharded_total(img, region, m, val, k, &total, 1);
		__atomic_store_n(&base[k], total, __ATOMIC_RELAXED);
	}
}

/* Whether sharded map m holds anything above its base. */
static bool sharded_nonzero(const struct lang_image *img, void *region, unsigned m)
{
	const uint8_t *val = slot_val(img, m, slot_at(img, map_at(img, region, m), m, 0));
	uint32_t n = img->maps[m].val_size / 8, k;

	for (k = 0; k < n; k++) {
		uint64_t w;

		lang_map_sum(img, region, m, val, k, &w, 1);
		if (w)
			return true;
	}
	return false;
}

/* clear() of a sharded map: the writers' memory stays theirs, the base
 * moves and the map reads empty until its next update (which makes it
 * live again).  An update that landed between the base's move and the
 * map going empty makes it live again here, so that it is not hidden
 * until the next one. */
static void clear_sharded(const struct lang_image *img, void *region, unsigned m)
{
	uint64_t *word = (uint64_t *)slot_at(img, map_at(img, region, m), m, 0);
	uint64_t w = ST_LIVE;

	rebase(img, region, m);
	if (!__atomic_compare_exchange_n(word, &w, ST_EMPTY, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	w = ST_EMPTY;
	if (sharded_nonzero(img, region, m))
		__atomic_compare_exchange_n(word, &w, ST_LIVE, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
}

/* An integer read of a map value (int maps and readable aggregates). */
int64_t lang_map_read_int(const struct lang_image *img, unsigned m, const void *val)
{
	struct lang_agg a;

	lang_map_agg(img, m, val, &a);
	return a.value;
}

/* ---- region management and reading (tool side, or both) ---- */

static struct region_hdr *region_hdr(void *region)
{
	return region;
}

int lang_maps_init(const struct lang_image *img, void *region, size_t size)
{
	struct region_hdr *rh = region;
	unsigned m;

	if (!img || !region || size < img->region_size)
		return -EINVAL;
	memset(region, 0, img->region_size);
	rh->magic = LANG_MAGIC;
	rh->nmaps = img->hdr->nmaps;
	for (m = 0; m < img->hdr->nmaps; m++) {
		struct map_hdr *mh = map_at(img, region, m);

		mh->cap = img->map_cap[m];
		mh->slot_size = img->map_slot[m];
	}
	return 0;
}

uint64_t lang_maps_dropped(const struct lang_image *img, const void *region, unsigned m)
{
	if (m >= img->hdr->nmaps)
		return 0;
	return __atomic_load_n(&map_at(img, (void *)region, m)->dropped, __ATOMIC_RELAXED);
}

uint64_t lang_maps_aborted(const struct lang_image *img, const void *region)
{
	(void)img;
	return __atomic_load_n(&region_hdr((void *)region)->aborted, __ATOMIC_RELAXED);
}

int lang_map_next(const struct lang_image *img, const void *region, unsigned m,
		  size_t *pos, const void **key, const void **val)
{
	struct map_hdr *mh;

	if (m >= img->hdr->nmaps)
		return 0;
	mh = map_at(img, (void *)region, m);
	while (*pos < img->map_cap[m]) {
		uint8_t *slot = slot_at(img, mh, m, *pos);
		uint64_t w = __atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE);

		(*pos)++;
		if (img->maps[m].nkeys ? w_state(w) != ST_LIVE : w != ST_LIVE)
			continue;
		*key = img->maps[m].nkeys ? slot + 8 : NULL;
		*val = slot_val(img, m, slot);
		return 1;
	}
	/* then the threads' own entries of a map of thread values, each key
	 * once: not one a slot has too (a dead thread's tid taken by a
	 * thread without a shard), nor one an earlier entry has (a signal
	 * handler's hit that took a shard of its own while the thread took
	 * one); the first stands for all (lang_map_value) */
	while (img->map_tval_off[m] && *pos < (size_t)img->map_cap[m] + LANG_SHARDS) {
		uint32_t shard = (uint32_t)(*pos - img->map_cap[m]) + 1;
		struct lang_tval *e = mapi_tval(img, (void *)region, m, shard);
		uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);

		(*pos)++;
		if (!__atomic_load_n(&e->live, __ATOMIC_ACQUIRE) ||
		    tval_sum(img, region, m, k, shard, NULL) ||
		    mapi_lookup(img, (void *)region, m, &e->key, 0))
			continue;
		*key = &e->key;
		*val = &e->val;
		return 1;
	}
	return 0;
}

void lang_map_clear(const struct lang_image *img, void *region, unsigned m)
{
	struct map_hdr *mh;
	uint64_t i, busy = 0;

	if (m >= img->hdr->nmaps)
		return;
	mh = map_at(img, region, m);
	if (img->map_shard_off[m]) {
		clear_sharded(img, region, m);
		return;
	}
	for (i = 0; i < img->map_cap[m]; i++) {
		uint8_t *slot = slot_at(img, mh, m, i);
		uint64_t *word = (uint64_t *)slot;
		uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);

		if (w_state(w) == ST_BUSY) {
			busy++;
			continue;
		}
		if (w != ST_EMPTY && __atomic_compare_exchange_n(word, &w, ST_EMPTY, false,
								 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			memset(slot_val(img, m, slot), 0, img->maps[m].val_size);
	}
	__atomic_store_n(&mh->live, busy, __ATOMIC_RELAXED);
}

void lang_map_zero(const struct lang_image *img, void *region, unsigned m)
{
	struct map_hdr *mh;
	uint64_t i;

	if (m >= img->hdr->nmaps)
		return;
	if (img->map_shard_off[m]) {
		rebase(img, region, m);
		return;
	}
	mh = map_at(img, region, m);
	for (i = 0; i < img->map_cap[m]; i++) {
		uint8_t *slot = slot_at(img, mh, m, i);
		uint64_t *val = (uint64_t *)slot_val(img, m, slot);
		uint32_t k;

		if (w_state(__atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE)) != ST_LIVE)
			continue;
		for (k = 0; k < img->maps[m].val_size / 8; k++)
			__atomic_store_n(&val[k], 0, __ATOMIC_RELAXED);
	}
}

void lang_map_agg(const struct lang_image *img, unsigned m, const void *val, struct lang_agg *out)
{
	const struct lang_map_desc *d = &img->maps[m];
	int64_t v[2] = { 0, 0 };

	memset(out, 0, sizeof(*out));
	if (m >= img->hdr->nmaps || !val)
		return;
	memcpy(v, val, d->val_size >= 16 ? 16 : 8);
	switch (d->kind) {
	case LANG_M_MIN:
		/* a stored 0 is a zero()ed map, which bpftrace prints as 0 */
		out->value = v[0] ? (int64_t)(0xffffffffull - (uint64_t)v[0]) : 0;
		out->has_value = 1;
		break;
	case LANG_M_AVG:
	case LANG_M_STATS:
		out->count = v[0];
		out->sum = v[1];
		/* the region may hold anything: no INT64_MIN / -1 */
		out->value = !v[0] ? 0 : v[0] == -1 ? (int64_t)(0 - (uint64_t)v[1]) : v[1] / v[0];
		out->has_value = v[0] != 0;
		break;
	case LANG_M_HIST:
	case LANG_M_LHIST:
	case LANG_M_STR:
	case LANG_M_USTACK:
	case LANG_M_TUPLE:
	case LANG_M_TIMESTAMP:
	case LANG_M_BUF:
		break;
	default:
		out->value = v[0];
		out->has_value = 1;
		break;
	}
}

const uint64_t *lang_map_buckets(const struct lang_image *img, unsigned m, const void *val,
				 unsigned *nbuckets)
{
	const struct lang_map_desc *d;

	*nbuckets = 0;
	if (m >= img->hdr->nmaps || !val)
		return NULL;
	d = &img->maps[m];
	if (d->kind == LANG_M_HIST)
		*nbuckets = LANG_HIST_BUCKETS;
	else if (d->kind == LANG_M_LHIST)
		*nbuckets = d->val_size / 8;
	else
		return NULL;
	return val;
}
