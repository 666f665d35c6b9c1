/* Out-of-line slots: allocation near the probed code, the code each
 * instruction class needs, and reclamation once no thread can be inside. */
#include "arch/x86_64/xol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch/x86_64/detour.h"
#include "os/linux/execmem.h"
#include "arch/x86_64/unwind_detour.h"
#include "arch/x86_64/writer.h"
#include "core/arch_api.h"
#include "os/linux/memory.h"
#include "os/linux/threads.h"

#define QUARANTINE_NS 20000000ULL	/* retired slots rest this long first */

static struct exec_arena arena = { .unit = XOL_SLOT_SIZE, .meta_size = sizeof(struct xol_slot) };
static struct xol_slot *retired;

void kp_probepoint_free(struct kp_probepoint *pp);

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

static struct xol_slot *slot_alloc(uintptr_t lo, uintptr_t hi)
{
	void *meta;
	uintptr_t code = exec_alloc(&arena, lo, hi, &meta);
	struct xol_slot *s = meta;

	if (!code && xol_reclaim() > 0)
		code = exec_alloc(&arena, lo, hi, &meta);
	if (!code)
		return NULL;
	s = meta;
	s->code = code;
	return s;
}

/* Copies the instruction, re-targeting a RIP-relative displacement. */
static void emit_relocated(struct xw *w, const struct arch_insn *ai, uintptr_t addr)
{
	uint8_t b[KP_MAX_INSN];
	int off = insn_riprel_disp_offset(ai);

	memcpy(b, ai->bytes, ai->len);
	if (off >= 0) {
		int32_t d;
		int64_t nd;

		memcpy(&d, b + off, 4);
		nd = (int64_t)d + (int64_t)(addr - xw_pc(w));
		if (nd < INT32_MIN || nd > INT32_MAX) {
			w->err = true;
			return;
		}
		d = (int32_t)nd;
		memcpy(b + off, &d, 4);
	}
	xw_bytes(w, b, ai->len);
}

static void add_exit(struct xol_slot *s, struct xw *w, uintptr_t resume, bool ind)
{
	s->exits[s->nexits].off = (uint8_t)w->len;
	s->exits[s->nexits].resume = resume;
	s->exits[s->nexits].ind = ind;
	s->nexits++;
	xw_int3(w);
}

/* Code that runs when no post handler has to see the result: one trap per
 * hit ("boosted"), or none at all for branches. */
static void emit_boosted(struct xw *w, struct xol_slot *s, const struct arch_insn *ai,
			 uintptr_t addr)
{
	uintptr_t next = addr + ai->len, taken;

	s->boost_off = (uint8_t)w->len;
	switch (ai->klass) {
	case IC_PLAIN:
		emit_relocated(w, ai, addr);
		xw_jmp(w, next);
		break;
	case IC_SYSCALL:
		s->must_post = true;
		break;
	case IC_JMP_REL:
		xw_jmp(w, ai->target);
		break;
	case IC_JCC:
	case IC_LOOP:
		/* jcc taken; jmp next; taken: jmp target */
		taken = xw_pc(w) + 2 + (ai->addr32 ? 1 : 0);
		taken += xw_jmp_len(taken, next);
		if (ai->klass == IC_JCC)
			xw_jcc_short(w, ai->cc, taken);
		else
			xw_loop_short(w, ai->loop_op, ai->addr32, taken);
		xw_jmp(w, next);
		xw_jmp(w, ai->target);
		break;
	case IC_CALL_REL:
		xw_push_return(w, next);
		xw_jmp(w, ai->target);
		break;
	case IC_RET:
	case IC_JMP_IND:
		emit_relocated(w, ai, addr);
		break;
	case IC_CALL_IND:
		xw_push_return(w, next);
		s->fault_sp_off = (uint8_t)w->len;
		xw_call_ind_as_jmp(w, ai->bytes, ai->len, next);
		break;
	}
}

/* Code that ends in a trap so post handlers run after the instruction.
 * Branches whose target only the handler can know are emulated instead. */
static void emit_post(struct xw *w, struct xol_slot *s, const struct arch_insn *ai,
		      uintptr_t addr)
{
	uintptr_t next = addr + ai->len;

	s->post_off = (uint8_t)w->len;
	switch (ai->klass) {
	case IC_PLAIN:
		emit_relocated(w, ai, addr);
		add_exit(s, w, next, false);
		break;
	case IC_SYSCALL:
		xw_bytes(w, ai->bytes, ai->len);
		add_exit(s, w, next, false);
		break;
	case IC_CALL_REL:
		xw_push_return(w, next);
		add_exit(s, w, ai->target, false);
		break;
	case IC_CALL_IND:
		xw_push_return(w, next);
		add_exit(s, w, 0, true);
		break;
	default:
		s->post_off = XOL_NONE;
		break;
	}
}

/* The pool holding the slot at code. */
static uintptr_t pool_of(uintptr_t code)
{
	unsigned int n = __atomic_load_n(&arena.npools, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++)
		if (code >= arena.pools[i].base && code < arena.pools[i].base + EXEC_POOL_SIZE)
			return arena.pools[i].base;
	return 0;
}

/* The rows of one part of a slot (boosted or post) at off: the original
 * instruction until it ran, then the next one; a call's pushed return
 * address makes it the target's entry (unknown for an indirect call). */
static int part_rows(struct unwind_row *r, uint8_t off, const struct arch_insn *ai, uintptr_t addr)
{
	uint8_t buf[32];
	struct xw w;
	int n = 0;

	r[n++] = (struct unwind_row){ off, 0, addr };
	switch (ai->klass) {
	case IC_PLAIN:
	case IC_SYSCALL:
		r[n++] = (struct unwind_row){ (uint8_t)(off + ai->len), 0, addr + ai->len };
		break;
	case IC_CALL_REL:
	case IC_CALL_IND:
		/* push %rax; mov $ret,%rax; xchg %rax,(%rsp) */
		xw_init(&w, buf, sizeof(buf), 0);
		xw_push_return(&w, addr + ai->len);
		r[n++] = (struct unwind_row){ (uint8_t)(off + 1), 8, addr };
		r[n++] = (struct unwind_row){ (uint8_t)(off + w.len), 0,
					      ai->klass == IC_CALL_REL ? ai->target : 0 };
		break;
	default:
		break;		/* branches leave the slot as they run */
	}
	return n;
}

/* Unwind information of the slot just written (unwind_detour.c). */
static void describe(const struct xol_slot *s, const struct arch_insn *ai, uintptr_t addr)
{
	struct unwind_row rows[8];
	uintptr_t pool = pool_of(s->code);
	int n = 0;

	if (!pool)
		return;
	if (s->boost_off != s->post_off)
		n += part_rows(rows + n, s->boost_off, ai, addr);
	if (s->post_off != XOL_NONE)
		n += part_rows(rows + n, s->post_off, ai, addr);
	arch_xol_unwind_add(pool, EXEC_POOL_SIZE, XOL_SLOT_SIZE, s->code, rows, n);
}

int xol_build(struct arch_insn *ai, uintptr_t addr, struct kp_probepoint *owner)
{
	uintptr_t want[3], lo, hi;
	int nwant = 0, off = insn_riprel_disp_offset(ai);
	uint8_t code[XOL_SLOT_SIZE];
	struct xol_slot *s;
	struct xw w;
	int err;

	want[nwant++] = addr;
	if (off >= 0) {
		int32_t d;

		memcpy(&d, ai->bytes + off, 4);
		want[nwant++] = addr + ai->len + (intptr_t)d;
	}
	exec_reach_window(want, nwant, &lo, &hi);
	if (lo >= hi)
		return -EINVAL;
	s = slot_alloc(lo, hi);
	if (!s)
		return -ENOMEM;
	s->nexits = 0;
	s->must_post = false;
	s->fault_sp_off = XOL_NONE;
	memset(code, 0xcc, sizeof(code));
	xw_init(&w, code, sizeof(code), s->code);
	emit_boosted(&w, s, ai, addr);
	emit_post(&w, s, ai, addr);
	if (s->must_post)
		s->boost_off = s->post_off;
	err = w.err ? -EINVAL : kp_mem_write(s->code, code, sizeof(code));
	if (err) {
		exec_free(&arena, s->code);
		return err;
	}
	describe(s, ai, addr);
	__atomic_store_n(&s->owner, owner, __ATOMIC_RELEASE);
	ai->slot = s;
	return 0;
}

static unsigned int nretired;


/* Units in use, for kp_get_stats (read racily: a snapshot). */
void arch_stats(unsigned long *slots, unsigned long *retired_slots, unsigned long *detours)
{
	*slots = __atomic_load_n(&arena.in_use, __ATOMIC_RELAXED);
	*retired_slots = __atomic_load_n(&nretired, __ATOMIC_RELAXED);
	arch_detour_stats(detours);
}

static uint64_t last_reclaim_ns;

/* Enough retired slots to be worth a census, and none tried within a
 * quarantine period (a removal of thousands of probes would otherwise
 * walk the whole retired list once per probe, finding each still
 * resting)? */
bool xol_reclaim_due(void)
{
	return nretired >= 64 && now_ns() - last_reclaim_ns >= QUARANTINE_NS;
}

void xol_retire(struct xol_slot *s)
{
	nretired++;
	s->retired_ns = now_ns();
	s->next_retired = retired;
	retired = s;
}

/* The retired slots of probepoints in [lo, hi): their code jumps back
 * there.  Returns how many were put into r, -1 when more than max. */
int xol_retired_into(uintptr_t lo, uintptr_t hi, uintptr_t (*r)[2], int max)
{
	int n = 0;

	for (int pass = 0; pass < 2; pass++) {
		bool found = false;

		n = 0;
		for (struct xol_slot *s = retired; s; s = s->next_retired) {
			if (!s->owner || s->owner->addr < lo || s->owner->addr >= hi)
				continue;
			found = true;
			if (n == max)
				return -1;
			r[n][0] = s->code;
			r[n][1] = s->code + XOL_SLOT_SIZE;
			n++;
		}
		/* Old ones are freed by a census of their own. */
		if (!found || pass || !xol_reclaim())
			break;
	}
	return n;
}

static void slot_free(struct xol_slot *s)
{
	struct kp_probepoint *pp = s->owner;

	__atomic_store_n(&s->owner, NULL, __ATOMIC_RELEASE);
	arch_xol_unwind_remove(pool_of(s->code), EXEC_POOL_SIZE, XOL_SLOT_SIZE, s->code);
	exec_free(&arena, s->code);
	if (pp) {
		arch_detour_free(pp);
		free(pp->ainsn.opt);
		kp_probepoint_free(pp);
	}
}

#define CENSUS_BATCH 64

/* Checks one batch of quarantined slots with a census and frees those no
 * thread is in.  A batch is freed or kept as a whole. */
static int reclaim_batch(struct xol_slot **batch, int n)
{
	uintptr_t ranges[2 * CENSUS_BATCH][2];
	int nr = 0;

	for (int i = 0; i < n; i++) {
		ranges[nr][0] = batch[i]->code;
		ranges[nr][1] = batch[i]->code + XOL_SLOT_SIZE;
		nr++;
		if (batch[i]->owner)
			nr += arch_detour_range(batch[i]->owner, ranges[nr]);
	}
	if (!kp_threads_outside((const uintptr_t (*)[2])ranges, nr))
		return 0;
	for (int i = 0; i < n; i++)
		slot_free(batch[i]);
	nretired -= (unsigned int)n;
	return n;
}

/* Frees the retired slots that have rested, a census per batch of up to
 * CENSUS_BATCH; a batch some thread may still be in waits for a later
 * call. */
int xol_reclaim(void)
{
	struct xol_slot *ripe = NULL, *keep = NULL, *s;
	uint64_t now = now_ns();
	int freed = 0;

	last_reclaim_ns = now;
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

int arch_reclaim(void)
{
	return xol_reclaim();
}
