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
	CFI_SP,		/* CFA = rsp + 8 * cfa8 */
	CFI_BP,		/* CFA = rbp + 8 * cfa8 */
	CFI_END,	/* the return address is undefined: outermost frame */
	CFI_SIGNAL,	/* a signal frame (__restore_rt): registers in the ucontext at rsp */
	CFI_EXPR,	/* a rule the rows cannot hold (DWARF expression): frame pointers */
	CFI_LR,		/* CFA = rsp + 8 * cfa8, the return address still in the link
			 * register (arm64: x30, at a function's first
			 * instructions and in leaves), rbp kept */
	CFI_CHAIN,	/* a frame that stands for another (the library's own
			 * save code, as its CFI describes it): the CFA as
			 * cfi_chain_* below decode it, the caller's ip read
			 * through two pointers, exact (no call before it):
			 * ip = **(*(CFA - 8 * ra8) + bp8); rbp kept */
};

/* A CFI_CHAIN rule's CFA, in cfa8: a base (CFI_CHAIN_*) in bits 9-10 and
 * an offset in words in bits 0-8.  CFI_CHAIN_AUX is the register
 * ARCH_DWARF_AUX (asm/dwarf.h), known only where a frame's registers all
 * are (the first frame, a signal's); CFI_CHAIN_AT_SP*: the word at rsp
 * (or rsp + 8) is the base, where code that realigned its stack keeps it
 * for unwinders. */
enum cfi_chain_base { CFI_CHAIN_SP, CFI_CHAIN_AUX, CFI_CHAIN_AT_SP, CFI_CHAIN_AT_SP8 };
#define CFI_CHAIN_OFF_MAX 511

static inline int32_t cfi_chain_cfa8(enum cfi_chain_base base, unsigned int off8)
{
	return (int32_t)((unsigned int)base << 9 | off8);
}

static inline enum cfi_chain_base cfi_chain_base(int32_t cfa8)
{
	return (enum cfi_chain_base)((cfa8 >> 9) & 3);
}

static inline unsigned int cfi_chain_off8(int32_t cfa8)
{
	return (unsigned int)cfa8 & CFI_CHAIN_OFF_MAX;
}

/* bp8 values that are not offsets from the CFA. */
#define CFI_BP_SAME INT8_MAX		/* rbp keeps its value */
#define CFI_BP_LOST INT8_MIN		/* rbp is recovered by a rule not kept */

/* How to find a frame's caller, 4 bytes: what a row says from its pc on,
 * and what the unwinder caches per return address (src/core/stack.c).
 * Offsets are kept in words; one that does not fit, or is not a multiple
 * of 8, makes the rule CFI_EXPR.  The return address's slot reaches 2 KiB
 * below the CFA: arm64 code keeps x29 and x30 at the bottom of a frame,
 * under its locals, so that offset is the frame's size there. */
#define CFI_CFA8_MIN (-4096)
#define CFI_CFA8_MAX 4095
#define CFI_RA8_MAX 255
struct cfi_rule {
	int32_t cfa8 : 13;	/* CFA = rsp or rbp + 8 * cfa8 */
	int32_t bp8 : 8;	/* saved rbp at CFA + 8 * bp8, or CFI_BP_* */
	uint32_t kind : 3;	/* enum cfi_kind */
	uint32_t ra8 : 8;	/* the return address at CFA - 8 * ra8 */
};

/* One row, 8 bytes: the rule from pc (an offset from the table's base) to
 * the next row's. */
struct cfi_row {
	uint32_t pc;
	struct cfi_rule r;
};

/* The rows of a block of CFI_BLOCK bytes of code start at lookup[block]
 * (as the kernel's ORC fast lookup): a binary search over a few rows. */
#define CFI_BLOCK_SHIFT 8

_Static_assert(sizeof(struct cfi_rule) == 4, "struct cfi_rule: 4 bytes");
_Static_assert(sizeof(struct cfi_row) == 8, "struct cfi_row: 8 bytes");

struct cfi_table {
	uintptr_t base;		/* file address rows' pc are relative to */
	struct cfi_row *rows;
	size_t n;
	uint32_t *lookup;	/* nblocks + 1 entries */
	size_t nblocks;
	size_t code_bytes;	/* bytes of code the FDEs cover */
};

/* Builds the rows of elf's .eh_frame (or, without one, .debug_frame).
 * 0, -ENOENT when the object has no call-frame information, -ENOMEM.
 * With libdw's CFI evaluation when the process has it (libdw.so),
 * otherwise by cfi_interp_build. */
int cfi_table_build(Elf *elf, struct cfi_table *out);
/* The two ways, for tests: libdw (-ENOSYS without it), and the FDEs'
 * programs run here (.eh_frame only). */
int cfi_libdw_build(Elf *elf, struct cfi_table *out);
int cfi_interp_build(Elf *elf, struct cfi_table *out);
void cfi_table_free(struct cfi_table *t);

/* The row covering offset pc (relative to base), or NULL.  No
 * allocation, no lock: for the hit path. */
static inline const struct cfi_row *cfi_table_find(const struct cfi_table *t, uintptr_t pc)
{
	const struct cfi_row *rows = t->rows;
	size_t lo, hi, block = pc >> CFI_BLOCK_SHIFT;

	if (block >= t->nblocks)
		return t->n && pc >= rows[t->n - 1].pc && pc <= UINT32_MAX ? &rows[t->n - 1] : NULL;
	lo = t->lookup[block];
	hi = t->lookup[block + 1] + 1;
	if (hi > t->n)
		hi = t->n;
	/* a block has a few rows: a scan, one mispredicted branch */
	if (hi - lo <= 16 && rows[lo].pc <= pc) {
		while (lo + 1 < hi && rows[lo + 1].pc <= pc)
			lo++;
		return &rows[lo];
	}
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
