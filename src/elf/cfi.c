/*
 * Compact unwind tables from an object's call-frame information.
 *
 * The rules in force at every address of every FDE are found either by
 * running the FDEs' programs here (cfi_interp_build, .eh_frame) or by
 * libdw's evaluation (cfi_libdw_build: dwarf_cfi_addrframe gives the rules
 * at an address and the range they hold for; it also reads .debug_frame).
 * Either way each range's rules are reduced, by one function, to what an
 * unwinder of compiler-generated code needs: the CFA as the stack or frame
 * pointer plus an offset, where the return address is, and where the
 * caller's frame pointer is.  Equal neighbouring rows merge.  Rules the
 * rows cannot hold (a CFA or return address computed by a DWARF
 * expression, as in PLT entries) are marked: the unwinder uses frame
 * pointers there.  The two expressions the library's own save code uses
 * are held (CFI_CHAIN rows, below).  Signal frames (FDEs with the 'S'
 * augmentation whose return address is not on the stack: glibc's
 * __restore_rt) are marked as such.
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
 * are unwound by frame pointers; with libdw.so they are there.  The same
 * for libdw's CFI evaluation, which the tables of .eh_frame do not need
 * (the interpreter below gives the same rows, faster). */
extern __typeof(dwarf_begin_elf) dwarf_begin_elf __attribute__((weak));
extern __typeof(dwarf_getcfi) dwarf_getcfi __attribute__((weak));
extern __typeof(dwarf_end) dwarf_end __attribute__((weak));
extern __typeof(dwarf_getcfi_elf) dwarf_getcfi_elf __attribute__((weak));
extern __typeof(dwarf_cfi_addrframe) dwarf_cfi_addrframe __attribute__((weak));
extern __typeof(dwarf_frame_info) dwarf_frame_info __attribute__((weak));
extern __typeof(dwarf_frame_cfa) dwarf_frame_cfa __attribute__((weak));
extern __typeof(dwarf_frame_register) dwarf_frame_register __attribute__((weak));
extern __typeof(dwarf_cfi_end) dwarf_cfi_end __attribute__((weak));

/* ---- the rules of a range, and their reduction to a row ---- */

/* How a register is recovered (of those the rows keep). */
enum { RULE_SAME, RULE_UNDEF, RULE_OFFSET, RULE_OTHER, RULE_CHAIN };

struct reg_rule {
	uint8_t how;		/* RULE_* */
	long off;		/* RULE_OFFSET: saved at CFA + off; RULE_CHAIN: below */
	long off2;		/* RULE_CHAIN: the value is **(*(CFA + off) + off2) */
};

/* The rules in force over a range of code, as far as the rows need them. */
struct frame_rules {
	unsigned int cfa_reg;	/* DWARF register number */
	long cfa_off;
	bool cfa_expr;		/* the CFA is a DWARF expression (not the one below) */
	bool cfa_at_sp;		/* the CFA is the word at rsp + cfa_at, plus cfa_off */
	long cfa_at;
	struct reg_rule ra, fp;
};

/* Between FDEs, and past the end of the last: no information. */
static const struct cfi_rule no_cfi = { .kind = CFI_NONE, .bp8 = CFI_BP_SAME, .ra8 = 1 };

/* An offset from the CFA kept in words: n with off = 8 * n in [lo, hi]. */
static bool words(long off, long lo, long hi, long *n)
{
	if (off % 8 || off / 8 < lo || off / 8 > hi)
		return false;
	*n = off / 8;
	return true;
}

/* A range where the return address is still in the link register (arm64:
 * a function's first instructions, leaves): a rule when the CFA is the
 * stack pointer plus an offset and the frame pointer is untouched. */
static struct cfi_rule lr_rule(const struct frame_rules *st)
{
	struct cfi_rule r = { .kind = CFI_EXPR, .bp8 = CFI_BP_LOST, .ra8 = 1 };
	long w;

	if (st->cfa_expr || st->cfa_at_sp || st->cfa_reg != ARCH_DWARF_SP || st->fp.how != RULE_SAME ||
	    !words(st->cfa_off, CFI_CFA8_MIN, CFI_CFA8_MAX, &w))
		return r;
	r.kind = CFI_LR;
	r.bp8 = CFI_BP_SAME;
	r.cfa8 = (int32_t)w;
	return r;
}

/* A range of the library's save code, as it describes itself: a frame
 * standing for the probed instruction, which it reaches through two
 * pointers (RULE_CHAIN), with rbp kept and the CFA at a base the rows
 * can hold.  CFI_EXPR where it is not one. */
static struct cfi_rule chain_rule(const struct frame_rules *st)
{
	struct cfi_rule r = { .kind = CFI_EXPR, .bp8 = CFI_BP_LOST, .ra8 = 1 };
	enum cfi_chain_base base;
	long off8, below8;

	if (st->cfa_expr || st->fp.how != RULE_SAME || st->ra.off2 < INT8_MIN ||
	    st->ra.off2 > INT8_MAX || !words(-st->ra.off, 0, CFI_RA8_MAX, &below8) ||
	    !words(st->cfa_off, 0, CFI_CHAIN_OFF_MAX, &off8))
		return r;
	if (st->cfa_at_sp && st->cfa_reg == ARCH_DWARF_SP && (st->cfa_at == 0 || st->cfa_at == 8))
		base = st->cfa_at ? CFI_CHAIN_AT_SP8 : CFI_CHAIN_AT_SP;
	else if (!st->cfa_at_sp && st->cfa_reg == ARCH_DWARF_SP)
		base = CFI_CHAIN_SP;
	else if (!st->cfa_at_sp && st->cfa_reg == ARCH_DWARF_AUX)
		base = CFI_CHAIN_AUX;
	else
		return r;
	r.kind = CFI_CHAIN;
	r.cfa8 = cfi_chain_cfa8(base, (unsigned int)off8);
	r.bp8 = (int8_t)st->ra.off2;
	r.ra8 = (uint32_t)below8;
	return r;
}

/* What the unwinder keeps of a range's rules. */
static struct cfi_rule reduce(const struct frame_rules *st, bool signal)
{
	struct cfi_rule r = { .kind = CFI_EXPR, .bp8 = CFI_BP_LOST, .ra8 = 1 };
	long w;

	if (st->ra.how == RULE_CHAIN)
		return chain_rule(st);
	/* A signal frame (the kernel's, through __restore_rt) keeps the
	 * return address in the ucontext; one whose return address is on
	 * the stack, as a call left it, is unwound as a call's frame. */
	if (signal && st->ra.how != RULE_OFFSET) {
		r.kind = CFI_SIGNAL;
		return r;
	}
	/* the same value for a return address that arrives in a link
	 * register: it is still there */
	if (st->ra.how == RULE_SAME && ARCH_DWARF_RA_IN_LR)
		return lr_rule(st);
	/* undefined, or the same value, means the same for a return address
	 * elsewhere: the outermost frame */
	if (st->ra.how == RULE_UNDEF || st->ra.how == RULE_SAME) {
		r.kind = CFI_END;
		return r;
	}
	if (st->ra.how != RULE_OFFSET || !words(-st->ra.off, 0, CFI_RA8_MAX, &w))
		return r;
	r.ra8 = (uint32_t)w;
	if (st->fp.how == RULE_SAME)
		r.bp8 = CFI_BP_SAME;
	else if (st->fp.how == RULE_OFFSET && words(st->fp.off, INT8_MIN + 1, INT8_MAX - 1, &w))
		r.bp8 = (int8_t)w;
	if (st->cfa_expr || st->cfa_at_sp ||
	    (st->cfa_reg != ARCH_DWARF_SP && st->cfa_reg != ARCH_DWARF_FP) ||
	    !words(st->cfa_off, CFI_CFA8_MIN, CFI_CFA8_MAX, &w))
		return r;
	r.kind = st->cfa_reg == ARCH_DWARF_SP ? CFI_SP : CFI_BP;
	r.cfa8 = (int32_t)w;
	return r;
}

/* ---- the table being built ---- */

struct row_vec {
	struct cfi_table *t;
	size_t cap;
	int err;
};

static bool same_rule(struct cfi_rule a, struct cfi_rule b)
{
	return a.kind == b.kind && a.cfa8 == b.cfa8 && a.bp8 == b.bp8 && a.ra8 == b.ra8;
}

/* Appends the rule from file address pc on; a row at the same pc replaces
 * the last, an equal one is not repeated. */
static void push_row(struct row_vec *v, uintptr_t pc, struct cfi_rule r)
{
	struct cfi_table *t = v->t;
	uint32_t at = (uint32_t)(pc - t->base);

	if (v->err)
		return;
	if (t->n && t->rows[t->n - 1].pc == at)
		t->n--;
	if (t->n && same_rule(t->rows[t->n - 1].r, r))
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
	t->rows[t->n++] = (struct cfi_row){ at, r };
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

/* The rows are all there: trimmed, indexed; or freed after an error. */
static int table_finish(struct row_vec *v)
{
	struct cfi_table *t = v->t;
	int err = v->err;

	if (!err && t->n < v->cap) {
		struct cfi_row *rows = realloc(t->rows, t->n * sizeof(*rows));

		if (rows)
			t->rows = rows;
	}
	if (!err)
		err = build_lookup(t);
	if (err)
		cfi_table_free(t);
	return err;
}

/* The named section's data (not NOBITS), and its address in *addr. */
static Elf_Data *section_data(Elf *elf, const char *want, uintptr_t *addr)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, want))
			continue;
		d = elf_getdata(scn, NULL);
		if (addr)
			*addr = sh.sh_addr;
		return d && d->d_buf && d->d_size ? d : NULL;
	}
	return NULL;
}

/* ---- the two DWARF expressions the rows hold ----
 *
 * Both as the library's save code writes them (arch/x86_64/
 * detour_common.S), on operations decoded by libdw or by decode_ops(). */

/* CFA = the word at rsp + at, plus off: {breg(sp) at, deref[, plus_uconst off]}. */
static bool cfa_word_at_sp(const Dwarf_Op *ops, size_t n, struct frame_rules *st)
{
	if ((n != 2 && n != 3) || ops[0].atom != DW_OP_breg0 + ARCH_DWARF_SP ||
	    ops[1].atom != DW_OP_deref || (n == 3 && ops[2].atom != DW_OP_plus_uconst))
		return false;
	st->cfa_reg = ARCH_DWARF_SP;
	st->cfa_at = (long)(int64_t)ops[0].number;
	st->cfa_off = n == 3 ? (long)ops[2].number : 0;
	st->cfa_at_sp = true;
	st->cfa_expr = false;
	return true;
}

/* A value **(*(CFA - below) + off2), the CFA pushed first:
 * {constu below, minus, deref, plus_uconst off2, deref, deref}. */
static bool value_chain(const Dwarf_Op *ops, size_t n, struct reg_rule *rr)
{
	static const uint8_t want[] = { DW_OP_constu, DW_OP_minus, DW_OP_deref, DW_OP_plus_uconst,
					DW_OP_deref, DW_OP_deref };

	if (n != sizeof(want))
		return false;
	for (size_t i = 0; i < n; i++)
		if (ops[i].atom != want[i])
			return false;
	if (ops[0].number > (1u << 20) || ops[3].number > (1u << 20))
		return false;
	*rr = (struct reg_rule){ RULE_CHAIN, -(long)ops[0].number, (long)ops[3].number };
	return true;
}

/* ---- with libdw's CFI evaluation ---- */

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

static struct reg_rule libdw_rule(Dwarf_Frame *fr, int reg)
{
	Dwarf_Op mem[3], *ops;
	struct reg_rule rr;
	size_t n;
	long off;

	if (dwarf_frame_register(fr, reg, mem, &ops, &n) != 0)
		return (struct reg_rule){ RULE_OTHER, 0, 0 };
	/* no operations: undefined (ops is mem) or the same value (NULL) */
	if (n == 0)
		return (struct reg_rule){ ops ? RULE_UNDEF : RULE_SAME, 0, 0 };
	if (saved_at_cfa(ops, n, &off))
		return (struct reg_rule){ RULE_OFFSET, off, 0 };
	/* a val_expression: the CFA pushed, then the expression's value */
	if (n > 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[n - 1].atom == DW_OP_stack_value &&
	    value_chain(ops + 1, n - 2, &rr))
		return rr;
	return (struct reg_rule){ RULE_OTHER, 0, 0 };
}

static struct frame_rules libdw_rules(Dwarf_Frame *fr)
{
	struct frame_rules st = { .cfa_expr = true };
	Dwarf_Op *ops;
	size_t n;

	st.ra = libdw_rule(fr, ARCH_DWARF_RA);
	st.fp = libdw_rule(fr, ARCH_DWARF_FP);
	if (dwarf_frame_cfa(fr, &ops, &n) != 0)
		return st;
	if (n == 1 && ops[0].atom == DW_OP_bregx) {
		st.cfa_expr = false;
		st.cfa_reg = (unsigned int)ops[0].number;
		st.cfa_off = (long)(int64_t)ops[0].number2;
	} else {
		cfa_word_at_sp(ops, n, &st);
	}
	return st;
}

/* The rows of one FDE's range [start, end). */
static void walk_fde(Dwarf_CFI *cfi, uintptr_t start, uintptr_t end, struct row_vec *v)
{
	uintptr_t pc = start;

	while (pc < end && !v->err) {
		Dwarf_Frame *fr;
		Dwarf_Addr lo, hi;
		bool signal;
		struct frame_rules st;

		if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0)
			break;
		if (dwarf_frame_info(fr, &lo, &hi, &signal) < 0 || hi <= pc) {
			free(fr);
			break;
		}
		st = libdw_rules(fr);
		free(fr);
		push_row(v, pc, reduce(&st, signal));
		pc = hi < end ? hi : end;
	}
	/* Until the next FDE: no information (replaced if one starts here). */
	push_row(v, end, no_cfi);
}

static int cmp_kfde(const void *a, const void *b)
{
	const struct kfde *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The FDE ranges of .debug_frame, where addresses are absolute (8 bytes). */
static int debug_frame_fdes(Elf *elf, struct kfde **out, size_t *count)
{
	Elf_Data *d = section_data(elf, ".debug_frame", NULL);
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	Dwarf_Off off = 0, next;
	size_t n = 0, cap = 0;
	struct kfde *v = NULL;

	*out = NULL;
	*count = 0;
	if (!d || !ident || gelf_getclass(elf) != ELFCLASS64)
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

static bool have_libdw_cfi(void)
{
	return dwarf_getcfi_elf && dwarf_cfi_addrframe && dwarf_frame_info && dwarf_frame_cfa &&
	       dwarf_frame_register && dwarf_cfi_end;
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
	err = table_finish(&v);
out:
	if (dw)
		dwarf_end(dw);
	else if (cfi)
		dwarf_cfi_end(cfi);
	free(fdes);
	return err;
}

/* ---- the same without libdw's CFI evaluation ----
 *
 * libdw's evaluation allocates with its per-thread allocator, whose
 * initial-exec TLS a shared object cannot hold when libdw is linked
 * statically (the kprobe agent), and re-runs each FDE's program from its
 * start for every row: the FDEs' programs of .eh_frame are run here, each
 * once.  The two give the same rows (tests/test_stack.c compares them). */

#define MAX_STATE 16

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

/* An unsigned little-endian integer of n (1, 2, 4 or 8) bytes at *p. */
static bool fixed(const uint8_t **p, const uint8_t *end, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if ((size_t)(end - *p) < n)
		return false;
	memcpy(&x, *p, n);	/* x86-64 and arm64 are little-endian */
	*p += n;
	*v = x;
	return true;
}

/* A pointer of encoding enc at *p (DW_EH_PE_*: the formats GCC and
 * assemblers emit, absolute or pc-relative). */
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
	if (!fixed(p, end, n, v))
		return false;
	/* the signed forms (bit 3) sign-extend */
	if ((enc & 0x08) && n < 8 && (*v >> (8 * n - 1)) & 1)
		*v |= ~(uint64_t)0 << (8 * n);
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
 * frame, and where its initial instructions are. */
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

/* The state a program runs on: the rules, the CIE's (DW_CFA_restore goes
 * back to those), the remembered states, the location. */
struct cfi_run {
	const struct eh_reader *r;
	const struct cie_info *ci;
	struct frame_rules st;
	const struct frame_rules *init;
	struct frame_rules stack[MAX_STATE];
	int depth;
	uintptr_t loc;
	struct row_vec *v;	/* NULL while running the CIE's instructions */
	bool signal;
};

/* The rule of reg, when it is one the rows keep. */
static struct reg_rule *rule_of(struct frame_rules *st, uint64_t reg, unsigned int ra_reg)
{
	if (reg == ra_reg)
		return &st->ra;
	return reg == ARCH_DWARF_FP ? &st->fp : NULL;
}

static void set_rule(struct cfi_run *x, uint64_t reg, uint8_t how, long off)
{
	struct reg_rule *rr = rule_of(&x->st, reg, x->ci->ra_reg);

	if (rr)
		*rr = (struct reg_rule){ how, off, 0 };
}

/* The operations of a DWARF expression of n bytes at p, as libdw decodes
 * them, for those the rows can hold; 0 for any other (or more than max). */
static size_t decode_ops(const uint8_t *p, size_t n, Dwarf_Op *ops, size_t max)
{
	const uint8_t *end = p + n;
	size_t k = 0;

	while (p < end) {
		Dwarf_Op o = { .atom = *p++ };
		uint64_t u;
		int64_t sv;

		if (k == max)
			return 0;
		if (o.atom >= DW_OP_breg0 && o.atom <= DW_OP_breg31) {
			if (!sleb(&p, end, &sv))
				return 0;
			o.number = (Dwarf_Word)sv;
		} else if (o.atom == DW_OP_constu || o.atom == DW_OP_plus_uconst) {
			if (!uleb(&p, end, &u))
				return 0;
			o.number = u;
		} else if (o.atom != DW_OP_deref && o.atom != DW_OP_minus) {
			return 0;
		}
		ops[k++] = o;
	}
	return k;
}

/* DW_CFA_expression / DW_CFA_val_expression for reg. */
static void set_expression_rule(struct cfi_run *x, uint64_t reg, bool val, const uint8_t *p,
				size_t n)
{
	struct reg_rule *rr = rule_of(&x->st, reg, x->ci->ra_reg);
	Dwarf_Op ops[8];
	size_t k;

	if (!rr)
		return;
	k = decode_ops(p, n, ops, 8);
	if (!val || !value_chain(ops, k, rr))
		*rr = (struct reg_rule){ RULE_OTHER, 0, 0 };
}

static void set_cfa_expression(struct frame_rules *st, const uint8_t *p, size_t n)
{
	Dwarf_Op ops[8];

	if (!cfa_word_at_sp(ops, decode_ops(p, n, ops, 8), st))
		st->cfa_expr = true;
}

/* DW_CFA_restore*: back to the CIE's rule. */
static void restore_rule(struct cfi_run *x, uint64_t reg)
{
	struct reg_rule *rr = rule_of(&x->st, reg, x->ci->ra_reg);

	if (rr)
		*rr = *rule_of((struct frame_rules *)x->init, reg, x->ci->ra_reg);
}

/* The location moves by delta: the rules so far cover [loc, loc + delta). */
static void advance(struct cfi_run *x, uint64_t delta)
{
	if (x->v && delta)
		push_row(x->v, x->loc, reduce(&x->st, x->signal));
	x->loc += delta;
}

/* One instruction other than the three with an operand in the opcode;
 * false on one it does not know or a truncated operand. */
static bool run_insn(struct cfi_run *x, uint8_t op, const uint8_t **p, const uint8_t *end)
{
	const struct cie_info *ci = x->ci;
	struct frame_rules *st = &x->st;
	uint64_t reg = 0, u = 0;
	int64_t sv = 0;

	switch (op) {
	case DW_CFA_nop:
	case DW_CFA_GNU_args_size:
		return op == DW_CFA_nop || uleb(p, end, &u);
	case DW_CFA_set_loc:
		if (!read_encoded(x->r, ci->enc, p, end, &u) || u < x->loc)
			return false;
		advance(x, u - x->loc);
		return true;
	case DW_CFA_advance_loc1:
	case DW_CFA_advance_loc2:
	case DW_CFA_advance_loc4:
		/* operands of 1, 2 and 4 bytes: opcodes 2, 3, 4 */
		if (!fixed(p, end, op == DW_CFA_advance_loc4 ? 4 : op - 1u, &u))
			return false;
		advance(x, u * ci->caf);
		return true;
	case DW_CFA_offset_extended:
	case DW_CFA_GNU_negative_offset_extended:
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		set_rule(x, reg, RULE_OFFSET, (op == DW_CFA_offset_extended ? 1 : -1) *
						  (long)u * ci->daf);
		return true;
	case DW_CFA_offset_extended_sf:
		if (!uleb(p, end, &reg) || !sleb(p, end, &sv))
			return false;
		set_rule(x, reg, RULE_OFFSET, (long)(sv * ci->daf));
		return true;
	case DW_CFA_restore_extended:
		if (!uleb(p, end, &reg))
			return false;
		restore_rule(x, reg);
		return true;
	case DW_CFA_undefined:
	case DW_CFA_same_value:
		if (!uleb(p, end, &reg))
			return false;
		set_rule(x, reg, op == DW_CFA_undefined ? RULE_UNDEF : RULE_SAME, 0);
		return true;
	case DW_CFA_register:
	case DW_CFA_val_offset:
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		set_rule(x, reg, RULE_OTHER, 0);
		return true;
	case DW_CFA_val_offset_sf:
		if (!uleb(p, end, &reg) || !sleb(p, end, &sv))
			return false;
		set_rule(x, reg, RULE_OTHER, 0);
		return true;
	case DW_CFA_expression:
	case DW_CFA_val_expression:
		if (!uleb(p, end, &reg) || !uleb(p, end, &u) || u > (uint64_t)(end - *p))
			return false;
		set_expression_rule(x, reg, op == DW_CFA_val_expression, *p, (size_t)u);
		*p += u;
		return true;
	case DW_CFA_remember_state:
		if (x->depth == MAX_STATE)
			return false;
		x->stack[x->depth++] = *st;
		return true;
	case DW_CFA_restore_state:
		if (!x->depth)
			return false;
		/* the CFA rule is restored too (as libdw and libgcc do) */
		*st = x->stack[--x->depth];
		return true;
	case DW_CFA_def_cfa:
	case DW_CFA_def_cfa_sf:
		if (!uleb(p, end, &reg))
			return false;
		if (op == DW_CFA_def_cfa ? !uleb(p, end, &u) : !sleb(p, end, &sv))
			return false;
		st->cfa_reg = (unsigned int)reg;
		st->cfa_off = op == DW_CFA_def_cfa ? (long)u : (long)(sv * ci->daf);
		st->cfa_expr = st->cfa_at_sp = false;
		return true;
	case DW_CFA_def_cfa_register:
		if (!uleb(p, end, &reg))
			return false;
		st->cfa_reg = (unsigned int)reg;
		st->cfa_expr = st->cfa_at_sp = false;
		return true;
	case DW_CFA_def_cfa_offset:
		if (!uleb(p, end, &u))
			return false;
		st->cfa_off = (long)u;
		return true;
	case DW_CFA_def_cfa_offset_sf:
		if (!sleb(p, end, &sv))
			return false;
		st->cfa_off = (long)(sv * ci->daf);
		return true;
	case DW_CFA_def_cfa_expression:
		if (!uleb(p, end, &u) || u > (uint64_t)(end - *p))
			return false;
		set_cfa_expression(st, *p, (size_t)u);
		*p += u;
		return true;
	default:
		return false;
	}
}

/* Runs CFI instructions [p, end).  Returns false on an instruction it does
 * not know: the rest is not described. */
static bool run_cfi(struct cfi_run *x, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		uint8_t op = *p++, operand = op & 0x3f;
		uint64_t u;

		switch (op >> 6) {
		case 1:		/* DW_CFA_advance_loc */
			advance(x, operand * x->ci->caf);
			break;
		case 2:		/* DW_CFA_offset */
			if (!uleb(&p, end, &u))
				return false;
			set_rule(x, operand, RULE_OFFSET, (long)u * x->ci->daf);
			break;
		case 3:		/* DW_CFA_restore */
			restore_rule(x, operand);
			break;
		default:
			if (!run_insn(x, op, &p, end))
				return false;
			break;
		}
	}
	return true;
}

/* One FDE run here: its rows to v, its range in *range (empty when it
 * cannot be read). */
static void interp_fde(const struct eh_reader *r, const struct cie_info *ci, const Dwarf_FDE *fde,
		       struct row_vec *v, struct kfde *range, uintptr_t base)
{
	/* A CIE that says nothing of the return address leaves it where the
	 * call put it: nowhere known (x86-64), or the link register (arm64). */
	struct frame_rules init = { .cfa_reg = ARCH_DWARF_SP,
				    .ra = { ARCH_DWARF_RA_IN_LR ? RULE_SAME : RULE_UNDEF, 0 },
				    .fp = { RULE_SAME, 0 } };
	struct cfi_run x = { .r = r, .ci = ci, .signal = ci->signal };
	const uint8_t *p = fde->start;
	uint64_t start, len, auglen;

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
	/* the CIE's instructions give the initial rules (no rows; a restore
	 * there keeps the rule) */
	x.st = init;
	x.init = &x.st;
	x.loc = start;
	if (!run_cfi(&x, ci->insns, ci->insns_end))
		return;
	init = x.st;
	x.init = &init;
	x.depth = 0;
	x.loc = start;
	x.v = v;
	/* the rest of an FDE with an unknown instruction is not described */
	if (!run_cfi(&x, p, fde->end))
		x.st.cfa_expr = true;
	if (x.loc < start + len)
		push_row(v, x.loc, reduce(&x.st, ci->signal));
	push_row(v, start + len, no_cfi);
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

/* The CIE of FDE e into *ci, unless it is the one already there. */
static bool cie_of(const unsigned char *ident, Elf_Data *d, const struct eh_reader *r,
		   const Dwarf_CFI_Entry *e, struct cie_info *ci)
{
	Dwarf_CFI_Entry c;
	Dwarf_Off next;

	if (e->fde.CIE_pointer == ci->off)
		return true;
	if (dwarf_next_cfi(ident, d, true, e->fde.CIE_pointer, &next, &c) != 0 ||
	    !dwarf_cfi_cie_p(&c) || !cie_parse(r, &c.cie, ci)) {
		ci->off = (Dwarf_Off)-1;
		return false;
	}
	ci->off = e->fde.CIE_pointer;
	return true;
}

/* .eh_frame's FDEs in address order, with their starts. */
static int eh_frame_refs(const unsigned char *ident, Elf_Data *d, const struct eh_reader *r,
			 struct fde_ref **out, size_t *count)
{
	struct cie_info ci = { .off = (Dwarf_Off)-1 };
	struct fde_ref *refs = NULL;
	size_t n = 0, cap = 0;
	Dwarf_Off off, next;

	for (off = 0; off != (Dwarf_Off)-1; off = next) {
		Dwarf_CFI_Entry e;
		const uint8_t *p;
		uint64_t start;

		if (dwarf_next_cfi(ident, d, true, off, &next, &e) != 0)
			break;
		if (dwarf_cfi_cie_p(&e) || !cie_of(ident, d, r, &e, &ci))
			continue;
		p = e.fde.start;
		if (!read_encoded(r, ci.enc, &p, e.fde.end, &start) || !start)
			continue;
		if (n == cap) {
			struct fde_ref *nr = realloc(refs, (cap = cap ? cap * 2 : 1024) * sizeof(*refs));

			if (!nr) {
				free(refs);
				return -ENOMEM;
			}
			refs = nr;
		}
		refs[n++] = (struct fde_ref){ start, off };
	}
	if (!n) {
		free(refs);
		return -ENOENT;
	}
	qsort(refs, n, sizeof(*refs), cmp_fde_ref);
	*out = refs;
	*count = n;
	return 0;
}

int cfi_interp_build(Elf *elf, struct cfi_table *out)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	struct eh_reader r = { 0 };
	struct row_vec v = { .t = out };
	struct cie_info ci = { .off = (Dwarf_Off)-1 };
	struct fde_ref *refs;
	size_t nrefs;
	Elf_Data *d;
	int err;

	memset(out, 0, sizeof(*out));
	d = ident ? section_data(elf, ".eh_frame", &r.addr) : NULL;
	if (!d)
		return -ENOENT;
	r.base = d->d_buf;
	err = eh_frame_refs(ident, d, &r, &refs, &nrefs);
	if (err)
		return err;
	out->base = refs[0].start;
	for (size_t i = 0; i < nrefs && !v.err; i++) {
		Dwarf_CFI_Entry e;
		Dwarf_Off next;
		struct kfde range;

		if (dwarf_next_cfi(ident, d, true, refs[i].off, &next, &e) != 0 ||
		    !cie_of(ident, d, &r, &e, &ci))
			continue;
		interp_fde(&r, &ci, &e.fde, &v, &range, out->base);
		out->code_bytes += range.end - range.start;
	}
	free(refs);
	return table_finish(&v);
}

/* .eh_frame run here; libdw for an object with only .debug_frame, where
 * it can be linked. */
int cfi_table_build(Elf *elf, struct cfi_table *out)
{
	int err = cfi_interp_build(elf, out);

	if (err == -ENOENT && have_libdw_cfi())
		err = cfi_libdw_build(elf, out);
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
