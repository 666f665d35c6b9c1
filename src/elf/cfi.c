/*
 * Compact unwind tables from an object's call-frame information.
 *
 * libdw evaluates the CFI program of every FDE row by row
 * (dwarf_cfi_addrframe: the rules in force at an address, and the range
 * they hold for); each row is then reduced to what an unwinder of
 * compiler-generated x86-64 code needs: the CFA as rsp or rbp plus an
 * offset, where the return address is, and where the caller's rbp is.
 * Equal neighbouring rows merge.  Rules the rows cannot hold (a CFA or
 * return address computed by a DWARF expression, as in PLT entries) are
 * marked: the unwinder uses frame pointers there.  Signal frames (FDEs
 * with the 'S' augmentation, glibc's __restore_rt) are marked as such.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "asm/dwarf.h"
#include "elf/cache.h"
#include "elf/cfi.h"

/* .debug_frame needs a Dwarf handle, whose parts of libdw cannot be linked
 * statically into a shared object (the kprobe agent links libdw.a: its
 * allocator uses initial-exec TLS).  Weak references pull nothing from an
 * archive: in the agent they are NULL and objects with only .debug_frame
 * are unwound by frame pointers; with libdw.so they are there. */
extern __typeof(dwarf_begin_elf) dwarf_begin_elf __attribute__((weak));
extern __typeof(dwarf_getcfi) dwarf_getcfi __attribute__((weak));
extern __typeof(dwarf_end) dwarf_end __attribute__((weak));
/* The same for libdw's CFI evaluation: without it (the agent) the FDEs'
 * programs are run here (cfi_interp_build). */
extern __typeof(dwarf_getcfi_elf) dwarf_getcfi_elf __attribute__((weak));
extern __typeof(dwarf_cfi_addrframe) dwarf_cfi_addrframe __attribute__((weak));
extern __typeof(dwarf_frame_info) dwarf_frame_info __attribute__((weak));
extern __typeof(dwarf_frame_cfa) dwarf_frame_cfa __attribute__((weak));
extern __typeof(dwarf_frame_register) dwarf_frame_register __attribute__((weak));
extern __typeof(dwarf_cfi_end) dwarf_cfi_end __attribute__((weak));

/* The stack pointer, frame pointer and return-address column, which the
 * rows are expressed in (named rsp/rbp below, as on x86-64). */
#define DW_REG_RBP ARCH_DWARF_FP
#define DW_REG_RSP ARCH_DWARF_SP
#define DW_REG_RA ARCH_DWARF_RA

struct row_vec {
	struct cfi_table *t;
	size_t cap;
	int err;
};

static bool same_row(const struct cfi_row *a, const struct cfi_row *b)
{
	return a->kind == b->kind && a->cfa_off == b->cfa_off && a->bp8 == b->bp8 &&
	       a->ra8 == b->ra8;
}

/* Appends r at file address pc; a row at the same pc replaces the last,
 * an equal one is not repeated. */
static void push_row(struct row_vec *v, uintptr_t pc, struct cfi_row r)
{
	struct cfi_table *t = v->t;

	if (v->err)
		return;
	r.pc = (uint32_t)(pc - t->base);
	if (t->n && t->rows[t->n - 1].pc == r.pc)
		t->n--;
	if (t->n && same_row(&t->rows[t->n - 1], &r))
		return;
	if (t->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		struct cfi_row *rows = realloc(t->rows, cap * sizeof(*rows));

		if (!rows) {
			v->err = -ENOMEM;
			return;
		}
		t->rows = rows;
		v->cap = cap;
	}
	t->rows[t->n++] = r;
}

/* A register saved at CFA + off: ops {DW_OP_call_frame_cfa[, plus_uconst off]}. */
static bool saved_at_cfa(const Dwarf_Op *ops, size_t n, long *off)
{
	if (!ops || n == 0 || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (n == 1) {
		*off = 0;
		return true;
	}
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (long)ops[1].number;
		return true;
	}
	return false;
}

/* An offset from the CFA kept in words: n with off = 8 * n in [lo, hi]. */
static bool words(long off, long lo, long hi, long *n)
{
	if (off % 8 || off / 8 < lo || off / 8 > hi)
		return false;
	*n = off / 8;
	return true;
}

/* One libdw frame reduced to a row. */
static struct cfi_row reduce(Dwarf_Frame *fr, bool signal)
{
	struct cfi_row r = { .kind = CFI_EXPR, .bp8 = CFI_BP_LOST, .ra8 = 1 };
	Dwarf_Op mem[3], *ops;
	size_t n;
	long off, w;

	if (signal) {
		r.kind = CFI_SIGNAL;
		return r;
	}
	if (dwarf_frame_register(fr, DW_REG_RA, mem, &ops, &n) != 0)
		return r;
	/* n == 0: undefined (ops == mem) or the same value (ops NULL), which
	 * for a return address means the same: the outermost frame */
	if (n == 0) {
		r.kind = CFI_END;
		return r;
	}
	if (!saved_at_cfa(ops, n, &off) || !words(-off, 0, 31, &w))
		return r;
	r.ra8 = (uint8_t)w;
	if (dwarf_frame_register(fr, DW_REG_RBP, mem, &ops, &n) == 0) {
		if (n == 0 && !ops)
			r.bp8 = CFI_BP_SAME;
		else if (saved_at_cfa(ops, n, &off) && words(off, INT8_MIN + 1, INT8_MAX - 1, &w))
			r.bp8 = (int8_t)w;
	}
	if (dwarf_frame_cfa(fr, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_bregx ||
	    (ops[0].number != DW_REG_RSP && ops[0].number != DW_REG_RBP) ||
	    (int64_t)ops[0].number2 < INT16_MIN || (int64_t)ops[0].number2 > INT16_MAX)
		return r;
	r.kind = ops[0].number == DW_REG_RSP ? CFI_SP : CFI_BP;
	r.cfa_off = (int16_t)ops[0].number2;
	return r;
}

/* The rows of one FDE's range [start, end). */
static void walk_fde(Dwarf_CFI *cfi, uintptr_t start, uintptr_t end, struct row_vec *v)
{
	static const struct cfi_row none = { .kind = CFI_NONE, .bp8 = CFI_BP_SAME, .ra8 = 1 };
	uintptr_t pc = start;

	while (pc < end && !v->err) {
		Dwarf_Frame *fr;
		Dwarf_Addr lo, hi;
		bool signal;

		if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0)
			break;
		if (dwarf_frame_info(fr, &lo, &hi, &signal) < 0 || hi <= pc) {
			free(fr);
			break;
		}
		push_row(v, pc, reduce(fr, signal));
		free(fr);
		pc = hi < end ? hi : end;
	}
	/* Until the next FDE: no information (replaced if one starts here). */
	push_row(v, end, none);
}

static Elf_Data *section_data(Elf *elf, const char *want)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, want))
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

static int cmp_kfde(const void *a, const void *b)
{
	const struct kfde *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The FDE ranges of .debug_frame, where addresses are absolute (8 bytes). */
static int debug_frame_fdes(Elf *elf, struct kfde **out, size_t *count)
{
	Elf_Data *d = section_data(elf, ".debug_frame");
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	Dwarf_Off off = 0, next;
	size_t n = 0, cap = 0;
	struct kfde *v = NULL;

	*out = NULL;
	*count = 0;
	if (!d || !d->d_buf || !ident || gelf_getclass(elf) != ELFCLASS64)
		return -ENOENT;
	for (; off != (Dwarf_Off)-1; off = next) {
		Dwarf_CFI_Entry e;
		uint64_t loc, len;

		if (dwarf_next_cfi(ident, d, false, off, &next, &e) != 0)
			break;
		if (dwarf_cfi_cie_p(&e) || e.fde.end - e.fde.start < 16)
			continue;
		memcpy(&loc, e.fde.start, 8);
		memcpy(&len, e.fde.start + 8, 8);
		if (!len)
			continue;
		if (n == cap) {
			struct kfde *nv = realloc(v, (cap = cap ? cap * 2 : 256) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (struct kfde){ loc, loc + len };
	}
	qsort(v, n, sizeof(*v), cmp_kfde);
	*out = v;
	*count = n;
	return n ? 0 : -ENOENT;
}

/* lookup[b]: the row covering the start of block b. */
static int build_lookup(struct cfi_table *t)
{
	size_t r = 0;

	if (!t->n)
		return 0;
	t->nblocks = ((size_t)t->rows[t->n - 1].pc >> CFI_BLOCK_SHIFT) + 1;
	t->lookup = malloc((t->nblocks + 1) * sizeof(*t->lookup));
	if (!t->lookup)
		return -ENOMEM;
	for (size_t b = 0; b <= t->nblocks; b++) {
		uintptr_t at = (uintptr_t)b << CFI_BLOCK_SHIFT;

		while (r + 1 < t->n && t->rows[r + 1].pc <= at)
			r++;
		t->lookup[b] = (uint32_t)r;
	}
	return 0;
}


/* ---- the same without libdw's CFI evaluation ----
 *
 * libdw's evaluation allocates with its per-thread allocator, whose
 * initial-exec TLS a shared object cannot hold when libdw is linked
 * statically (the kprobe agent): there the FDEs' programs are run here.
 * The two must give the same rows (tests/test_stack.c compares them). */

#define MAX_STATE 16

struct reg_rule {
	uint8_t how;		/* RULE_* */
	long off;
};

enum { RULE_SAME, RULE_UNDEF, RULE_OFFSET, RULE_OTHER };

struct cfa_state {
	unsigned int cfa_reg;
	long cfa_off;
	bool cfa_expr;
	struct reg_rule ra, bp;
};

/* A state reduced to a row (the same reduction as reduce()). */
static struct cfi_row state_row(const struct cfa_state *st, bool signal)
{
	struct cfi_row r = { .kind = CFI_EXPR, .bp8 = CFI_BP_LOST, .ra8 = 1 };
	long w;

	if (signal) {
		r.kind = CFI_SIGNAL;
		return r;
	}
	if (st->ra.how == RULE_UNDEF || st->ra.how == RULE_SAME) {
		r.kind = CFI_END;
		return r;
	}
	if (st->ra.how != RULE_OFFSET || !words(-st->ra.off, 0, 31, &w))
		return r;
	r.ra8 = (uint8_t)w;
	if (st->bp.how == RULE_SAME)
		r.bp8 = CFI_BP_SAME;
	else if (st->bp.how == RULE_OFFSET && words(st->bp.off, INT8_MIN + 1, INT8_MAX - 1, &w))
		r.bp8 = (int8_t)w;
	if (st->cfa_expr || (st->cfa_reg != DW_REG_RSP && st->cfa_reg != DW_REG_RBP) ||
	    st->cfa_off < INT16_MIN || st->cfa_off > INT16_MAX)
		return r;
	r.kind = st->cfa_reg == DW_REG_RSP ? CFI_SP : CFI_BP;
	r.cfa_off = (int16_t)st->cfa_off;
	return r;
}


struct eh_reader {
	const uint8_t *base;	/* section data */
	uintptr_t addr;		/* its address */
};

static bool uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	unsigned int shift = 0;

	*v = 0;
	while (*p < end && shift < 64) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

static bool sleb(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	unsigned int shift = 0;
	uint64_t r = 0;
	uint8_t b = 0;

	while (*p < end && shift < 64) {
		b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				r |= ~(uint64_t)0 << shift;
			*v = (int64_t)r;
			return true;
		}
	}
	return false;
}

/* A pointer of encoding enc at *p (DW_EH_PE_*: the formats x86-64 uses,
 * absolute or pc-relative). */
static bool read_encoded(const struct eh_reader *r, uint8_t enc, const uint8_t **p,
			 const uint8_t *end, uint64_t *v)
{
	uintptr_t here = r->addr + (uintptr_t)(*p - r->base);
	size_t n;
	int64_t sv;

	if (enc == DW_EH_PE_omit)
		return false;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: case DW_EH_PE_udata8: case DW_EH_PE_sdata8: n = 8; break;
	case DW_EH_PE_udata4: case DW_EH_PE_sdata4: n = 4; break;
	case DW_EH_PE_udata2: case DW_EH_PE_sdata2: n = 2; break;
	case DW_EH_PE_uleb128:
		return uleb(p, end, v) && (enc & 0x70) == 0;
	case DW_EH_PE_sleb128:
		if (!sleb(p, end, &sv))
			return false;
		*v = (uint64_t)sv;
		return (enc & 0x70) == 0;
	default:
		return false;
	}
	if ((size_t)(end - *p) < n)
		return false;
	if (n == 8) {
		memcpy(v, *p, 8);
	} else if (n == 4) {
		uint32_t u;

		memcpy(&u, *p, 4);
		*v = (enc & 0x08) ? (uint64_t)(int64_t)(int32_t)u : u;
	} else {
		uint16_t u;

		memcpy(&u, *p, 2);
		*v = (enc & 0x08) ? (uint64_t)(int64_t)(int16_t)u : u;
	}
	*p += n;
	switch (enc & 0x70) {
	case 0:
		return true;
	case DW_EH_PE_pcrel:
		*v += here;
		return true;
	default:
		return false;
	}
}

/* What a CIE says: alignment factors, the FDE pointer encoding, a signal
 * frame, and the state after its initial instructions. */
struct cie_info {
	Dwarf_Off off;
	uint64_t caf;
	int64_t daf;
	unsigned int ra_reg;
	uint8_t enc;
	bool signal, zaug;
	const uint8_t *insns, *insns_end;
};

static bool cie_parse(const struct eh_reader *r, const Dwarf_CIE *c, struct cie_info *ci)
{
	const char *aug = c->augmentation;
	const uint8_t *p = c->augmentation_data, *end = p + c->augmentation_data_size;
	uint64_t skip;

	ci->caf = c->code_alignment_factor;
	ci->daf = c->data_alignment_factor;
	ci->ra_reg = c->return_address_register;
	ci->insns = c->initial_instructions;
	ci->insns_end = c->initial_instructions_end;
	ci->enc = DW_EH_PE_absptr;
	ci->signal = false;
	ci->zaug = aug[0] == 'z';
	if (!ci->zaug)
		return aug[0] == '\0';
	for (aug++; *aug; aug++) {
		switch (*aug) {
		case 'S':
			ci->signal = true;
			break;
		case 'B':
			break;
		case 'R':
			if (p >= end)
				return false;
			ci->enc = *p++;
			break;
		case 'L':
			p++;
			break;
		case 'P': {
			uint8_t penc;

			if (p >= end)
				return false;
			penc = *p++;
			if (!read_encoded(r, penc & ~DW_EH_PE_indirect, &p, end, &skip))
				return false;
			break;
		}
		default:
			return false;
		}
	}
	return true;
}

static struct reg_rule *rule_of(struct cfa_state *st, uint64_t reg, unsigned int ra_reg)
{
	if (reg == ra_reg)
		return &st->ra;
	return reg == DW_REG_RBP ? &st->bp : NULL;
}

/* Runs CFI instructions [p, end): rows go to v from loc (FDE programs),
 * none for the CIE's (init: the state restore goes back to).  Returns
 * false on an instruction it does not know: the rest is not described. */
static bool run_cfi(const struct eh_reader *r, const struct cie_info *ci, const uint8_t *p,
		    const uint8_t *end, struct cfa_state *st, const struct cfa_state *init,
		    uintptr_t *loc, struct row_vec *v, bool signal)
{
	struct cfa_state stack[MAX_STATE];
	int depth = 0;

	while (p < end) {
		uint8_t op = *p++, lo = op & 0x3f;
		uint64_t reg, u, delta = 0;
		int64_t sv;
		struct reg_rule *rr;
		bool advance = false;

		switch (op >> 6) {
		case 1:
			delta = lo * ci->caf;
			advance = true;
			break;
		case 2:
			if (!uleb(&p, end, &u))
				return false;
			if ((rr = rule_of(st, lo, ci->ra_reg)))
				*rr = (struct reg_rule){ RULE_OFFSET, (long)u * ci->daf };
			continue;
		case 3:
			if ((rr = rule_of(st, lo, ci->ra_reg)))
				*rr = *rule_of((struct cfa_state *)init, lo, ci->ra_reg);
			continue;
		}
		if (!advance) {
			switch (op) {
			case DW_CFA_nop:
				continue;
			case DW_CFA_set_loc:
				if (!read_encoded(r, ci->enc, &p, end, &u) || u < *loc)
					return false;
				delta = u - *loc;
				break;
			case DW_CFA_advance_loc1:
				if (p + 1 > end)
					return false;
				delta = *p++ * ci->caf;
				break;
			case DW_CFA_advance_loc2: {
				uint16_t d;

				if (p + 2 > end)
					return false;
				memcpy(&d, p, 2);
				p += 2;
				delta = d * ci->caf;
				break;
			}
			case DW_CFA_advance_loc4: {
				uint32_t d;

				if (p + 4 > end)
					return false;
				memcpy(&d, p, 4);
				p += 4;
				delta = d * ci->caf;
				break;
			}
			case DW_CFA_offset_extended:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OFFSET, (long)u * ci->daf };
				continue;
			case DW_CFA_offset_extended_sf:
				if (!uleb(&p, end, &reg) || !sleb(&p, end, &sv))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OFFSET, (long)(sv * ci->daf) };
				continue;
			case DW_CFA_GNU_negative_offset_extended:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OFFSET, -(long)u * ci->daf };
				continue;
			case DW_CFA_restore_extended:
				if (!uleb(&p, end, &reg))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = *rule_of((struct cfa_state *)init, reg, ci->ra_reg);
				continue;
			case DW_CFA_undefined:
			case DW_CFA_same_value:
				if (!uleb(&p, end, &reg))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ op == DW_CFA_undefined ? RULE_UNDEF : RULE_SAME, 0 };
				continue;
			case DW_CFA_register:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OTHER, 0 };
				continue;
			case DW_CFA_remember_state:
				if (depth == MAX_STATE)
					return false;
				stack[depth++] = *st;
				continue;
			case DW_CFA_restore_state:
				if (!depth)
					return false;
				/* the CFA rule is restored too (as libdw and libgcc do) */
				*st = stack[--depth];
				continue;
			case DW_CFA_def_cfa:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u))
					return false;
				st->cfa_reg = (unsigned int)reg;
				st->cfa_off = (long)u;
				st->cfa_expr = false;
				continue;
			case DW_CFA_def_cfa_sf:
				if (!uleb(&p, end, &reg) || !sleb(&p, end, &sv))
					return false;
				st->cfa_reg = (unsigned int)reg;
				st->cfa_off = (long)(sv * ci->daf);
				st->cfa_expr = false;
				continue;
			case DW_CFA_def_cfa_register:
				if (!uleb(&p, end, &reg))
					return false;
				st->cfa_reg = (unsigned int)reg;
				st->cfa_expr = false;
				continue;
			case DW_CFA_def_cfa_offset:
				if (!uleb(&p, end, &u))
					return false;
				st->cfa_off = (long)u;
				continue;
			case DW_CFA_def_cfa_offset_sf:
				if (!sleb(&p, end, &sv))
					return false;
				st->cfa_off = (long)(sv * ci->daf);
				continue;
			case DW_CFA_def_cfa_expression:
				if (!uleb(&p, end, &u) || u > (uint64_t)(end - p))
					return false;
				p += u;
				st->cfa_expr = true;
				continue;
			case DW_CFA_expression:
			case DW_CFA_val_expression:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u) || u > (uint64_t)(end - p))
					return false;
				p += u;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OTHER, 0 };
				continue;
			case DW_CFA_val_offset:
				if (!uleb(&p, end, &reg) || !uleb(&p, end, &u))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OTHER, 0 };
				continue;
			case DW_CFA_val_offset_sf:
				if (!uleb(&p, end, &reg) || !sleb(&p, end, &sv))
					return false;
				if ((rr = rule_of(st, reg, ci->ra_reg)))
					*rr = (struct reg_rule){ RULE_OTHER, 0 };
				continue;
			case DW_CFA_GNU_args_size:
				if (!uleb(&p, end, &u))
					return false;
				continue;
			default:
				return false;
			}
		}
		/* a new row at loc + delta: the one so far covers [loc, there) */
		if (v && delta)
			push_row(v, *loc, state_row(st, signal));
		*loc += delta;
	}
	return true;
}

/* One FDE run here: its rows to v. */
static void interp_fde(const struct eh_reader *r, const struct cie_info *ci, const Dwarf_FDE *fde,
		       struct row_vec *v, struct kfde *range, uintptr_t base)
{
	static const struct cfi_row none = { .kind = CFI_NONE, .bp8 = CFI_BP_SAME, .ra8 = 1 };
	struct cfa_state init = { .cfa_reg = DW_REG_RSP, .ra = { RULE_UNDEF, 0 },
				  .bp = { RULE_SAME, 0 } }, st;
	const uint8_t *p = fde->start;
	uint64_t start, len, auglen;
	uintptr_t loc;

	range->start = range->end = 0;
	if (!read_encoded(r, ci->enc, &p, fde->end, &start) ||
	    !read_encoded(r, ci->enc & 0x0f, &p, fde->end, &len) || !start || !len ||
	    start + len - base > UINT32_MAX)
		return;
	if (ci->zaug) {
		if (!uleb(&p, fde->end, &auglen) || auglen > (uint64_t)(fde->end - p))
			return;
		p += auglen;
	}
	range->start = start;
	range->end = start + len;
	loc = start;
	if (!run_cfi(r, ci, ci->insns, ci->insns_end, &init, &init, &loc, NULL, false))
		return;
	st = init;
	loc = start;
	if (!run_cfi(r, ci, p, fde->end, &st, &init, &loc, v, ci->signal)) {
		/* the rest of the FDE is not described */
		st.cfa_expr = true;
	}
	if (loc < start + len)
		push_row(v, loc, state_row(&st, ci->signal));
	push_row(v, start + len, none);
}

struct fde_ref {
	uintptr_t start;
	Dwarf_Off off;
};

static int cmp_fde_ref(const void *a, const void *b)
{
	const struct fde_ref *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* .eh_frame's FDEs, run here in address order. */
int cfi_interp_build(Elf *elf, struct cfi_table *out)
{
	Elf_Scn *scn = NULL;
	Elf_Data *d = NULL;
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	struct eh_reader r = { 0 };
	struct row_vec v = { .t = out };
	struct fde_ref *refs = NULL;
	size_t nrefs = 0, cap = 0, shstrndx;
	struct cie_info ci = { .off = (Dwarf_Off)-1 };
	Dwarf_Off off, next;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (!ident || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".eh_frame")) {
			d = elf_getdata(scn, NULL);
			r.addr = sh.sh_addr;
			break;
		}
	}
	if (!d || !d->d_buf || !d->d_size)
		return -ENOENT;
	r.base = d->d_buf;
	/* Pass 1: the FDEs and their starts, to run them in address order. */
	for (off = 0; off != (Dwarf_Off)-1; off = next) {
		Dwarf_CFI_Entry e;
		const uint8_t *p;
		uint64_t start;

		if (dwarf_next_cfi(ident, d, true, off, &next, &e) != 0)
			break;
		if (dwarf_cfi_cie_p(&e))
			continue;
		if (e.fde.CIE_pointer != ci.off) {
			Dwarf_CFI_Entry c;
			Dwarf_Off cn;

			if (dwarf_next_cfi(ident, d, true, e.fde.CIE_pointer, &cn, &c) != 0 ||
			    !dwarf_cfi_cie_p(&c) || !cie_parse(&r, &c.cie, &ci))
				continue;
			ci.off = e.fde.CIE_pointer;
		}
		p = e.fde.start;
		if (!read_encoded(&r, ci.enc, &p, e.fde.end, &start) || !start)
			continue;
		if (nrefs == cap) {
			struct fde_ref *n = realloc(refs, (cap = cap ? cap * 2 : 1024) * sizeof(*refs));

			if (!n) {
				free(refs);
				return -ENOMEM;
			}
			refs = n;
		}
		refs[nrefs++] = (struct fde_ref){ start, off };
	}
	if (!nrefs) {
		free(refs);
		return -ENOENT;
	}
	qsort(refs, nrefs, sizeof(*refs), cmp_fde_ref);
	out->base = refs[0].start;
	ci.off = (Dwarf_Off)-1;
	for (size_t i = 0; i < nrefs && !v.err; i++) {
		Dwarf_CFI_Entry e, c;
		Dwarf_Off cn;
		struct kfde range;

		if (dwarf_next_cfi(ident, d, true, refs[i].off, &next, &e) != 0)
			continue;
		if (e.fde.CIE_pointer != ci.off) {
			if (dwarf_next_cfi(ident, d, true, e.fde.CIE_pointer, &cn, &c) != 0 ||
			    !cie_parse(&r, &c.cie, &ci))
				continue;
			ci.off = e.fde.CIE_pointer;
		}
		interp_fde(&r, &ci, &e.fde, &v, &range, out->base);
		out->code_bytes += range.end - range.start;
	}
	free(refs);
	err = v.err;
	if (!err && out->n < v.cap) {
		struct cfi_row *rows = realloc(out->rows, out->n * sizeof(*rows));

		if (rows)
			out->rows = rows;
	}
	if (!err)
		err = build_lookup(out);
	if (err)
		cfi_table_free(out);
	return err;
}

static bool have_libdw_cfi(void)
{
	return dwarf_getcfi_elf && dwarf_cfi_addrframe && dwarf_frame_info && dwarf_frame_cfa &&
	       dwarf_frame_register && dwarf_cfi_end;
}

int cfi_table_build(Elf *elf, struct cfi_table *out)
{
	int err;

	if (!have_libdw_cfi())
		return cfi_interp_build(elf, out);
	err = cfi_libdw_build(elf, out);
	return err;
}

int cfi_libdw_build(Elf *elf, struct cfi_table *out)
{
	struct row_vec v = { .t = out };
	Dwarf *dw = NULL;
	Dwarf_CFI *cfi;
	struct kfde *fdes;
	size_t nfdes;
	int err;

	memset(out, 0, sizeof(*out));
	if (!have_libdw_cfi())
		return -ENOSYS;
	err = kfde_table_build(elf, &fdes, &nfdes);
	if (err)
		return err;
	if (nfdes) {
		cfi = dwarf_getcfi_elf(elf);
	} else {
		free(fdes);
		if (!dwarf_begin_elf || !dwarf_getcfi || !dwarf_end)
			return -ENOENT;
		err = debug_frame_fdes(elf, &fdes, &nfdes);
		if (err)
			return err;
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		cfi = dw ? dwarf_getcfi(dw) : NULL;
	}
	if (!cfi) {
		err = -ENOENT;
		goto out;
	}
	out->base = fdes[0].start;
	for (size_t i = 0; i < nfdes && !v.err; i++) {
		/* rows are 32-bit offsets from the lowest FDE */
		if (fdes[i].end - out->base > UINT32_MAX || fdes[i].start < out->base)
			continue;
		out->code_bytes += fdes[i].end - fdes[i].start;
		walk_fde(cfi, fdes[i].start, fdes[i].end, &v);
	}
	err = v.err;
	if (!err && out->n < v.cap) {
		struct cfi_row *rows = realloc(out->rows, out->n * sizeof(*rows));

		if (rows)
			out->rows = rows;
	}
	if (!err)
		err = build_lookup(out);
out:
	if (dw)
		dwarf_end(dw);
	else if (cfi)
		dwarf_cfi_end(cfi);
	free(fdes);
	if (err)
		cfi_table_free(out);
	return err;
}

void cfi_table_free(struct cfi_table *t)
{
	free(t->rows);
	free(t->lookup);
	t->rows = NULL;
	t->lookup = NULL;
	t->n = t->nblocks = 0;
}
