/*
 * Included first by every source file whose code runs on the hit path of
 * optimized probes.  The detours save the vector and x87 registers only
 * for handlers that need them, so that code must not use them: on x86-64
 * the compiler is held to the general registers for the rest of the file
 * (before any other header, so that their inline functions are compiled
 * the same way and still inline).
 */
#ifndef KP_ASM_HITPATH_H
#define KP_ASM_HITPATH_H

#pragma GCC target("general-regs-only")

#endif
