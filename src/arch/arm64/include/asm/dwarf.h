/* DWARF register numbers the CFI reader (src/elf/cfi.c) reduces rows to:
 * the stack pointer, the frame pointer and the return-address column
 * (AArch64 DWARF: sp 31, x29 29, x30 30). */
#ifndef KP_ASM_DWARF_H
#define KP_ASM_DWARF_H

#define ARCH_DWARF_SP 31
#define ARCH_DWARF_FP 29
#define ARCH_DWARF_RA 30

/* BL leaves the return address in x30 (the link register): where the CFI
 * keeps "the same value" for it, it is still there. */
#define ARCH_DWARF_RA_IN_LR 1
/* No register of the save code's frame for rows to hold (x86-64's rbx):
 * a number no DWARF register has. */
#define ARCH_DWARF_AUX 0xffffffffu

#endif
