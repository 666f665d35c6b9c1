/* The map region's internals, shared by maps.c, the VM and the loader. */
#ifndef KPROBE_LANG_MAPS_INT_H
#define KPROBE_LANG_MAPS_INT_H

#include "lang.h"

struct region_hdr {
	uint64_t magic;
	uint64_t nmaps;
	uint64_t aborted;	/* runs ended by the loop budget */
	uint64_t exited;	/* exit() was called: later runs do nothing */
};

struct map_hdr {
	uint64_t dropped;	/* updates that found the map full */
	uint64_t live;		/* keys held (or being written) */
	uint64_t cap, slot_size;	/* informative: readers use the image's */
};

uint64_t lang_key_hash(const void *key, size_t len);
uint8_t *lang_map_lookup(const struct lang_image *img, void *region, unsigned m,
			 const void *key, int create);
int lang_map_delete(const struct lang_image *img, void *region, unsigned m, const void *key);
void lang_map_aggregate(const struct lang_image *img, void *region, unsigned m,
			const void *key, int64_t v);
int64_t lang_map_read_int(const struct lang_image *img, unsigned m, const void *val);

#endif
