/* A hostile target for the kprobe CLI tests: once probed, it finds the
 * session memory in its own address space and writes over everything the
 * tool reads there (header, descriptors, rings, counters, records), while
 * it keeps hitting its probe.  The tool must survive, print nothing the
 * target chose as control characters, and report the corruption.
 *
 *   cli_hostile N     N calls of hostile_work, scribble, N more calls */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm.h"

#define PROBED __attribute__((noinline, noclone, used))

volatile long sink;

PROBED long hostile_work(long a, long b)
{
	sink += a;
	return a + b;
}

/* The start of our mapping of the session memory, or NULL. */
static void *find_session_memory(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	void *base = NULL;

	if (!f)
		return NULL;
	while (!base && fgets(line, sizeof(line), f))
		if (strstr(line, "kprobe-session"))
			base = (void *)strtoul(line, NULL, 16);
	fclose(f);
	return base;
}

static void scribble(struct kps_map *m)
{
	struct kps_header *h = m->hdr;

	h->ndesc = UINT64_MAX;
	h->rings_hint = UINT32_MAX;
	h->nrings = UINT32_MAX;
	h->skipped = 3;
	memset(h->skip_example, '\033', sizeof(h->skip_example));
	memset(h->error, '\n', sizeof(h->error));
	h->tsc_base = UINT64_MAX;
	h->ns_base = UINT64_MAX / 3;
	for (int i = 1; i < 64; i++) {
		struct kps_desc *d = &m->desc[i];

		memset(d, i % 2 ? '\033' : 'X', sizeof(*d));
		d->kind = (uint8_t)(i % 4);
		d->spec = (uint16_t)(i % 3);
		d->ready = 1;
	}
	/* our own descriptor's name too, without its terminator */
	memset(m->desc[0].name, '\033', sizeof(m->desc[0].name));
	for (int r = 0; r < 64; r++) {
		struct kps_ring *ring = &m->rings[r];
		struct kps_event *ev = (struct kps_event *)(m->ring_data +
							     (size_t)r * KPS_RING_BYTES);

		ring->used = 1;
		ring->lost = (uint64_t)r << 40;
		ev->size = 0xfffffff8u;
		ev->type = EV_ENTRY;
		ring->head = r % 2 ? 0x100000000ull : UINT64_MAX - 7;
		ring->tail = 12345;
		m->counters[(size_t)r * KPS_MAX_PROBES + (size_t)r] = UINT64_MAX;
		m->hist[(size_t)r * KPS_BUCKETS + (size_t)(r % KPS_BUCKETS)] = UINT64_MAX;
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	void *base = find_session_memory();
	struct kps_map m;

	for (long i = 0; i < n; i++)
		hostile_work(i, 1);
	if (!base) {
		fprintf(stderr, "cli_hostile: no session memory mapped\n");
		return 1;
	}
	kps_map_views(&m, base);
	scribble(&m);
	for (long i = 0; i < n; i++)
		hostile_work(i, 2);
	printf("scribbled\n");
	return 0;
}
