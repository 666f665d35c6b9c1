/* The set of registered struct kprobe pointers, so that "is p registered?"
 * costs O(1) whatever the number of probes at p's address, without ever
 * dereferencing anything p points to (p may be a stale copy of a probe that
 * is gone).  Open addressing with linear probing; removal shifts the
 * following entries back, so there are no tombstones.  Under the registry
 * lock; never read by the hit path. */
#include <errno.h>
#include <stdlib.h>

#include "core/internal.h"

static struct kprobe **slots;
static size_t nslots;	/* a power of two, or 0 */
static size_t count;

static size_t slot_of(const struct kprobe *p, size_t mask)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & mask;
}

static int grow(void)
{
	size_t n = nslots ? nslots * 2 : 1024;
	struct kprobe **v;

	if (n > SIZE_MAX / sizeof(*v))
		return -ENOMEM;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nslots; i++) {
		size_t j;

		if (!slots[i])
			continue;
		for (j = slot_of(slots[i], n - 1); v[j]; j = (j + 1) & (n - 1))
			;
		v[j] = slots[i];
	}
	free(slots);
	slots = v;
	nslots = n;
	return 0;
}

bool kp_probeset_has(const struct kprobe *p)
{
	if (!nslots || !p)
		return false;
	for (size_t i = slot_of(p, nslots - 1); slots[i]; i = (i + 1) & (nslots - 1))
		if (slots[i] == p)
			return true;
	return false;
}

/* Room for n more entries (load kept at or below one half). */
static int reserve(size_t n)
{
	while (count + n > nslots / 2) {
		int err = grow();

		if (err)
			return err;
	}
	return 0;
}

int kp_probeset_add(struct kprobe *p)
{
	size_t i;
	int err = reserve(1);

	if (err)
		return err;
	for (i = slot_of(p, nslots - 1); slots[i]; i = (i + 1) & (nslots - 1))
		if (slots[i] == p)
			return 0;
	slots[i] = p;
	count++;
	return 0;
}

void kp_probeset_remove(const struct kprobe *p)
{
	size_t mask = nslots - 1, i, j;

	if (!nslots)
		return;
	for (i = slot_of(p, mask); slots[i] != p; i = (i + 1) & mask)
		if (!slots[i])
			return;
	slots[i] = NULL;
	count--;
	/* Move back the entries of the run after i that may not stay behind
	 * the hole (their home is not in (i, j]). */
	for (j = (i + 1) & mask; slots[j]; j = (j + 1) & mask) {
		size_t home = slot_of(slots[j], mask);
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);

		if (stays)
			continue;
		slots[i] = slots[j];
		slots[j] = NULL;
		i = j;
	}
}
