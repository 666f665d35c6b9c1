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

#include "elf/cache.h"
#include "elf/cfi.h"

#define DW_REG_RBP 6
#define DW_REG_RSP 7
#define DW_REG_RA 16

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
	if (!ops && n == 0) {
		r.kind = CFI_END;
		return r;
	}
	if (!saved_at_cfa(ops, n, &off) || !words(-off, 0, 31, &w))
		return r;
	r.ra8 = (uint8_t)w;
	if (dwarf_frame_register(fr, DW_REG_RBP, mem, &ops, &n) == 0) {
		if (n == 0)
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

int cfi_table_build(Elf *elf, struct cfi_table *out)
{
	struct row_vec v = { .t = out };
	Dwarf *dw = NULL;
	Dwarf_CFI *cfi;
	struct kfde *fdes;
	size_t nfdes;
	int err;

	memset(out, 0, sizeof(*out));
	err = kfde_table_build(elf, &fdes, &nfdes);
	if (err)
		return err;
	if (nfdes) {
		cfi = dwarf_getcfi_elf(elf);
	} else {
		free(fdes);
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
