/* The maps' hit-path operations, as inline code: maps.c builds the
 * library's calls from it, and the agent's handlers for the fast forms
 * (agent_prog_fast.c) inline it whole, so that libkprobes' handler
 * analysis finds no call there: a call taking more than one argument
 * passes one in %rsi, which the analysis counts as reading pt_regs.  No C
 * library either: keys and values are copied and compared by the loops
 * below (their users build with -fno-tree-loop-distribute-patterns, so
 * the loops stay loops).
 *
 * The word of a slot: state in bits 0-1 (0 empty, 1 being written, 2 live,
 * 3 deleted), a generation in bits 2-16 bumped when a deleted slot takes a
 * new key, bit 17 in a deleted slot when it still counts in the map's
 * `live' (LANG_MAP_W_COUNTED), and the key's hash in bits 18-63.  Open
 * addressing with linear probing over twice max_keys slots; a writer
 * claims an empty or deleted slot with one compare-and-swap, writes the
 * key, then publishes the word (release).
 *
 * `live' bounds the keys at max_keys.  A delete leaves its slot counted,
 * and whoever claims that slot again takes the count over: the pattern
 * that deletes and re-creates a key on every call (the latency pattern)
 * then touches no shared counter.  A claim that finds the bound reached
 * first looks through a window of slots (moving on from claim to claim)
 * for a counted deleted one and takes its count (the slot stays deleted,
 * uncounted), so deleted keys do not hold the map full for long.  A thread that meets a slot being written with its own hash
 * waits a bounded number of pauses, then gives up (the update counts as
 * dropped): nothing ever blocks. */
#ifndef KPROBE_LANG_MAPS_IMPL_H
#define KPROBE_LANG_MAPS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kp_arch.h"
#include "maps_int.h"

#define MAPS_INLINE static inline __attribute__((always_inline))

#define ST_EMPTY 0u
#define ST_BUSY 1u
#define ST_LIVE 2u
#define ST_DEAD 3u
#define GEN_SHIFT 2
#define GEN_MASK 0x7fffull
#define TAG_SHIFT 18
#define BUSY_SPINS 512

MAPS_INLINE uint64_t w_state(uint64_t w) { return w & 3; }
MAPS_INLINE uint64_t w_tag(uint64_t w) { return w >> TAG_SHIFT; }
MAPS_INLINE uint64_t w_gen(uint64_t w) { return (w >> GEN_SHIFT) & GEN_MASK; }
MAPS_INLINE uint64_t w_make(uint64_t tag, uint64_t gen, uint64_t st)
{
	return (tag << TAG_SHIFT) | ((gen & GEN_MASK) << GEN_SHIFT) | st;
}

MAPS_INLINE uint64_t load8(const uint8_t *p)
{
	uint64_t w;

	__builtin_memcpy(&w, p, 8);
	return w;
}

MAPS_INLINE void mapi_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w = load8(src + i);

		__builtin_memcpy(dst + i, &w, 8);
	}
	for (; i < n; i++)
		dst[i] = src[i];
}

MAPS_INLINE void mapi_zero(uint8_t *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		__atomic_store_n((uint64_t *)(dst + i), 0, __ATOMIC_RELAXED);
	for (; i < n; i++)
		dst[i] = 0;
}

MAPS_INLINE bool mapi_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i = 0;

	if (n == 8)
		return load8(a) == load8(b);
	for (; i + 8 <= n; i += 8)
		if (load8(a + i) != load8(b + i))
			return false;
	for (; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

MAPS_INLINE uint64_t mapi_hash_finish(uint64_t h)
{
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 31;
	return h;
}

MAPS_INLINE uint64_t mapi_key_hash(const void *key, size_t len)
{
	const uint8_t *k = key;
	uint64_t h = 0x243f6a8885a308d3ull ^ len;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		h = (h ^ load8(k + i)) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return mapi_hash_finish(h);
}

/* The hash of an 8-byte key given as its value: the same as
 * mapi_key_hash of its bytes. */
MAPS_INLINE uint64_t mapi_key8_hash(uint64_t key)
{
	uint64_t h = (0x243f6a8885a308d3ull ^ 8) ^ key;

	h *= 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	return mapi_hash_finish(h);
}

MAPS_INLINE struct map_hdr *mapi_map(const struct lang_image *img, void *region, unsigned m)
{
	return (struct map_hdr *)((uint8_t *)region + img->map_off[m]);
}

MAPS_INLINE uint8_t *mapi_slot(const struct lang_image *img, struct map_hdr *mh, unsigned m,
			       uint64_t i)
{
	return (uint8_t *)(mh + 1) + i * img->map_slot[m];
}

MAPS_INLINE uint8_t *mapi_val(const struct lang_image *img, unsigned m, uint8_t *slot)
{
	return slot + 8 + ((img->maps[m].key_size + 7u) & ~7u);
}

MAPS_INLINE void mapi_drop(struct map_hdr *mh)
{
	__atomic_fetch_add(&mh->dropped, 1, __ATOMIC_RELAXED);
}

/* A slot this thread holds being written (ST_BUSY), its key in place:
 * the value zeroed, then the word published. */
MAPS_INLINE void mapi_publish(const struct lang_image *img, unsigned m, uint8_t *slot,
			      uint64_t tag, uint64_t gen)
{
	mapi_zero(mapi_val(img, m, slot), img->maps[m].val_size);
	__atomic_store_n((uint64_t *)slot, w_make(tag, gen, ST_LIVE), __ATOMIC_RELEASE);
}

/* Slots a claim that finds the bound reached looks at for a counted
 * deleted one, from where the last such look stopped (a map full of live
 * keys costs each update that would add one this much, then a drop). */
#define UNCOUNT_WINDOW 64

/* The count of some deleted slot of map m taken from it (the slot stays
 * deleted): true when there was one in the window looked at. */
MAPS_INLINE bool mapi_uncount_one(const struct lang_image *img, unsigned m, struct map_hdr *mh)
{
	uint64_t cap = img->map_cap[m];
	uint64_t from = __atomic_fetch_add(&mh->scan, UNCOUNT_WINDOW, __ATOMIC_RELAXED);

	for (uint64_t k = 0; k < UNCOUNT_WINDOW && k < cap; k++) {
		uint64_t *word = (uint64_t *)mapi_slot(img, mh, m, (from + k) & (cap - 1));
		uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);

		if (w_state(w) == ST_DEAD && (w & LANG_MAP_W_COUNTED) &&
		    __atomic_compare_exchange_n(word, &w, w & ~LANG_MAP_W_COUNTED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_fetch_sub(&mh->live, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	return false;
}

/* One more key in map m's count: false when max_keys are there already,
 * deleted ones uncounted first. */
MAPS_INLINE bool mapi_count_key(const struct lang_image *img, unsigned m, struct map_hdr *mh)
{
	for (int tries = 0; tries < 2; tries++) {
		if (__atomic_add_fetch(&mh->live, 1, __ATOMIC_RELAXED) <= img->maps[m].max_keys)
			return true;
		__atomic_fetch_sub(&mh->live, 1, __ATOMIC_RELAXED);
		if (!mapi_uncount_one(img, m, mh))
			return false;
	}
	return false;
}

/* Claims slot (whose word was w) for key; 1 on success, 0 when another
 * thread took it first, -1 when the map is full.  A deleted slot still
 * counted passes its count on to the key. */
MAPS_INLINE int mapi_claim(const struct lang_image *img, unsigned m, struct map_hdr *mh,
			   uint8_t *slot, uint64_t w, uint64_t tag, const void *key)
{
	uint64_t *word = (uint64_t *)slot;
	uint64_t gen = w_state(w) == ST_DEAD ? w_gen(w) + 1 : 0;
	const struct lang_map_desc *d = &img->maps[m];
	bool counted = w_state(w) == ST_DEAD && (w & LANG_MAP_W_COUNTED);

	if (!counted && !mapi_count_key(img, m, mh))
		return -1;
	if (!__atomic_compare_exchange_n(word, &w, w_make(tag, gen, ST_BUSY), false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		if (!counted)
			__atomic_fetch_sub(&mh->live, 1, __ATOMIC_RELAXED);
		return 0;
	}
	mapi_copy(slot + 8, key, d->key_size);
	mapi_publish(img, m, slot, tag, gen);
	return 1;
}

/* A claim's result as lookup returns it: the value, or NULL (counted as
 * dropped when the map is full); *retry when another thread was first. */
MAPS_INLINE uint8_t *mapi_claimed(const struct lang_image *img, unsigned m,
				  struct map_hdr *mh, uint8_t *slot, uint64_t w, uint64_t tag,
				  const void *key, bool *retry)
{
	int r = mapi_claim(img, m, mh, slot, w, tag, key);

	*retry = r == 0;
	if (r > 0)
		return mapi_val(img, m, slot);
	if (r < 0)
		mapi_drop(mh);
	return NULL;
}

/* The value of a keyless map (one slot: no hashing). */
MAPS_INLINE uint8_t *mapi_lookup_keyless(const struct lang_image *img, void *region, unsigned m,
					 int create)
{
	struct map_hdr *mh = mapi_map(img, region, m);
	uint8_t *slot = mapi_slot(img, mh, m, 0);
	uint64_t *word = (uint64_t *)slot;

	/* keyless values start zeroed: publish the word.  A clear() may
	 * empty it again between the publish and the look after it: publish
	 * again (bounded), rather than drop an update a sharded map would
	 * have counted whole (clear() only moves its base). */
	for (int tries = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) != ST_LIVE; tries++) {
		uint64_t zero = 0;

		if (!create)
			return NULL;
		if (tries == 4) {
			mapi_drop(mh);
			return NULL;
		}
		__atomic_compare_exchange_n(word, &zero, ST_LIVE, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	}
	return mapi_val(img, m, slot);
}

/* The value of key (hash h) in map m, or NULL; creates the entry when
 * create.  An entry that can not be created counts as dropped. */
MAPS_INLINE uint8_t *mapi_lookup_hashed(const struct lang_image *img, void *region, unsigned m,
					const void *key, uint64_t h, int create)
{
	const struct lang_map_desc *d = &img->maps[m];
	struct map_hdr *mh = mapi_map(img, region, m);
	uint64_t cap = img->map_cap[m], tag = h >> TAG_SHIFT, i, n;
	bool retry;

	for (int tries = 0; tries < 4; tries++) {
		uint8_t *dead = NULL, *val;
		uint64_t dead_w = 0;

		for (i = h & (cap - 1), n = 0; n < cap; n++, i = (i + 1) & (cap - 1)) {
			uint8_t *slot = mapi_slot(img, mh, m, i);
			uint64_t *word = (uint64_t *)slot;
			uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
			int spins = 0;

			if (w_state(w) == ST_EMPTY) {
				if (!create)
					return NULL;
				if (dead) {
					slot = dead;
					w = dead_w;
				}
				val = mapi_claimed(img, m, mh, slot, w, tag, key, &retry);
				if (!retry)
					return val;
				break;	/* lost a race: look again */
			}
			if (w_tag(w) != tag) {
				if (w_state(w) == ST_DEAD && !dead) {
					dead = slot;
					dead_w = w;
				}
				continue;
			}
			while (w_state(w) == ST_BUSY && spins++ < BUSY_SPINS) {
				kp_cpu_relax();
				w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
			}
			if (w_state(w) == ST_BUSY) {
				if (create)
					mapi_drop(mh);
				return NULL;
			}
			if (w_tag(w) != tag)
				continue;
			if (!mapi_equal(slot + 8, key, d->key_size)) {
				if (w_state(w) == ST_DEAD && !dead) {
					dead = slot;
					dead_w = w;
				}
				continue;
			}
			/* the key compared equal: was it the same key throughout? */
			if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != w)
				break;
			if (w_state(w) == ST_LIVE)
				return mapi_val(img, m, slot);
			/* deleted: revive it in place */
			if (!create)
				return NULL;
			val = mapi_claimed(img, m, mh, slot, w, tag, key, &retry);
			if (!retry)
				return val;
			break;
		}
		if (n == cap) {
			if (create && dead) {
				val = mapi_claimed(img, m, mh, dead, dead_w, tag, key, &retry);
				if (!retry)
					return val;
				continue;
			}
			if (create)
				mapi_drop(mh);
			return NULL;
		}
	}
	if (create)
		mapi_drop(mh);
	return NULL;
}

MAPS_INLINE uint8_t *mapi_lookup(const struct lang_image *img, void *region, unsigned m,
				 const void *key, int create)
{
	if (!img->maps[m].nkeys)
		return mapi_lookup_keyless(img, region, m, create);
	return mapi_lookup_hashed(img, region, m, key,
				  mapi_key_hash(key, img->maps[m].key_size), create);
}

MAPS_INLINE uint8_t *mapi_revive(const struct lang_image *img, void *region, unsigned m,
				 uint8_t *val, uint64_t dead_w, const void *key)
{
	uint8_t *slot = (uint8_t *)lang_map_val_word(img, m, val);
	bool retry;

	if (w_state(dead_w) != ST_DEAD || !img->maps[m].nkeys)
		return NULL;
	return mapi_claimed(img, m, mapi_map(img, region, m), slot, dead_w, w_tag(dead_w), key,
			    &retry);
}

/* A deleted slot, still counted, given back in place to the key it held
 * (whose thread deleted it: the latency pattern's start value), without
 * touching the count; false when its word is no longer dead_w. */
MAPS_INLINE bool mapi_revive_counted(const struct lang_image *img, unsigned m, uint8_t *val,
				     uint64_t dead_w)
{
	uint64_t *word = (uint64_t *)lang_map_val_word(img, m, val);
	uint64_t gen = w_gen(dead_w) + 1, tag = w_tag(dead_w);

	if (w_state(dead_w) != ST_DEAD || !(dead_w & LANG_MAP_W_COUNTED) ||
	    !__atomic_compare_exchange_n(word, &dead_w, w_make(tag, gen, ST_BUSY), false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	mapi_publish(img, m, (uint8_t *)word, tag, gen);
	return true;
}

MAPS_INLINE int mapi_delete_val(const struct lang_image *img, void *region, unsigned m,
				uint8_t *val)
{
	uint64_t *word = (uint64_t *)lang_map_val_word(img, m, val), w;

	(void)region;	/* the count stays: see the top of this file */
	if (!img->maps[m].nkeys) {
		w = ST_LIVE;
		if (__atomic_compare_exchange_n(word, &w, ST_EMPTY, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			mapi_zero(val, img->maps[m].val_size);
		return 0;
	}
	w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	if (w_state(w) != ST_LIVE)
		return -1;
	/* still counted: the next claim of the slot takes the count over */
	__atomic_compare_exchange_n(word, &w, lang_map_word_deleted(w), false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
	return 0;
}

/* *p += v by the one thread that owns *p, exact against that thread's
 * own signal handlers (which may update *p in between) without a locked
 * instruction: on x86-64 a plain `add` to memory, one instruction a
 * signal can not split; on arm64 LSE's `stadd` where the build targets
 * it, else a load/store-exclusive pair, which an exception return (the
 * end of a signal handler) makes fail and retry.  Readers on other CPUs
 * see the old or the new value, never a torn one (aligned 8 bytes). */
MAPS_INLINE void mapi_owner_add(int64_t *p, int64_t v)
{
#if defined(__x86_64__)
	__asm__ volatile("addq %1, %0" : "+m"(*p) : "er"(v));
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
	__asm__ volatile("stadd %1, %0" : "+Q"(*p) : "r"(v));
#elif defined(__aarch64__)
	int64_t tmp;
	uint32_t fail;

	__asm__ volatile("1:	ldxr	%0, %2\n"
			 "	add	%0, %0, %3\n"
			 "	stxr	%w1, %0, %2\n"
			 "	cbnz	%w1, 1b"
			 : "=&r"(tmp), "=&r"(fail), "+Q"(*p)
			 : "r"(v));
#else
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

/* mapi_owner_add ordered after the caller's earlier stores: a reader
 * whose load of *p (an acquire) sees the add sees them too. */
MAPS_INLINE void mapi_owner_add_release(int64_t *p, int64_t v)
{
#if defined(__x86_64__)
	/* the processor keeps stores in order: the compiler must too */
	__asm__ volatile("addq %1, %0" : "+m"(*p) : "er"(v) : "memory");
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
	__asm__ volatile("staddl %1, %0" : "+Q"(*p) : "r"(v) : "memory");
#elif defined(__aarch64__)
	int64_t tmp;
	uint32_t fail;

	__asm__ volatile("1:	ldxr	%0, %2\n"
			 "	add	%0, %0, %3\n"
			 "	stlxr	%w1, %0, %2\n"
			 "	cbnz	%w1, 1b"
			 : "=&r"(tmp), "=&r"(fail), "+Q"(*p)
			 : "r"(v)
			 : "memory");
#else
	__atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

/* A shard for the calling thread (lang_maps_take_shard). */
MAPS_INLINE uint32_t mapi_take_shard(void *region)
{
	struct region_hdr *rh = region;
	uint64_t i = __atomic_fetch_add(&rh->shards_taken, 1, __ATOMIC_RELAXED);

	return i < LANG_SHARDS ? (uint32_t)i + 1 : 0;
}

/* The value of shard (1 + its index) of sharded map m. */
MAPS_INLINE int64_t *mapi_shard_val(const struct lang_image *img, void *region, unsigned m,
				    uint32_t shard)
{
	return (int64_t *)((uint8_t *)region + img->map_shard_off[m] +
			   (size_t)(shard - 1) * img->map_shard_stride[m]);
}

/* The entry of the thread with shard (1 + its index) in map of thread
 * values m (lang_image.map_tval_off). */
MAPS_INLINE struct lang_tval *mapi_tval(const struct lang_image *img, void *region, unsigned m,
					uint32_t shard)
{
	return (struct lang_tval *)((uint8_t *)region + img->map_tval_off[m] +
				    (size_t)(shard - 1) * img->shard_block);
}

/* The latency pattern's halves on a thread's own entry (written by that
 * thread alone, so plain stores; a signal handler's hit in between runs
 * whole, between two of them): the entry half's store, and the return
 * half's read (the value, 0 for none, as bpftrace reads a missing key)
 * and delete. */
MAPS_INLINE void mapi_tval_store(struct lang_tval *e, uint64_t key, int64_t v)
{
	__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&e->val, v, __ATOMIC_RELAXED);
	__atomic_store_n(&e->live, 1, __ATOMIC_RELEASE);
}

MAPS_INLINE int64_t mapi_tval_read(const struct lang_tval *e)
{
	return __atomic_load_n(&e->live, __ATOMIC_RELAXED) ?
		       __atomic_load_n(&e->val, __ATOMIC_RELAXED) : 0;
}

MAPS_INLINE void mapi_tval_delete(struct lang_tval *e)
{
	__atomic_store_n(&e->live, 0, __ATOMIC_RELEASE);
}

/* A count by tid on a thread's own entry: the key is there from the
 * first count on, the add is the owner's (mapi_owner_add). */
MAPS_INLINE void mapi_tval_count(struct lang_tval *e, uint64_t key)
{
	if (__builtin_expect(!__atomic_load_n(&e->live, __ATOMIC_RELAXED), 0)) {
		__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
		__atomic_store_n(&e->live, 1, __ATOMIC_RELEASE);
	}
	mapi_owner_add(&e->val, 1);
}

/* A thread (tid) that has just taken shard takes over the entries its
 * tid has in other shards of the maps of thread values: they are a dead
 * thread's (a tid belongs to one live thread at a time), whose key is now
 * this thread's, as a map's slot would be: a count adds up, a start time
 * carries on.  Once per thread, off the common path. */
MAPS_INLINE void mapi_tval_adopt(const struct lang_image *img, void *region, uint32_t shard,
				 uint64_t tid)
{
	for (unsigned m = 0; m < img->hdr->nmaps; m++) {
		struct lang_tval *mine;
		int64_t v = 0;
		bool found = false;

		if (!img->map_tval_off[m])
			continue;
		mine = mapi_tval(img, region, m, shard);
		for (uint32_t s = 1; s <= LANG_SHARDS; s++) {
			struct lang_tval *e = mapi_tval(img, region, m, s);

			if (s == shard || !__atomic_load_n(&e->live, __ATOMIC_ACQUIRE) ||
			    __atomic_load_n(&e->key, __ATOMIC_RELAXED) != tid)
				continue;
			if (img->maps[m].kind == LANG_M_COUNT || !found)
				v += __atomic_load_n(&e->val, __ATOMIC_RELAXED);
			found = true;
			__atomic_store_n(&e->live, 0, __ATOMIC_RELEASE);
		}
		if (found)
			mapi_tval_store(mine, tid, v);
	}
}

/* Where a thread with shard adds to keyless map m: its shard when the map
 * has shards and the thread one, else the map's value (locked adds); NULL
 * when the value can not be made live.  The map's word goes live either
 * way, so that an entry printed is one that was updated. */
MAPS_INLINE int64_t *mapi_agg_target(const struct lang_image *img, void *region, unsigned m,
				     uint32_t shard, bool *owned)
{
	int64_t *val = (int64_t *)mapi_lookup_keyless(img, region, m, 1);

	*owned = false;
	if (!val || !shard || shard > LANG_SHARDS || !img->map_shard_off[m])
		return val;
	*owned = true;
	return mapi_shard_val(img, region, m, shard);
}

/* One sample into bucket idx of a thread's shard sv of a keyless hist,
 * a sample late: the shard's last word keeps the newest sample's bucket
 * (1 + its index, 0: none) and the bucket of the one before is counted
 * now.  Where idx depends on a slow value (the latency pattern's time
 * stamp), the add then goes to an address known long before, and the
 * processor need not hold the hit's later loads and stores until the
 * stamp is read.  Readers add each shard's late sample to its bucket
 * (lang_map_sum): the last sample of a thread counts although no later
 * one comes.  Load and store, not one instruction: the owner thread
 * alone writes its shard, inside a probe's handler, where a hit of its
 * own signal handlers is missed and runs no handler.  The add comes after
 * the store (a release), and readers load a bucket (an acquire) before
 * the late word: one that sees the add sees the newer late word, so no
 * sample counts twice, which a clear() would make a bucket's -1.  One
 * that reads between the two misses the older sample (a read before the
 * hit); a clear() then leaves it to count after it.  A word out of
 * range (no writer stores one) is ignored here as there. */
MAPS_INLINE void mapi_hist_add_late(int64_t *sv, unsigned idx)
{
	uint64_t *late = (uint64_t *)&sv[LANG_HIST_BUCKETS];
	uint64_t prev = __atomic_load_n(late, __ATOMIC_RELAXED);

	__atomic_store_n(late, (uint64_t)idx + 1, __ATOMIC_RELAXED);
	if (prev - 1 < LANG_HIST_BUCKETS)
		mapi_owner_add_release(&sv[prev - 1], 1);
}

/* bpftrace 0.17's log2 bucket: a binary search over 32 bits only (values
 * from 2^31 up share the last bucket). */
MAPS_INLINE unsigned mapi_hist_index(int64_t v)
{
	unsigned log2;

	if (v < 0)
		return 0;
	if (v == 0)
		return 1;
	/* bpftrace's five halving steps reach 31 at most: [2^31, ...) is
	 * its last bucket */
	log2 = 63u - (unsigned)__builtin_clzll((uint64_t)v);
	return 2 + (log2 < 31 ? log2 : 31);
}

#endif
