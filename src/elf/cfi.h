/* Compact unwind tables: the call-frame information of one object,
 * evaluated per address range at build time (libdw) and compressed into
 * sorted rows the unwinder reads with a binary search (src/core/stack.c). */
#ifndef KP_ELF_CFI_H
#define KP_ELF_CFI_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* What a row says about its frame. */
enum cfi_kind {
	CFI_NONE,	/* no call-frame information: frame pointers */
	CFI_SP,		/* CFA = rsp + cfa_off */
	CFI_BP,		/* CFA = rbp + cfa_off */
	CFI_END,	/* the return address is undefined: outermost frame */
	CFI_SIGNAL,	/* a signal frame (__restore_rt): registers in the ucontext at rsp */
	CFI_EXPR,	/* a rule the rows cannot hold (DWARF expression): frame pointers */
};

/* bp_off values that are not offsets from the CFA. */
#define CFI_BP_SAME INT16_MAX		/* rbp keeps its value */
#define CFI_BP_LOST INT16_MIN		/* rbp is recovered by a rule not kept */

/* One row: from pc (an offset from the table's base) to the next row's. */
struct cfi_row {
	uint32_t pc;
	int32_t cfa_off;
	int16_t bp_off;		/* saved rbp at CFA + bp_off, or CFI_BP_* */
	uint8_t kind;		/* enum cfi_kind */
	int8_t ra_off;		/* the return address at CFA + ra_off */
};

struct cfi_table {
	uintptr_t base;		/* file address rows' pc are relative to */
	struct cfi_row *rows;
	size_t n;
	size_t code_bytes;	/* bytes of code the FDEs cover */
};

/* Builds the rows of elf's .eh_frame (or, without one, .debug_frame).
 * 0, -ENOENT when the object has no call-frame information, -ENOMEM. */
int cfi_table_build(Elf *elf, struct cfi_table *out);
void cfi_table_free(struct cfi_table *t);

/* The row covering file offset pc (relative to base), or NULL.  No
 * allocation, no lock: for the hit path. */
static inline const struct cfi_row *cfi_table_find(const struct cfi_row *rows, size_t n,
						   uint32_t pc)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &rows[lo - 1] : NULL;
}

#endif
