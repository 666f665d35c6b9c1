/* The map region's internals, shared by maps.c, the VM and the loader. */
#ifndef KPROBE_LANG_MAPS_INT_H
#define KPROBE_LANG_MAPS_INT_H

#include "lang.h"

struct region_hdr {
	uint64_t magic;
	uint64_t nmaps;
	uint64_t aborted;	/* runs ended by the loop budget */
	uint64_t exited;	/* exit() was called: later runs do nothing */
	uint64_t shards_taken;	/* shards handed out (may pass LANG_SHARDS) */
};

struct map_hdr {
	uint64_t dropped;	/* updates that found the map full */
	uint64_t live;		/* keys held (or being written), and deleted
				 * slots still counted (maps_impl.h) */
	uint64_t scan;		/* where the next look for such a slot starts */
	uint64_t cap, slot_size;	/* informative: readers use the image's */
};

uint64_t lang_key_hash(const void *key, size_t len);

/* The word of the slot whose value lang_map_lookup returned: while it
 * reads the same (state, generation, hash), the slot holds the same key,
 * so a caller may keep the value's address and check the word instead of
 * looking the key up again. */
static inline const uint64_t *lang_map_val_word(const struct lang_image *img, unsigned m,
						const uint8_t *val)
{
	return (const uint64_t *)(val - 8 - ((img->maps[m].key_size + 7u) & ~7u));
}

/* Whether a slot's word says it holds a live key (maps.c's ST_LIVE). */
static inline bool lang_map_word_live(uint64_t w)
{
	return (w & 3) == 2;
}

/* In a deleted slot's word: the slot still counts in its map's `live'
 * (maps_impl.h). */
#define LANG_MAP_W_COUNTED (1ull << 17)

/* The word of a live slot w once its key is deleted (maps.c's ST_DEAD,
 * same generation, still counted). */
static inline uint64_t lang_map_word_deleted(uint64_t w)
{
	return (w & ~3ull) | 3 | LANG_MAP_W_COUNTED;
}
uint8_t *lang_map_lookup(const struct lang_image *img, void *region, unsigned m,
			 const void *key, int create);
int lang_map_delete(const struct lang_image *img, void *region, unsigned m, const void *key);
/* Deletes the entry whose value lang_map_lookup returned as val. */
int lang_map_delete_val(const struct lang_image *img, void *region, unsigned m, uint8_t *val);
/* Gives the slot of val, deleted while its word read dead_w (state
 * deleted, the generation of the delete), back to key, which must be the
 * key it held (a thread re-creating the entry it deleted): no hashing, no
 * probing.  val on success, with the value zeroed; NULL when the slot
 * changed meanwhile (look the key up then) or the map is full. */
uint8_t *lang_map_revive(const struct lang_image *img, void *region, unsigned m, uint8_t *val,
			 uint64_t dead_w, const void *key);
/* An aggregation's update; shard is the calling thread's (lang_ctx). */
void lang_map_aggregate(const struct lang_image *img, void *region, unsigned m,
			const void *key, int64_t v, uint32_t shard);
/* Words first .. first + n - 1 of sharded map m's value, whose slot's
 * value is val (see lang_map_value). */
void lang_map_sum(const struct lang_image *img, const void *region, unsigned m,
		  const void *val, uint32_t first, uint64_t *out, uint32_t n);
int64_t lang_map_read_int(const struct lang_image *img, unsigned m, const void *val);

#endif
