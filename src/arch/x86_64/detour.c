/*
 * Detour buffers of jump-optimized probes, 128 bytes each:
 *
 *   D+0   lea -128(%rsp),%rsp         keep clear of the red zone
 *   D+5   call *D+120(%rip)           save, call the handlers, restore
 *   D+11  lea 128(%rsp),%rsp          (R, the return address, = D+11)
 *   D+19  the copied instructions, relocated
 *         jmp back to the end of the replaced region
 *   D+104 unused
 *   D+112 the probepoint              (read at R+101)
 *   D+120 the shared save/restore code for this probe's kind
 *
 * A mid-function detour whose probepoint has a light probe when it is
 * built has the fast exit at R (MIDX_SKIP bytes, copied from
 * detour_common.S: its handler returns straight there), then the lea:
 *
 *   D+11  the fast exit               (R)
 *   D+59  lea 128(%rsp),%rsp          (the general path returns here)
 *   D+67  the copied instructions ...
 *
 * At a function entry nothing below the stack pointer is live (the call
 * wrote there), so the detour starts with the call (R = D+6).  The handler
 * of the common case returns straight to R, so the end of the read-side
 * section and the restore of the light level are at R too (copied from
 * detour_common.S), followed by the copy, which that code reaches by a
 * jump through the continuation the save code left on the stack (a return
 * probe's instance set-up changes it: retstub.c).
 */
#include <cpuid.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "os/linux/execmem.h"
#include "arch/x86_64/unwind_detour.h"
#include "arch/x86_64/writer.h"
#include "core/arch_api.h"
#include "os/linux/memory.h"
#include "os/linux/threads.h"


#define DETOUR_SIZE 128
#define OFF_RET 11
#define OFF_RET_ENTRY 6
#define OFF_CODE_END 104
#define OFF_PP 112
#define OFF_COMMON 120

/* detour_common.S finds the probepoint at R+101 (R_PP) and, at a function
 * entry, at R+106 (R_PP_ENTRY). */
_Static_assert(OFF_PP - OFF_RET == 101 && OFF_PP - OFF_RET_ENTRY == 106, "detour_common.S: R_PP");

extern char kp_opt_entry_sse[], kp_opt_entry_avx[], kp_opt_entry_avx512[];
extern char kp_opt_entry_sse_flags[], kp_opt_entry_avx_flags[], kp_opt_entry_avx512_flags[];
extern char kp_opt_centry_sse[], kp_opt_centry_avx[], kp_opt_centry_avx512[];
extern char kp_opt_centry_sse_flags[], kp_opt_centry_avx_flags[], kp_opt_centry_avx512_flags[];
extern char kp_opt_mid_xsave[], kp_opt_mid_fxsave[];
extern char kp_opt_midf_xsave[], kp_opt_midf_fxsave[];
/* The fast exit of a mid-function detour (detour_common.S), MIDX_SKIP
 * bytes: where the general path returns, past it. */
extern const uint8_t kp_opt_mid_exit[], kp_opt_mid_exit_end[];
#define MIDX_SKIP 55
/* What an entry detour runs after its handlers (ends the section, puts the
 * light level back), without and with the status flags; plain, or
 * continuing (for return probes: detour_common.S). */
extern const uint8_t kp_opt_entry_exit[], kp_opt_entry_exit_end[];
extern const uint8_t kp_opt_entry_exit_flags[], kp_opt_entry_exit_flags_end[];
extern const uint8_t kp_opt_entry_cexit[], kp_opt_entry_cexit_end[];
extern const uint8_t kp_opt_entry_cexit_flags[], kp_opt_entry_cexit_flags_end[];

__attribute__((visibility("hidden"))) unsigned int kp_xsave_size;

struct detour_meta {
	struct kp_probepoint *owner;
};

static struct exec_arena arena = { .unit = DETOUR_SIZE, .meta_size = sizeof(struct detour_meta) };

/* Size of an xsave image of every enabled state component (0: no xsave). */
void arch_fpu_init(void)
{
	unsigned int a, b, c, d;

	if (!kp_xsave_size && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) &&
	    __get_cpuid_count(0xd, 0, &a, &b, &c, &d))
		kp_xsave_size = b + 64;	/* room to align */
}

/* The shared code of entry detours: [continuing exit][flags dead][vector
 * width: SSE, AVX, AVX-512]. */
static char *const entry_common[2][2][3] = {
	{ { kp_opt_entry_sse_flags, kp_opt_entry_avx_flags, kp_opt_entry_avx512_flags },
	  { kp_opt_entry_sse, kp_opt_entry_avx, kp_opt_entry_avx512 } },
	{ { kp_opt_centry_sse_flags, kp_opt_centry_avx_flags, kp_opt_centry_avx512_flags },
	  { kp_opt_centry_sse, kp_opt_centry_avx, kp_opt_centry_avx512 } },
};

static int vector_width(void)
{
	if (__builtin_cpu_supports("avx512f"))
		return 2;
	return __builtin_cpu_supports("avx") ? 1 : 0;
}

static uintptr_t common_for(bool entry, bool flags_dead, bool cont, bool midf)
{
	__builtin_cpu_init();
	if (entry)
		return (uintptr_t)entry_common[cont][flags_dead][vector_width()];
	arch_fpu_init();
	if (midf)
		return kp_xsave_size ? (uintptr_t)kp_opt_midf_xsave : (uintptr_t)kp_opt_midf_fxsave;
	return kp_xsave_size ? (uintptr_t)kp_opt_mid_xsave : (uintptr_t)kp_opt_mid_fxsave;
}

/* Copies one instruction of the region, re-targeting a RIP-relative
 * displacement or a relative jmp, emulating a final call. */
static void emit_copied(struct xw *w, const uint8_t *bytes, size_t avail, uintptr_t pc)
{
	struct arch_insn ai;
	const char *why;
	uint8_t b[KP_MAX_INSN];
	int off;

	if (insn_analyze(&ai, pc, bytes, avail, &why)) {
		w->err = true;
		return;
	}
	if (ai.klass == IC_JMP_REL) {
		xw_jmp(w, ai.target);
		return;
	}
	/* A call completing the region (optcheck.c): returns to the
	 * original code after it. */
	if (ai.klass == IC_CALL_REL || ai.klass == IC_CALL_IND) {
		xw_push_return(w, pc + ai.len);
		if (ai.klass == IC_CALL_REL)
			xw_jmp(w, ai.target);
		else
			xw_call_ind_as_jmp(w, ai.bytes, ai.len, pc + ai.len);
		return;
	}
	if (ai.klass == IC_JCC) {
		/* j!cc over; jmp target; over: */
		uintptr_t over = xw_pc(w) + 2;

		over += xw_jmp_len(over, ai.target);
		xw_jcc_short(w, ai.cc ^ 1, over);
		xw_jmp(w, ai.target);
		return;
	}
	memcpy(b, ai.bytes, ai.len);
	off = insn_riprel_disp_offset(&ai);
	if (off >= 0) {
		int32_t d;
		int64_t nd;

		memcpy(&d, b + off, 4);
		nd = (int64_t)d + (int64_t)(pc - xw_pc(w));
		if (nd < INT32_MIN || nd > INT32_MAX) {
			w->err = true;
			return;
		}
		d = (int32_t)nd;
		memcpy(b + off, &d, 4);
	}
	xw_bytes(w, b, ai.len);
}

/* The entry exit's first instruction, "mov %fs:disp32,%rax", reads the
 * thread record: disp32 is kp_self_tls's offset from the thread pointer,
 * the same in every thread (initial-exec TLS). */
static int set_record_offset(uint8_t *insn)
{
	static const uint8_t mov_fs_rax[] = { 0x64, 0x48, 0x8b, 0x04, 0x25 };
	uintptr_t tp;
	int64_t off;
	int32_t disp;

	if (memcmp(insn, mov_fs_rax, sizeof(mov_fs_rax)))
		return -EINVAL;
	asm("mov %%fs:0, %0" : "=r"(tp));
	off = (int64_t)((uintptr_t)&kp_self_tls - tp);
	if (off < INT32_MIN || off > INT32_MAX)
		return -EINVAL;
	disp = (int32_t)off;
	memcpy(insn + sizeof(mov_fs_rax), &disp, sizeof(disp));
	return 0;
}

/* Does a return probe's fast instance set-up run here?  Its detour gets
 * the continuing exit.  The detour is kept for the probepoint's life: a
 * return probe added later to one built plain costs its return's
 * prediction, nothing else (kp_kretprobe_entry_fast tells them apart). */
static bool wants_continuation(const struct kp_probepoint *pp)
{
	for (struct kprobe *p = pp->probes; p; p = p->__next)
		if (kp_probe_fast_fn(p) == (void *)kp_kretprobe_entry_fast)
			return true;
	return false;
}

/* Does the mid-function fast path serve this probepoint?  Its detour
 * gets the fast exit.  Decided when the detour is built, and kept: a
 * probepoint whose probes change later still works either way, the fast
 * exit's detour then handing over to the general path at some cost. */
static bool wants_mid_fast(const struct kp_probepoint *pp)
{
	const struct kprobe *p = __atomic_load_n(&pp->fast, __ATOMIC_ACQUIRE);

	return p && kp_probe_fast_fn(p) != (void *)kp_kretprobe_entry_fast &&
	       kp_probe_fast_fn(p) == (void *)p->pre_handler;
}

static int write_entry_exit(struct xw *w, bool flags_dead, bool cont)
{
	const uint8_t *b = flags_dead ? kp_opt_entry_exit : kp_opt_entry_exit_flags;
	const uint8_t *e = flags_dead ? kp_opt_entry_exit_end : kp_opt_entry_exit_flags_end;

	if (cont) {
		/* The save code jumps to the copy CEXIT_LEN bytes after R,
		 * whichever of the two the detour has. */
		if (kp_opt_entry_cexit_end - kp_opt_entry_cexit !=
		    kp_opt_entry_cexit_flags_end - kp_opt_entry_cexit_flags)
			return -EINVAL;
		b = flags_dead ? kp_opt_entry_cexit : kp_opt_entry_cexit_flags;
		e = flags_dead ? kp_opt_entry_cexit_end : kp_opt_entry_cexit_flags_end;
	}
	xw_bytes(w, b, (size_t)(e - b));
	return cont ? set_record_offset(w->buf + OFF_RET_ENTRY) : 0;
}

/* The pool holding unit d. */
static uintptr_t pool_of(uintptr_t d)
{
	unsigned int n = __atomic_load_n(&arena.npools, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++)
		if (d >= arena.pools[i].base && d < arena.pools[i].base + EXEC_POOL_SIZE)
			return arena.pools[i].base;
	return 0;
}

/* Unwind information for the detour just written (unwind_detour.c). */
static void describe(const struct kp_probepoint *pp, uintptr_t d, const uint8_t *code, bool cont,
		     bool midf, size_t jmp_off)
{
	const struct arch_opt *o = pp->ainsn.opt;
	struct detour_layout l = {
		.pool = pool_of(d), .pool_size = EXEC_POOL_SIZE, .unit = DETOUR_SIZE,
		.d = d, .addr = pp->addr, .entry = o->entry, .cont = cont, .code = code,
		.mid_fast = midf, .mid_exit_len = MIDX_SKIP,
		.ret_off = o->entry ? OFF_RET_ENTRY : OFF_RET, .ncopied = o->ncopied,
		.insn_off = o->insn_off, .insn_orig = o->insn_orig, .orig = o->orig,
		.jmp_off = (uint8_t)jmp_off,
		.copied_len = o->copied_len,
	};

	if (l.pool)
		arch_detour_unwind_add(&l);
}

static int detour_write(struct kp_probepoint *pp, uintptr_t d, bool cont, bool midf)
{
	struct arch_opt *o = pp->ainsn.opt;
	uint8_t code[DETOUR_SIZE];
	size_t jmp_off = 0;
	int err;
	uintptr_t common = common_for(o->entry, o->flags_dead, cont, midf);
	struct xw w;
	bool last_ends = false;

	memset(code, 0xcc, sizeof(code));
	xw_init(&w, code, OFF_CODE_END, d);
	if (o->entry) {
		xw_call_indirect(&w, d + OFF_COMMON);
		if (w.len != OFF_RET_ENTRY || write_entry_exit(&w, o->flags_dead, cont))
			return -EINVAL;
	} else {
		xw_lea_rsp(&w, -128);
		xw_call_indirect(&w, d + OFF_COMMON);
		if (w.len != OFF_RET)
			return -EINVAL;
		if (midf) {
			if (kp_opt_mid_exit_end - kp_opt_mid_exit != MIDX_SKIP)
				return -EINVAL;
			xw_bytes(&w, kp_opt_mid_exit, MIDX_SKIP);
		}
		xw_lea_rsp(&w, 128);
	}
	o->copied_off = (uint8_t)w.len;
	for (int i = 0; i < o->ncopied; i++) {
		size_t at = o->insn_orig[i];

		o->insn_off[i] = (uint8_t)w.len;
		emit_copied(&w, o->orig + at, o->copied_len - at, pp->addr + at);
		last_ends = i == o->ncopied - 1 && o->copied_len < o->region_len;
	}
	if (!last_ends) {
		jmp_off = w.len;
		xw_jmp(&w, pp->addr + o->copied_len);
	}
	if (w.err)
		return -EINVAL;
	memcpy(code + OFF_PP, &pp, sizeof(pp));
	memcpy(code + OFF_COMMON, &common, sizeof(common));
	err = kp_mem_write(d, code, sizeof(code));
	if (!err)
		describe(pp, d, code, cont, midf, jmp_off);
	return err;
}

int arch_detour_build(struct kp_probepoint *pp)
{
	struct arch_opt *o = pp->ainsn.opt;
	uintptr_t want[OPT_MAX_COPIED + 1], lo, hi;
	struct detour_meta *m;
	int nwant = 0, err;
	uintptr_t d;

	if (o->detour)
		return 0;
	/* The jump must reach the detour, the detour every RIP-relative
	 * operand of the copied instructions. */
	want[nwant++] = pp->addr;
	for (int i = 0; i < o->ncopied; i++) {
		struct arch_insn ai;
		const char *why;
		int off;

		if (insn_analyze(&ai, pp->addr + o->insn_orig[i], o->orig + o->insn_orig[i],
				 o->copied_len - o->insn_orig[i], &why))
			return -EINVAL;
		off = insn_riprel_disp_offset(&ai);
		if (off >= 0) {
			int32_t disp;

			memcpy(&disp, ai.bytes + off, 4);
			want[nwant++] = pp->addr + o->insn_orig[i] + ai.len + (intptr_t)disp;
		}
	}
	exec_reach_window(want, nwant, &lo, &hi);
	if (lo >= hi)
		return -EINVAL;
	d = exec_alloc(&arena, lo, hi, (void **)&m);
	if (!d)
		return -ENOMEM;
	err = detour_write(pp, d, o->entry && wants_continuation(pp),
			   !o->entry && wants_mid_fast(pp));
	/* The continuing exit and the mid-function fast exit take room: a
	 * copy that does not fit after them may fit without. */
	if (err == -EINVAL && ((o->entry && wants_continuation(pp)) ||
			       (!o->entry && wants_mid_fast(pp))))
		err = detour_write(pp, d, false, false);
	if (err) {
		exec_free(&arena, d);
		return err;
	}
	m->owner = pp;
	o->detour = d;
	return 0;
}

void arch_detour_free(struct kp_probepoint *pp)
{
	struct arch_opt *o = pp->ainsn.opt;

	if (!o || !o->detour)
		return;
	arch_detour_unwind_remove(pool_of(o->detour), EXEC_POOL_SIZE, DETOUR_SIZE, o->detour);
	exec_free(&arena, o->detour);
	o->detour = 0;
}

uintptr_t arch_detour_resume(const struct kp_probepoint *pp)
{
	return pp->ainsn.opt->detour + pp->ainsn.opt->copied_off;
}

/* A fault in a copied instruction happened, for the program, at that
 * instruction's own address. */
bool arch_detour_fault_addr(uintptr_t ip, uintptr_t *orig, uintptr_t *copy,
			    struct kp_probepoint **pp_out)
{
	uintptr_t d;
	struct detour_meta *m = exec_meta_of(&arena, ip, &d);
	struct kp_probepoint *pp = m ? __atomic_load_n(&m->owner, __ATOMIC_ACQUIRE) : NULL;
	struct arch_opt *o;

	if (!pp)
		return false;
	o = pp->ainsn.opt;
	for (int i = o->ncopied - 1; i >= 0; i--)
		if (ip >= d + o->insn_off[i]) {
			*orig = pp->addr + o->insn_orig[i];
			*copy = d + o->insn_off[i];
			*pp_out = pp;
			return ip >= d + o->copied_off;
		}
	return false;
}

void arch_detour_stats(unsigned long *detours)
{
	*detours = __atomic_load_n(&arena.in_use, __ATOMIC_RELAXED);
}

size_t arch_detour_bytes(void)
{
	return DETOUR_SIZE;
}

/* Detour and slot ranges of pp, for a census. */
int arch_detour_range(const struct kp_probepoint *pp, uintptr_t range[2])
{
	const struct arch_opt *o = pp->ainsn.opt;

	if (!o || !o->detour)
		return 0;
	range[0] = o->detour;
	range[1] = o->detour + DETOUR_SIZE;
	return 1;
}
