/*
 * Unwind information of the detour buffers, for libgcc's unwinder and for
 * gdb.  A detour stands for the probed instructions: each of its frames is
 * described as a signal frame whose "return address" is the address of
 * the original instruction it is at (or about to run), and whose CFA is
 * the program's stack pointer there, so unwinders continue in the probed
 * function exactly as if the thread were at that instruction.
 *
 *   entry detour  D+0 call common      CFA = rsp, RA = addr
 *                 D+5 (R - 1, only seen as a return address's call site:
 *                      a handler entered by a jump returns to R)
 *                 R   exit: light level (10 words) popped, then
 *                     the copied instructions; a continuing exit runs
 *                     with the stack pointer at the program's already
 *   mid detour    D+0 lea -128(%rsp)    CFA = rsp, then rsp + 128
 *                 R   lea 128(%rsp)     CFA = rsp
 *     or, with the fast exit:
 *                 R-1 (from the handler) CFA = the word at rsp + 224,
 *                     the program's rbx at CFA - 232
 *                 R   mov %rbx,%rsp, then the program's rbx back, the
 *                     light level popped word by word down to
 *                     rsp + 128, lea 128(%rsp)
 *   copies        each: RA = addr + its offset in the region; the jump
 *                 back: RA = addr + the copied length
 *
 * libgcc's frame registry is given one table per pool of detours, with a
 * fixed-size FDE for every unit (registered once, when the pool's first
 * detour is built): a detour being written is one no thread runs, so its
 * FDE is rewritten in place while the rest stays put (libgcc keeps
 * pointers into the table).  gdb reads JIT objects once, when they are
 * registered: each live unit has its own, with its FDE (a constant cost
 * per detour, where one object per pool would be rebuilt at each change).
 *
 * Out-of-line slots get the same kind of tables: in a slot, the original
 * instruction's address until the copy ran, the next one's after (a
 * call's target once its return address is pushed), CFA = rsp.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "os/linux/execmem.h"
#include "arch/x86_64/insn.h"
#include "arch/x86_64/jitdebug.h"
#include "arch/x86_64/writer.h"
#include "arch/x86_64/unwind_detour.h"
#include "asm/dwarf.h"
#include "asm/uaccess.h"

#define DW_CFA_advance_loc 0x40
#define DW_CFA_advance_loc1 0x02
#define DW_CFA_def_cfa 0x0c
#define DW_CFA_def_cfa_expression 0x0f
#define DW_OP_breg7 0x77
#define DW_OP_deref 0x06
#define DW_OP_plus_uconst 0x23
#define DW_CFA_def_cfa_offset 0x0e
#define DW_CFA_undefined 0x07
#define DW_CFA_val_expression 0x16
#define DW_CFA_offset 0x80
#define DW_CFA_same_value 0x08
/* The fast exit's first two instructions: mov %rbx,%rsp (3 bytes), then
 * mov -8(%rsp),%rbx (5). */
#define MIDX_RSP_LEN 3u
#define MIDX_RBX_LEN 8u
#define DW_OP_addr 0x03

#define CIE_SIZE 24
#define FDE_MAX 176		/* fixed per set: length, CIE pointer, range, instructions */
#define FDE_INSNS 25		/* the instructions' offset in an FDE */

struct pool_unwind {
	uintptr_t base;
	size_t unit, units;
	uint8_t *eh;		/* CIE, units FDEs, terminator */
	struct kp_jit_object **jit;	/* per live unit, for debuggers */
};

/* The pools of one arena (detours, out-of-line slots). */
struct pool_set {
	const char *name;	/* the JIT objects' symbol */
	size_t fde_size;
	struct pool_unwind pools[EXEC_MAX_POOLS];
	int npools;
};

static struct pool_set detours = { .name = "kprobes_detour", .fde_size = FDE_MAX };
static struct pool_set slots = { .name = "kprobes_slot", .fde_size = 96 };

typedef void (*frame_fn_t)(void *);

static frame_fn_t register_frame_fn(void)
{
	return (frame_fn_t)dlsym(RTLD_DEFAULT, "__register_frame");
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
	return p + 8;
}

/* CIE "zRS": absolute addresses, a signal frame; CFA = rsp. */
static void put_cie(uint8_t *p)
{
	static const uint8_t body[] = {
		0, 0, 0, 0, 1, 'z', 'R', 'S', 0, 1, 0x78, ARCH_DWARF_RA, 1, 0x00,
		0x0c, 7, 0,		/* DW_CFA_def_cfa rsp, 0 */
		0, 0, 0,		/* nops */
	};

	p = put32(p, sizeof(body));
	memcpy(p, body, sizeof(body));
}

/* An FDE of fde_size bytes at p for [start, start + range), with the
 * instructions insns (n bytes, at most fde_size - FDE_INSNS), nops after. */
static void put_fde(uint8_t *eh, uint8_t *p, size_t fde_size, uintptr_t start, size_t range,
		    const uint8_t *insns, size_t n)
{
	uint8_t *q = put32(p, (uint32_t)fde_size - 4);

	q = put32(q, (uint32_t)(q - eh));
	q = put64(q, start);
	q = put64(q, range);
	*q++ = 0;		/* augmentation data length */
	memset(q, 0, fde_size - FDE_INSNS);
	memcpy(q, insns, n);
}

/* ---- the instructions of one detour ---- */

struct insns {
	uint8_t b[FDE_MAX - FDE_INSNS];
	size_t cap;		/* bytes the set's FDEs hold */
	size_t n;
	size_t loc;		/* offset in the detour the rows reached */
	bool full;
};

static void emit(struct insns *s, const uint8_t *b, size_t n)
{
	if (s->full || s->n + n > s->cap) {
		s->full = true;
		return;
	}
	memcpy(s->b + s->n, b, n);
	s->n += n;
}

static void advance_to(struct insns *s, size_t loc)
{
	uint8_t b[2] = { DW_CFA_advance_loc1, (uint8_t)(loc - s->loc) };

	/* DW_CFA_advance_loc (one byte) for a short step */
	if (loc > s->loc && loc - s->loc < 64) {
		b[0] = (uint8_t)(DW_CFA_advance_loc | (loc - s->loc));
		emit(s, b, 1);
	} else if (loc > s->loc) {
		emit(s, b, 2);
	}
	s->loc = loc;
}

/* CFA = rsp + off (after a rule that was not register-based). */
static void cfa_rsp(struct insns *s, unsigned int off)
{
	uint8_t b[4] = { DW_CFA_def_cfa, ARCH_DWARF_SP, (uint8_t)(off | 0x80), (uint8_t)(off >> 7) };

	if (off < 128) {
		b[2] = (uint8_t)off;
		emit(s, b, 3);
	} else {
		emit(s, b, 4);
	}
}

/* CFA = the word at rsp, plus off (off < 16384). */
static void cfa_deref_rsp(struct insns *s, unsigned int off)
{
	uint8_t b[] = { DW_CFA_def_cfa_expression, 6, DW_OP_breg7, 0, DW_OP_deref,
			DW_OP_plus_uconst, (uint8_t)(off | 0x80), (uint8_t)(off >> 7) };

	emit(s, b, sizeof(b));
}

static void cfa_offset(struct insns *s, unsigned int off)
{
	uint8_t b[3] = { DW_CFA_def_cfa_offset, (uint8_t)(off | 0x80), (uint8_t)(off >> 7) };

	if (off < 128) {
		b[1] = (uint8_t)off;
		emit(s, b, 2);
	} else {
		emit(s, b, 3);
	}
}

/* The return address: the original instruction's address. */
static void ra_is(struct insns *s, uintptr_t addr)
{
	uint8_t b[12] = { DW_CFA_val_expression, ARCH_DWARF_RA, 9, DW_OP_addr };

	memcpy(b + 4, &addr, 8);
	emit(s, b, sizeof(b));
}

/* Does the instruction at c pop a word off the stack (pop reg, or
 * lea 8(%rsp),%rsp)? */
static bool pops(const uint8_t *c, size_t len)
{
	static const uint8_t lea8[] = { 0x48, 0x8d, 0x64, 0x24, 0x08 };

	if (len == 1 && c[0] >= 0x58 && c[0] <= 0x5f)
		return true;
	if (len == 2 && c[0] == 0x41 && c[1] >= 0x58 && c[1] <= 0x5f)
		return true;
	return len == sizeof(lea8) && !memcmp(c, lea8, sizeof(lea8));
}

/* The plain exit at R: the light level popped, word by word. */
static void plain_exit(struct insns *s, const struct detour_layout *l)
{
	size_t end = l->ncopied ? l->insn_off[0] : l->jmp_off;
	unsigned int off = 88;		/* L + 88: the program's stack pointer */

	for (size_t at = l->ret_off; at < end && off;) {
		int len = insn_length(l->code + at, end - at);

		if (len <= 0)
			break;
		at += (size_t)len;
		if (pops(l->code + at - len, (size_t)len)) {
			off -= 8;
			advance_to(s, at);
			cfa_offset(s, off);
		}
	}
}

/* The fast exit of a mid-function detour: R - 1 as seen from the handler
 * (jumped into with R as its return address), whose frame is aligned
 * below the light level and holds L's address at its top, with L in rbx
 * and the program's rbx below L; at R rsp goes back to L and rbx gets the
 * program's, then the light level, the flags and R's slot are popped,
 * down to the red zone's 128 bytes, which the lea after the exit steps
 * back over. */
static void mid_fast_exit(struct insns *s, const struct detour_layout *l)
{
	static const uint8_t lea16[] = { 0x48, 0x8d, 0x64, 0x24, 0x10 };
	static const uint8_t rbx_at[] = { DW_CFA_offset | ARCH_DWARF_RBX, (96 + 128 + 8) / 8 };
	static const uint8_t rbx_back[] = { DW_CFA_same_value, ARCH_DWARF_RBX };
	size_t end = l->ret_off + (size_t)l->mid_exit_len;
	unsigned int off = 96 + 128;	/* L + 224: the program's stack pointer */

	advance_to(s, l->ret_off - 1);
	cfa_deref_rsp(s, off);
	emit(s, rbx_at, sizeof(rbx_at));
	advance_to(s, l->ret_off + MIDX_RSP_LEN);	/* after mov %rbx,%rsp */
	cfa_rsp(s, off);
	advance_to(s, l->ret_off + MIDX_RBX_LEN);	/* after mov -8(%rsp),%rbx */
	emit(s, rbx_back, sizeof(rbx_back));
	for (size_t at = l->ret_off + MIDX_RBX_LEN; at < end && off > 128;) {
		int len = insn_length(l->code + at, end - at);
		const uint8_t *c;

		if (len <= 0)
			break;
		c = l->code + at;
		at += (size_t)len;
		if (pops(c, (size_t)len) || ((size_t)len == sizeof(lea16) && !memcmp(c, lea16, (size_t)len))) {
			off -= pops(c, (size_t)len) ? 8 : 16;
			advance_to(s, at);
			cfa_offset(s, off);
		}
	}
	advance_to(s, end + 8);		/* after lea 128(%rsp),%rsp */
	cfa_offset(s, 0);
}

/* A call completing the region is emulated (detour.c): push %rax, mov
 * $ret,%rax, xchg %rax,(%rsp), then a jump to the target.  One word more
 * on the stack after the push; at the target's entry once the return
 * address is in place (an indirect call's target is not known: the
 * unwind stops there). */
static void copied_call(struct insns *s, const struct detour_layout *l, int i)
{
	static const uint8_t undef[] = { DW_CFA_undefined, ARCH_DWARF_RA };
	uintptr_t pc = l->addr + l->insn_orig[i];
	struct arch_insn ai;
	const char *why;
	uint8_t buf[32];
	struct xw w;

	if (insn_analyze(&ai, pc, l->orig + l->insn_orig[i], l->copied_len - l->insn_orig[i], &why) ||
	    (ai.klass != IC_CALL_REL && ai.klass != IC_CALL_IND))
		return;
	xw_init(&w, buf, sizeof(buf), 0);
	xw_push_return(&w, pc + ai.len);
	advance_to(s, l->insn_off[i] + 1u);
	cfa_offset(s, 8);
	advance_to(s, l->insn_off[i] + w.len);
	cfa_offset(s, 0);
	if (ai.klass == IC_CALL_REL)
		ra_is(s, ai.target);
	else
		emit(s, undef, sizeof(undef));
}

static void detour_insns(struct insns *s, const struct detour_layout *l)
{
	ra_is(s, l->addr);
	if (l->entry) {
		if (!l->cont) {
			/* R - 1, as seen from a handler entered by a jump */
			advance_to(s, l->ret_off - 1);
			cfa_offset(s, 88);
			advance_to(s, l->ret_off);
			plain_exit(s, l);
		}
	} else {
		advance_to(s, 5);		/* after lea -128(%rsp),%rsp */
		cfa_offset(s, 128);
		if (l->mid_fast) {
			mid_fast_exit(s, l);
		} else {
			advance_to(s, l->ret_off + 8);	/* after lea 128(%rsp),%rsp */
			cfa_offset(s, 0);
		}
	}
	for (int i = 0; i < l->ncopied; i++) {
		advance_to(s, l->insn_off[i]);
		ra_is(s, l->addr + l->insn_orig[i]);
		copied_call(s, l, i);
	}
	if (l->jmp_off) {
		advance_to(s, l->jmp_off);
		ra_is(s, l->addr + l->copied_len);
	}
}

/* ---- the pools' tables ---- */

static const uint8_t undefined[] = { DW_CFA_undefined, ARCH_DWARF_RA };

/* The pools' tables, kept for good as the pools are. */
static size_t tables_bytes;

size_t arch_kept_bytes(void)
{
	return __atomic_load_n(&tables_bytes, __ATOMIC_RELAXED) + kp_jit_bytes();
}

static struct pool_unwind *pool_of(struct pool_set *set, uintptr_t base, size_t size, size_t unit,
				   bool create)
{
	size_t fs = set->fde_size;
	frame_fn_t reg;
	struct pool_unwind *pu;

	for (int i = 0; i < set->npools; i++)
		if (set->pools[i].base == base)
			return &set->pools[i];
	if (!create || set->npools == EXEC_MAX_POOLS)
		return NULL;
	pu = &set->pools[set->npools];
	pu->units = size / unit;
	pu->eh = calloc(1, CIE_SIZE + pu->units * fs + 4);
	pu->jit = calloc(pu->units, sizeof(*pu->jit));
	if (!pu->eh || !pu->jit) {
		free(pu->eh);
		free(pu->jit);
		pu->eh = NULL;
		pu->jit = NULL;
		return NULL;
	}
	__atomic_add_fetch(&tables_bytes, CIE_SIZE + pu->units * fs + 4 +
			   pu->units * sizeof(*pu->jit), __ATOMIC_RELAXED);
	pu->base = base;
	pu->unit = unit;
	put_cie(pu->eh);
	for (size_t u = 0; u < pu->units; u++)
		put_fde(pu->eh, pu->eh + CIE_SIZE + u * fs, fs, base + u * unit, unit, undefined,
			sizeof(undefined));
	/* Registered for good: the pool's units are mapped for good too. */
	reg = register_frame_fn();
	if (reg)
		reg(pu->eh);
	/* published after the pool's table: the unwinder reads it lock-free */
	__atomic_store_n(&set->npools, set->npools + 1, __ATOMIC_RELEASE);
	return pu;
}

/* gdb's copy of unit u: the CIE and its FDE. */
static void jit_set(const struct pool_set *set, struct pool_unwind *pu, size_t u)
{
	size_t fs = set->fde_size;
	uint8_t img[CIE_SIZE + FDE_MAX];

	kp_jit_unregister(pu->jit[u]);
	memcpy(img, pu->eh, CIE_SIZE);
	memcpy(img + CIE_SIZE, pu->eh + CIE_SIZE + u * fs, fs);
	put32(img + CIE_SIZE + 4, CIE_SIZE + 4);	/* its CIE pointer here */
	pu->jit[u] = kp_jit_register(set->name, pu->base + u * pu->unit,
				     pu->base + (u + 1) * pu->unit, img, CIE_SIZE + fs);
}

/* The unit's FDE gets the instructions s (no thread runs the unit: it
 * changes in place). */
static void unit_set(struct pool_set *set, uintptr_t pool, size_t pool_size, size_t unit,
		     uintptr_t at, struct insns *s)
{
	struct pool_unwind *pu = pool_of(set, pool, pool_size, unit, true);
	uint8_t *insns;
	size_t u;

	if (!pu)
		return;
	u = (at - pool) / unit;
	if (s->full) {
		memcpy(s->b, undefined, sizeof(undefined));
		s->n = sizeof(undefined);
	}
	insns = pu->eh + CIE_SIZE + u * set->fde_size + FDE_INSNS;
	memset(insns, 0, set->fde_size - FDE_INSNS);
	memcpy(insns, s->b, s->n);
	jit_set(set, pu, u);
}

/* The unit is freed (once no thread can be inside): undefined again. */
static void unit_clear(struct pool_set *set, uintptr_t pool, size_t pool_size, size_t unit,
		       uintptr_t at)
{
	struct pool_unwind *pu = pool_of(set, pool, pool_size, unit, false);
	uint8_t *insns;
	size_t u;

	if (!pu)
		return;
	u = (at - pool) / unit;
	insns = pu->eh + CIE_SIZE + u * set->fde_size + FDE_INSNS;
	memset(insns, 0, set->fde_size - FDE_INSNS);
	memcpy(insns, undefined, sizeof(undefined));
	kp_jit_unregister(pu->jit[u]);
	pu->jit[u] = NULL;
}

void arch_detour_unwind_add(const struct detour_layout *l)
{
	struct insns s = { .cap = detours.fde_size - FDE_INSNS };

	detour_insns(&s, l);
	unit_set(&detours, l->pool, l->pool_size, l->unit, l->d, &s);
}

void arch_detour_unwind_remove(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t d)
{
	unit_clear(&detours, pool, pool_size, unit, d);
}

/* A slot's rows: from each row's offset, CFA = rsp + cfa and the return
 * address ra (the original instruction's, or a call's target), or none. */
void arch_xol_unwind_add(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t slot,
			 const struct unwind_row *rows, int n)
{
	static const uint8_t undef[] = { DW_CFA_undefined, ARCH_DWARF_RA };
	struct insns s = { .cap = slots.fde_size - FDE_INSNS };
	unsigned int cfa = 0;

	for (int i = 0; i < n; i++) {
		advance_to(&s, rows[i].off);
		if (rows[i].cfa != cfa) {
			cfa = rows[i].cfa;
			cfa_offset(&s, cfa);
		}
		if (rows[i].ra)
			ra_is(&s, rows[i].ra);
		else
			emit(&s, undef, sizeof(undef));
	}
	unit_set(&slots, pool, pool_size, unit, slot, &s);
}

void arch_xol_unwind_remove(uintptr_t pool, uintptr_t pool_size, uintptr_t unit, uintptr_t slot)
{
	unit_clear(&slots, pool, pool_size, unit, slot);
}

/* ---- the rows read back, for the library's own unwinder ---- */

/* One row of a detour: CFA = rsp + cfa_off, or the word at rsp plus
 * cfa_off (deref); the return address ra (0: none). */
struct detour_row {
	bool deref;
	unsigned int cfa_off;
	uintptr_t ra;
};

/* An unsigned LEB128 number of at most 4 bytes (what put_* writes). */
static bool get_uleb(const uint8_t **p, const uint8_t *end, unsigned int *v)
{
	unsigned int r = 0;

	for (int shift = 0; *p < end && shift < 28; shift += 7) {
		uint8_t b = *(*p)++;

		r |= (unsigned int)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

/* CFA = the word at rsp + off: the one expression detour_insns writes. */
static bool get_deref_rsp(const uint8_t *e, unsigned int len, unsigned int *off)
{
	const uint8_t *end = e + len;

	if (len < 5 || e[0] != DW_OP_breg7 || e[1] != 0 || e[2] != DW_OP_deref ||
	    e[3] != DW_OP_plus_uconst)
		return false;
	e += 4;
	return get_uleb(&e, end, off) && e == end;
}

/* Built without jump tables: the handler analysis (clobber.c) follows the
 * unwinder's code from a handler that takes stacks, and an indirect jump
 * is code it cannot see (every register would be saved for it). */
#pragma GCC push_options
#pragma GCC optimize("no-jump-tables")

/* The row at offset off of the instructions [q, end) (as detour_insns
 * writes them, the CIE's CFA = rsp before them); false on anything
 * else. */
static bool detour_row_at(const uint8_t *q, const uint8_t *end, size_t off, struct detour_row *r)
{
	size_t loc = 0;
	unsigned int reg, v, len;

	*r = (struct detour_row){ false, 0, 0 };
	while (q < end) {
		uint8_t op = *q++;

		if ((op & 0xc0) == DW_CFA_advance_loc || op == DW_CFA_advance_loc1) {
			if (op == DW_CFA_advance_loc1 && q == end)
				return false;
			loc += op == DW_CFA_advance_loc1 ? *q++ : (size_t)(op & 0x3f);
			if (loc > off)
				return true;
		} else if (op == 0) {		/* the nops after the instructions */
			return true;
		} else if (op == DW_CFA_def_cfa) {
			if (!get_uleb(&q, end, &reg) || !get_uleb(&q, end, &v) || reg != ARCH_DWARF_SP)
				return false;
			r->deref = false;
			r->cfa_off = v;
		} else if (op == DW_CFA_def_cfa_offset) {
			if (!get_uleb(&q, end, &v) || r->deref)
				return false;
			r->cfa_off = v;
		} else if (op == DW_CFA_def_cfa_expression) {
			if (!get_uleb(&q, end, &len) || len > (size_t)(end - q) ||
			    !get_deref_rsp(q, len, &v))
				return false;
			q += len;
			r->deref = true;
			r->cfa_off = v;
		} else if (op == DW_CFA_val_expression) {
			if (!get_uleb(&q, end, &reg) || !get_uleb(&q, end, &len) || len != 9 ||
			    len > (size_t)(end - q) || q[0] != DW_OP_addr || reg != ARCH_DWARF_RA)
				return false;
			memcpy(&r->ra, q + 1, sizeof(r->ra));
			q += len;
		} else if ((op & 0xc0) == DW_CFA_offset || op == DW_CFA_same_value) {
			/* where the program's rbx is: not needed here */
			if (!get_uleb(&q, end, &v))
				return false;
		} else if (op == DW_CFA_undefined) {
			if (!get_uleb(&q, end, &reg))
				return false;
			if (reg == ARCH_DWARF_RA)
				r->ra = 0;
		} else {
			return false;
		}
	}
	return true;
}

/* The pools' tables stay mapped for good and a unit's FDE changes only
 * while no thread runs the unit, so a thread inside it reads its rows as
 * they were written for the code it runs. */
bool detour_unwind_frame(uintptr_t ip, uintptr_t sp, uintptr_t *pc, uintptr_t *cfa)
{
	int n = __atomic_load_n(&detours.npools, __ATOMIC_ACQUIRE);
	size_t fs = detours.fde_size;

	for (int i = 0; i < n; i++) {
		const struct pool_unwind *pu = &detours.pools[i];
		const uint8_t *insns;
		struct detour_row r;
		uintptr_t base, c;
		size_t u;

		if (ip < pu->base || ip - pu->base >= pu->units * pu->unit)
			continue;
		u = (ip - pu->base) / pu->unit;
		insns = pu->eh + CIE_SIZE + u * fs + FDE_INSNS;
		if (!detour_row_at(insns, insns + fs - FDE_INSNS, ip - pu->base - u * pu->unit, &r) ||
		    !r.ra)
			return false;
		base = sp;
		if (r.deref && kp_load_nofault(sp, &base))
			return false;
		c = base + r.cfa_off;
		if (c < sp || (c & (sizeof(uintptr_t) - 1)))
			return false;
		*pc = r.ra;
		*cfa = c;
		return true;
	}
	return false;
}

#pragma GCC pop_options
