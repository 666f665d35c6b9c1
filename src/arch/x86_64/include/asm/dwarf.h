/* DWARF register numbers the CFI reader (src/elf/cfi.c) reduces rows to:
 * the stack pointer, the frame pointer and the return-address column
 * (x86-64 psABI: rsp 7, rbp 6, return address 16). */
#ifndef KP_ASM_DWARF_H
#define KP_ASM_DWARF_H

#define ARCH_DWARF_SP 7
#define ARCH_DWARF_FP 6
#define ARCH_DWARF_RA 16
/* rbx (3): where a mid-function detour keeps its frame across a handler. */
#define ARCH_DWARF_RBX 3
/* The register the library's save code keeps its frame in while it
 * realigns the stack (detour_common.S): rows may have their CFA there
 * (CFI_CHAIN_AUX, elf/cfi.h), for a frame whose registers are known. */
#define ARCH_DWARF_AUX ARCH_DWARF_RBX

/* The return address is pushed by the call: never in a register. */
#define ARCH_DWARF_RA_IN_LR 0

#endif
