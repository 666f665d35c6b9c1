/*
 * Jump optimization on arm64: the probed word becomes a B to the
 * probepoint's detour, a 128-byte unit of an executable pool within the
 * B's +-128 MB:
 *
 *   D+0   sub sp, sp, #PT_SIZE         a struct pt_regs below the stack
 *   D+4   stp x0, x1, [sp]
 *   D+8   str x30, [sp, #PT_X30]
 *   D+12  ldr x0, D+OFF_PP             the probepoint
 *   D+16  nop                          (ldr x1, D+OFF_COMMON)
 *   D+20  bl kp_a64_detour_common      (blr x1) saves the rest, runs the
 *                                      handlers,
 *   D+24  ldp x0, x1, [sp]             R: restores all but x0, x1, x30
 *   D+28  ldr x30, [sp, #PT_X30]
 *   D+32  add sp, sp, #PT_SIZE
 *   D+36  the probed instruction, or what does its work here
 *         b addr+4 (unless it always branches)
 *   D+112 the probepoint, D+120 kp_a64_detour_common
 *
 * The shared code (detour.S) is called by a BL where it is within reach,
 * as it is when the library and the probed code are mapped near each
 * other: a direct call, which a processor predicts (and an emulator
 * chains) without looking its target up; through x1 otherwise.
 *
 * AAPCS64 has no red zone: nothing below sp is live, and a signal
 * arriving in the detour is delivered below the frame.  sp keeps its
 * 16-byte alignment (PT_SIZE is a multiple of 16; sp is aligned wherever
 * compiled code runs, as the kernel checks it at every sp-based access).
 *
 * The instruction: one that neither reads the PC nor branches is copied
 * as it is; ADR and ADRP become the address they compute (MOVZ/MOVK of
 * the destination), a general-register literal load the address of its
 * literal in the destination followed by the load through it, B and B.cond,
 * CBZ/CBNZ and TBZ/TBNZ branches from the detour to the same target
 * (refused when the target is not within a B of a detour that the probed
 * address also reaches), BL sets x30 to addr+4 and branches, BR and RET
 * run as they are.  Refused, so the probe keeps its BRK: BLR (x30 would be
 * the detour's; its target's BTI landing pad rules out another indirect
 * form) and SIMD&FP literal loads (which the BRK path refuses too).
 *
 * The detour lives as long as its probepoint: unoptimizing only puts the
 * BRK back, and the detour is freed after the probepoint is retired, once
 * a census finds no thread in it or bound for it (detour.S keeps a per-
 * thread note while its handlers run).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch/arch.h"
#include "arch/arm64/insn.h"
#include "arch/arm64/optimize.h"
#include "arch/arm64/text_poke.h"
#include "arch/arm64/xol.h"
#include "core/arch_api.h"
#include "os/linux/execmem.h"
#include "os/linux/threads.h"

#define DETOUR_SIZE 128
#define OFF_RET 24
#define OFF_COPY 36
#define OFF_PP 112
#define OFF_COMMON 120
#define COPY_WORDS ((OFF_PP - OFF_COPY) / 4)

#define PT_SIZE sizeof(struct pt_regs)
#define PT_X30 offsetof(struct pt_regs, regs[30])

#define QUARANTINE_NS 20000000ULL
#define CENSUS_BATCH 32

_Static_assert(PT_SIZE % 16 == 0 && PT_SIZE < 4096, "sub sp, sp, #PT_SIZE");

struct a64_opt {
	bool ok;
	const char *why;		/* !ok, or why the last build failed */
	bool jumped;			/* the B is in place */
	uintptr_t detour;		/* 0: not built */
	uint64_t retired_ns;
	struct kp_probepoint *next_retired;
};

struct detour_meta {
	struct kp_probepoint *owner;	/* read by the hit path */
};

static struct exec_arena arena = { .unit = DETOUR_SIZE, .meta_size = sizeof(struct detour_meta) };
static struct kp_probepoint *retired;
static unsigned int nretired;

/* ---- encodings ---- */

#define X_SP 31

static uint32_t enc_sub_sp(uint32_t imm)
{
	return 0xd1000000u | imm << 10 | X_SP << 5 | X_SP;
}

static uint32_t enc_add_sp(uint32_t imm)
{
	return 0x91000000u | imm << 10 | X_SP << 5 | X_SP;
}

/* STP/LDP Xt1, Xt2, [sp, #off] (signed offset form) */
static uint32_t enc_stp_sp(unsigned int t1, unsigned int t2, uint32_t off)
{
	return 0xa9000000u | (off / 8) << 15 | t2 << 10 | X_SP << 5 | t1;
}

static uint32_t enc_ldp_sp(unsigned int t1, unsigned int t2, uint32_t off)
{
	return 0xa9400000u | (off / 8) << 15 | t2 << 10 | X_SP << 5 | t1;
}

/* STR/LDR Xt, [Xn, #off] (unsigned offset form) */
static uint32_t enc_str_x(unsigned int t, unsigned int n, uint32_t off)
{
	return 0xf9000000u | (off / 8) << 10 | n << 5 | t;
}

static uint32_t enc_ldr_x(unsigned int t, unsigned int n, uint32_t off)
{
	return 0xf9400000u | (off / 8) << 10 | n << 5 | t;
}

/* LDR Xt, literal at pc + off */
static uint32_t enc_ldr_lit(unsigned int t, int64_t off)
{
	return 0x58000000u | ((uint32_t)(off / 4) & 0x7ffffu) << 5 | t;
}

static uint32_t enc_blr(unsigned int n)
{
	return 0xd63f0000u | n << 5;
}

/* A code buffer of one detour, at its runtime address. */
struct dw {
	uint32_t *w;
	uintptr_t at;		/* runtime address of w[0] */
	int n, max;
	bool err;
};

static void dw_put(struct dw *d, uint32_t insn)
{
	if (d->n >= d->max) {
		d->err = true;
		return;
	}
	d->w[d->n++] = insn;
}

static uintptr_t dw_pc(const struct dw *d)
{
	return d->at + 4 * (uintptr_t)d->n;
}

static void dw_b(struct dw *d, uintptr_t target)
{
	uint32_t insn;

	if (!a64_b(dw_pc(d), target, &insn)) {
		d->err = true;
		return;
	}
	dw_put(d, insn);
}

/* MOVZ/MOVK of a 64-bit constant into Xrd (rd 31: XZR, a discard). */
static void dw_mov_imm(struct dw *d, unsigned int rd, uint64_t v)
{
	dw_put(d, 0xd2800000u | (uint32_t)(v & 0xffff) << 5 | rd);
	for (unsigned int hw = 1; hw < 4; hw++) {
		uint32_t part = (uint32_t)(v >> (16 * hw)) & 0xffff;

		if (part)
			dw_put(d, 0xf2800000u | hw << 21 | part << 5 | rd);
	}
}

/* ---- what the probed instruction becomes in the detour ---- */

/* The branch target of a direct branch (0: none). */
static uintptr_t branch_target(const struct a64_insn *in, uintptr_t addr)
{
	switch (in->op) {
	case A64_OP_B:
	case A64_OP_BL:
	case A64_OP_BCOND:
	case A64_OP_CBZ:
	case A64_OP_TBZ:
		return addr + (uintptr_t)in->imm;
	default:
		return 0;
	}
}

/* NULL when the instruction can run in a detour, else why not. */
static const char *copy_refused(const struct a64_insn *in)
{
	if (in->kind == A64_INSN_XOL)
		return NULL;
	if (in->kind != A64_INSN_SIMULATE)
		return in->why ? in->why : "unprobeable instruction";
	switch (in->op) {
	case A64_OP_BLR:
		return "BLR: its return address would be the detour's";
	case A64_OP_LDR_LIT:
		return in->rd == 31 ? "literal load to XZR" : NULL;
	case A64_OP_NONE:
		return "unknown simulated form";
	default:
		return NULL;
	}
}

/* A conditional branch re-aimed at pc + 8 (the B to its target after the
 * B back), same condition and register. */
static uint32_t cond_to_plus8(const struct a64_insn *in)
{
	switch (in->op) {
	case A64_OP_BCOND:
		return (in->word & ~(0x7ffffu << 5)) | 2u << 5;
	case A64_OP_CBZ:
		return (in->word & ~(0x7ffffu << 5)) | 2u << 5;
	default:	/* TBZ */
		return (in->word & ~(0x3fffu << 5)) | 2u << 5;
	}
}

/* Writes what runs the instruction at addr, then the B back. */
static void emit_insn(struct dw *d, const struct a64_insn *in, uintptr_t addr)
{
	uint64_t lit;

	if (in->kind == A64_INSN_XOL) {
		dw_put(d, in->word);
		dw_b(d, addr + 4);
		return;
	}
	switch (in->op) {
	case A64_OP_ADR:
		dw_mov_imm(d, in->rd, addr + (uint64_t)in->imm);
		break;
	case A64_OP_ADRP:
		dw_mov_imm(d, in->rd, (addr & ~0xfffull) + (uint64_t)in->imm);
		break;
	case A64_OP_LDR_LIT:
		lit = addr + (uint64_t)in->imm;
		dw_mov_imm(d, in->rd, lit);
		if (in->size == 8)
			dw_put(d, enc_ldr_x(in->rd, in->rd, 0));
		else if (in->sign)
			dw_put(d, 0xb9800000u | (uint32_t)in->rd << 5 | in->rd);	/* LDRSW */
		else
			dw_put(d, 0xb9400000u | (uint32_t)in->rd << 5 | in->rd);	/* LDR Wt */
		break;
	case A64_OP_PRFM_LIT:
		break;		/* a hint: nothing to do */
	case A64_OP_BL:
		dw_mov_imm(d, 30, addr + 4);
		/* fall through */
	case A64_OP_B:
		dw_b(d, branch_target(in, addr));
		return;
	case A64_OP_BCOND:
	case A64_OP_CBZ:
	case A64_OP_TBZ:
		dw_put(d, cond_to_plus8(in));
		dw_b(d, addr + 4);
		dw_b(d, branch_target(in, addr));
		return;
	case A64_OP_BR:
	case A64_OP_RET:
		dw_put(d, in->word);
		return;
	default:
		d->err = true;
		return;
	}
	dw_b(d, addr + 4);
}

/* ---- analysis ---- */

static const char *analyse(uintptr_t addr, const struct a64_insn *in)
{
	const char *why = copy_refused(in);

	if (why)
		return why;
	/* A static-key site's word is rewritten by its key: a B over it
	 * would be overwritten (or overwrite the key's choice). */
	if (kp_jl_site_covering(addr))
		return "a static-key site";
	return NULL;
}

int arch_opt_analyse_pp(struct kp_probepoint *pp)
{
	struct a64_opt *o = pp->ainsn.opt;

	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		o->why = analyse(pp->addr, &pp->ainsn.dec);
		o->ok = !o->why;
		pp->ainsn.opt = o;
	}
	return o->ok ? 0 : -EINVAL;
}

const char *arch_opt_why(const struct kp_probepoint *pp)
{
	return pp->ainsn.opt ? pp->ainsn.opt->why : NULL;
}

uint8_t arch_opt_region_len(const struct kp_probepoint *pp)
{
	return pp->ainsn.opt && pp->ainsn.opt->ok ? ARCH_OPT_JUMP_LEN : 1;
}

/* One word, written with one single-copy-atomic store, and both words are
 * in the architecture's list of concurrently modifiable instructions (B,
 * BRK): a thread anywhere, at addr included, runs the old or the new one,
 * each correctly.  The slot runs the instruction and branches (or traps)
 * to addr + 4, never into the word. */
int arch_opt_census_ranges(const struct kp_probepoint *pp, uintptr_t (*r)[2])
{
	(void)pp;
	(void)r;
	return 0;
}

const char *arch_opt_check(uintptr_t addr, uintptr_t func, size_t size, size_t pad)
{
	struct a64_insn in;
	uint32_t w;
	const char *why;

	(void)func;
	(void)size;
	(void)pad;
	if (addr & 3)
		return "not an instruction boundary";
	if (arch_read_original(addr, (uint8_t *)&w, 4))
		return "cannot read the instruction";
	if (a64_insn_decode(w, &in))
		return in.why ? in.why : "unprobeable instruction";
	why = analyse(addr, &in);
	if (why)
		return why;
	if (!kp_knob_optimize)
		return "jump optimization is off";
	return NULL;
}

/* ---- detours ---- */

extern char kp_a64_detour_common[], kp_a64_detour_entry[];

/* The shared code for pp: at a function's first instruction (its symbol's
 * start) only the argument registers of the FP/SIMD file can be live. */
static uintptr_t common_for(const struct kp_probepoint *pp)
{
	if (pp->func_size && pp->addr == pp->func)
		return (uintptr_t)kp_a64_detour_entry;
	return (uintptr_t)kp_a64_detour_common;
}

static int detour_write(struct kp_probepoint *pp, uintptr_t d)
{
	uint32_t code[DETOUR_SIZE / 4];
	uintptr_t common = common_for(pp);
	struct dw w = { .w = code, .at = d, .max = OFF_PP / 4 };
	uint32_t bl;

	memset(code, 0, sizeof(code));	/* UDF #0 */
	dw_put(&w, enc_sub_sp((uint32_t)PT_SIZE));
	dw_put(&w, enc_stp_sp(0, 1, 0));
	dw_put(&w, enc_str_x(30, X_SP, (uint32_t)PT_X30));
	dw_put(&w, enc_ldr_lit(0, OFF_PP - 4 * w.n));
	if (a64_b(dw_pc(&w) + 4, common, &bl)) {
		dw_put(&w, A64_NOP);
		dw_put(&w, bl | A64_BL_BIT);
	} else {
		dw_put(&w, enc_ldr_lit(1, OFF_COMMON - 4 * w.n));
		dw_put(&w, enc_blr(1));
	}
	if (w.n * 4 != OFF_RET)
		return -EINVAL;
	dw_put(&w, enc_ldp_sp(0, 1, 0));
	dw_put(&w, enc_ldr_x(30, X_SP, (uint32_t)PT_X30));
	dw_put(&w, enc_add_sp((uint32_t)PT_SIZE));
	if (w.n * 4 != OFF_COPY)
		return -EINVAL;
	emit_insn(&w, &pp->ainsn.dec, pp->addr);
	if (w.err)
		return -EINVAL;
	memcpy((char *)code + OFF_PP, &pp, sizeof(pp));
	memcpy((char *)code + OFF_COMMON, &common, sizeof(common));
	return text_write_fresh(d, code, DETOUR_SIZE / 4) ? -ENOMEM : 0;
}

int arch_detour_build(struct kp_probepoint *pp)
{
	struct a64_opt *o = pp->ainsn.opt;
	uintptr_t want[2], lo, hi, d;
	struct detour_meta *m;
	int nwant = 0, err;

	if (!o || !o->ok)
		return -EINVAL;
	if (o->detour)
		return 0;
	/* The B reaches the detour and comes back; a branch of the
	 * instruction leaves from the detour to its target. */
	want[nwant++] = pp->addr;
	if (branch_target(&pp->ainsn.dec, pp->addr))
		want[nwant++] = branch_target(&pp->ainsn.dec, pp->addr);
	exec_reach_window(want, nwant, &lo, &hi);
	if (lo >= hi) {
		o->why = "no detour can reach both the probe and its branch target";
		return -EINVAL;
	}
	d = exec_alloc(&arena, lo, hi, (void **)&m);
	if (!d && arch_reclaim() > 0)
		d = exec_alloc(&arena, lo, hi, (void **)&m);
	if (!d) {
		/* The probe keeps its BRK; a later (re)evaluation tries again. */
		o->why = "no executable memory within a B's reach: the probe keeps its BRK";
		return -ENOMEM;
	}
	err = detour_write(pp, d);
	if (err) {
		exec_free(&arena, d);
		o->why = "the detour could not be written: the probe keeps its BRK";
		return err;
	}
	__atomic_store_n(&m->owner, pp, __ATOMIC_RELEASE);
	o->detour = d;
	o->why = NULL;
	return 0;
}

/* ---- installing and removing the B ---- */

static bool jump_get(const struct kp_probepoint *pp, bool install, uintptr_t *addr,
		     uint32_t *insn)
{
	const struct a64_opt *o = pp->ainsn.opt;

	*addr = pp->addr;
	if (!install) {
		*insn = ARCH_BREAKPOINT_INSN;
		return true;
	}
	return a64_b(pp->addr, o->detour, insn);
}

static bool install_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	return jump_get(((struct kp_probepoint *const *)b->ctx)[i], true, addr, insn);
}

static bool remove_get(const struct text_poke_batch *b, int i, uintptr_t *addr, uint32_t *insn)
{
	return jump_get(((struct kp_probepoint *const *)b->ctx)[i], false, addr, insn);
}

static void installed(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->ainsn.opt->jumped = true;
}

static void removed(const struct text_poke_batch *b, int i)
{
	((struct kp_probepoint *const *)b->ctx)[i]->ainsn.opt->jumped = false;
}

/* BRK -> B: the BRK path and the detour run the same handlers, so a
 * thread that still takes the BRK meanwhile is served as before. */
int arch_optimize(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = install_get, .done = installed,
				     .object = text_poke_pp_object, .ctx = pps };
	int err;

	for (int i = 0; i < n; i++)
		if (!pps[i]->ainsn.opt || !pps[i]->ainsn.opt->detour)
			return -EINVAL;
	err = text_poke_batch(&b);
	if (err) {
		/* All or none: every word back to the BRK. */
		arch_unoptimize(pps, n);
		return err;
	}
	for (int i = 0; i < n; i++)
		if (!pps[i]->ainsn.opt->jumped) {
			arch_unoptimize(pps, n);
			return -EIO;
		}
	return 0;
}

/* B -> BRK; never stops half-way.  A thread already past the B finishes
 * in the detour, which stays until the probepoint is retired. */
int arch_unoptimize(struct kp_probepoint **pps, int n)
{
	struct text_poke_batch b = { .n = n, .get = remove_get, .done = removed,
				     .object = text_poke_pp_object, .ctx = pps };

	return text_poke_batch(&b);
}

void arch_opt_forget_gone(struct arch_insn *ai)
{
	if (ai->opt)
		ai->opt->jumped = false;
}

/* ---- the hit path's questions ---- */

/* The probepoint whose detour holds ip, and the detour; NULL if none. */
static struct kp_probepoint *detour_owner(uintptr_t ip, uintptr_t *d)
{
	struct detour_meta *m = exec_meta_of(&arena, ip, d);

	return m ? __atomic_load_n(&m->owner, __ATOMIC_ACQUIRE) : NULL;
}

struct kp_probepoint *a64_detour_copy_owner(uintptr_t ip)
{
	uintptr_t d;
	struct kp_probepoint *pp = detour_owner(ip, &d);

	return pp && ip >= d + OFF_COPY && ip < d + OFF_PP ? pp : NULL;
}

bool a64_detour_map_ip(uintptr_t *ip)
{
	uintptr_t d;
	struct kp_probepoint *pp = detour_owner(*ip, &d);

	if (!pp)
		return false;
	*ip = pp->addr;
	return true;
}

/* Whether the word at pc is the B of an optimized probe (for the Branch
 * Target exception an indirect branch to a guarded landing pad meets). */
bool a64_detour_jump_at(uintptr_t pc)
{
	struct kp_probepoint *pp = kp_probepoint_lookup(pc);
	uint32_t w = *(volatile uint32_t *)pc, b;
	struct a64_opt *o;

	if (!pp)
		return false;
	o = __atomic_load_n(&pp->ainsn.opt, __ATOMIC_ACQUIRE);
	return o && o->detour && a64_b(pc, o->detour, &b) && b == w;
}

extern char kp_a64_detour_common_end[];

__attribute__((visibility("hidden"), tls_model("initial-exec")))
__thread uintptr_t kp_a64_detour_ret;

/* The census (signal context, on the thread itself): in the shared
 * code, or running handlers called from a detour (whose return address
 * detour.S keeps in kp_a64_detour_ret meanwhile), a thread is bound for
 * its detour. */
bool a64_ip_bound_for_detour(uintptr_t ip)
{
	return (ip >= (uintptr_t)kp_a64_detour_common && ip < (uintptr_t)kp_a64_detour_common_end) ||
	       __atomic_load_n(&kp_a64_detour_ret, __ATOMIC_RELAXED);
}

/* ---- retirement ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

bool a64_opt_retire(struct kp_probepoint *pp)
{
	struct a64_opt *o = pp->ainsn.opt;

	if (!o)
		return false;
	if (!o->detour) {
		free(o);
		pp->ainsn.opt = NULL;
		return false;
	}
	o->retired_ns = now_ns();
	o->next_retired = retired;
	retired = pp;
	nretired++;
	return true;
}

/* The rest of the probepoint's retirement once its detour is free. */
static void detour_free(struct kp_probepoint *pp)
{
	struct a64_opt *o = pp->ainsn.opt;
	uintptr_t d;
	struct detour_meta *m = exec_meta_of(&arena, o->detour, &d);

	if (m)
		__atomic_store_n(&m->owner, NULL, __ATOMIC_RELEASE);
	exec_free(&arena, o->detour);
	free(o);
	pp->ainsn.opt = NULL;
	a64_retire_rest(pp);
}

/* Whether no thread is in or bound for one of n detours: a census; the
 * read-side sections that may have entered a detour's handlers before it
 * ended; a census again, for threads that left those handlers since and
 * are on their way back into the detour. */
static bool detours_unused(struct kp_probepoint **batch, int n)
{
	uintptr_t ranges[CENSUS_BATCH][2];

	for (int i = 0; i < n; i++) {
		ranges[i][0] = batch[i]->ainsn.opt->detour;
		ranges[i][1] = batch[i]->ainsn.opt->detour + DETOUR_SIZE;
	}
	if (!kp_threads_outside((const uintptr_t (*)[2])ranges, n))
		return false;
	kp_synchronize();
	return kp_threads_outside((const uintptr_t (*)[2])ranges, n);
}

int a64_detour_reclaim(void)
{
	struct kp_probepoint *ripe = NULL, *keep = NULL, *pp;
	uint64_t now = now_ns();
	int freed = 0;

	while ((pp = retired)) {
		struct a64_opt *o = pp->ainsn.opt;

		retired = o->next_retired;
		if (now - o->retired_ns < QUARANTINE_NS) {
			o->next_retired = keep;
			keep = pp;
		} else {
			o->next_retired = ripe;
			ripe = pp;
		}
	}
	retired = keep;
	while (ripe) {
		struct kp_probepoint *batch[CENSUS_BATCH];
		int n = 0;

		while (ripe && n < CENSUS_BATCH) {
			batch[n++] = ripe;
			ripe = ripe->ainsn.opt->next_retired;
		}
		if (detours_unused(batch, n)) {
			nretired -= (unsigned int)n;
			freed += n;
			for (int i = 0; i < n; i++)
				detour_free(batch[i]);
			continue;
		}
		/* Rest again before the next census: one that failed is
		 * not repeated at every retirement meanwhile. */
		for (int i = 0; i < n; i++) {
			batch[i]->ainsn.opt->retired_ns = now;
			batch[i]->ainsn.opt->next_retired = retired;
			retired = batch[i];
		}
	}
	return freed;
}

bool a64_detour_reclaim_due(void)
{
	return nretired >= CENSUS_BATCH;
}

unsigned long a64_detours_in_use(void)
{
	return __atomic_load_n(&arena.in_use, __ATOMIC_RELAXED);
}
