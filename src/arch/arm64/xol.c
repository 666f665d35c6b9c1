/* Out-of-line slots: allocation near the probed code, their code, and
 * reclamation once no thread can be inside. */
#include "arch/arm64/xol.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "os/linux/execmem.h"
#include "arch/arm64/optimize.h"
#include "arch/arm64/text_poke.h"
#include "core/arch_api.h"
#include "os/linux/threads.h"

#define QUARANTINE_NS 20000000ULL	/* retired slots rest this long first */
#define RECLAIM_BATCH_DUE 64
#define CENSUS_BATCH 64

static struct exec_arena arena = { .unit = XOL_SLOT_SIZE, .meta_size = sizeof(struct xol_slot) };
static struct xol_slot *retired;
static unsigned int nretired;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct xol_slot *xol_slot_of(uintptr_t ip)
{
	return exec_meta_of(&arena, ip, NULL);
}

/* A unit within a B's reach of addr, or anywhere (the exits then trap). */
static struct xol_slot *slot_alloc(uintptr_t addr)
{
	uintptr_t lo, hi, code;
	void *meta = NULL;

	exec_reach_window(&addr, 1, &lo, &hi);
	code = exec_alloc(&arena, lo, hi, &meta);
	if (!code && xol_reclaim() > 0)
		code = exec_alloc(&arena, lo, hi, &meta);
	if (!code)
		code = exec_alloc(&arena, 0x10000, ARCH_USER_VA_END, &meta);
	if (!code)
		return NULL;
	((struct xol_slot *)meta)->code = code;
	return meta;
}

int xol_build(struct xol_slot **out, uint32_t insn, uintptr_t addr, struct kp_probepoint *owner)
{
	struct xol_slot *s = slot_alloc(addr);
	uint32_t code[4];

	if (!s)
		return -ENOMEM;
	code[0] = insn;
	if (!a64_b(s->code + 4, addr + 4, &code[1]))
		code[1] = A64_BRK(A64_BRK_XOL_EXIT_IMM);
	code[2] = insn;
	code[3] = A64_BRK(A64_BRK_XOL_POST_IMM);
	if (text_write_fresh(s->code, code, 4)) {
		exec_free(&arena, s->code);
		return -ENOMEM;
	}
	/* published with the probepoint, before its BRK is written */
	__atomic_store_n(&s->owner, owner, __ATOMIC_RELEASE);
	*out = s;
	return 0;
}

void arch_stats(unsigned long *slots, unsigned long *retired_slots, unsigned long *detours)
{
	*slots = arena.in_use;
	*retired_slots = nretired;
	*detours = a64_detours_in_use();
}

/* arm64 describes its pools to no unwinder or debugger: nothing beyond
 * the pools' own bookkeeping (exec_kept_bytes()) is kept. */
size_t arch_kept_bytes(void)
{
	return 0;
}

bool xol_reclaim_due(void)
{
	return nretired >= RECLAIM_BATCH_DUE;
}

void xol_retire(struct xol_slot *s)
{
	nretired++;
	s->retired_ns = now_ns();
	s->next_retired = retired;
	retired = s;
}

static void slot_free(struct xol_slot *s)
{
	struct kp_probepoint *pp = s->owner;

	__atomic_store_n(&s->owner, NULL, __ATOMIC_RELEASE);
	exec_free(&arena, s->code);
	if (pp)
		kp_probepoint_free(pp);
}

/* Checks one batch of quarantined slots with a census and frees those no
 * thread is in.  A batch is freed or kept as a whole. */
static int reclaim_batch(struct xol_slot **batch, int n)
{
	uintptr_t ranges[CENSUS_BATCH][2];

	for (int i = 0; i < n; i++) {
		ranges[i][0] = batch[i]->code;
		ranges[i][1] = batch[i]->code + XOL_SLOT_SIZE;
	}
	if (!kp_threads_outside((const uintptr_t (*)[2])ranges, n))
		return 0;
	for (int i = 0; i < n; i++)
		slot_free(batch[i]);
	nretired -= (unsigned int)n;
	return n;
}

/* Frees the retired slots that have rested, a census per batch; a batch
 * some thread may still be in waits for a later call. */
int xol_reclaim(void)
{
	struct xol_slot *ripe = NULL, *keep = NULL, *s;
	uint64_t now = now_ns();
	int freed = 0;

	while ((s = retired)) {
		retired = s->next_retired;
		if (now - s->retired_ns < QUARANTINE_NS) {
			s->next_retired = keep;
			keep = s;
		} else {
			s->next_retired = ripe;
			ripe = s;
		}
	}
	retired = keep;
	while (ripe) {
		struct xol_slot *batch[CENSUS_BATCH];
		int n = 0, got;

		while (ripe && n < CENSUS_BATCH) {
			batch[n++] = ripe;
			ripe = ripe->next_retired;
		}
		got = reclaim_batch(batch, n);
		freed += got;
		if (!got)
			for (int i = 0; i < n; i++) {
				batch[i]->next_retired = retired;
				retired = batch[i];
			}
	}
	return freed;
}

/* Detours first: freeing one hands its probepoint's slot to the slots'
 * quarantine. */
int arch_reclaim(void)
{
	int n = a64_detour_reclaim();

	return n + xol_reclaim();
}
