/*
 * Included first by every source file whose code runs on the hit path of
 * return probes: the trampoline saves the general registers only, and
 * calls handlers that may change the FP/SIMD registers (the return value
 * of a float function is in v0-v3) with those saved
 * (kp_call_fpu_saved).  The library's own code on that path must not use
 * them: the compiler is held to the general registers for the rest of the
 * file (before any other header, so that their inline functions are
 * compiled the same way).
 */
#ifndef KP_ASM_HITPATH_H
#define KP_ASM_HITPATH_H

#pragma GCC target("general-regs-only")

#endif
