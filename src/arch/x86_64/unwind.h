/* What the stack unwinder (src/core/stack.c) needs from the architecture:
 * a load that cannot kill the thread, and the addresses of probe code
 * (out-of-line slots, detours) mapped back to the code they stand for. */
#ifndef KP_X86_UNWIND_H
#define KP_X86_UNWIND_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

/* *out = *(uintptr_t *)addr: 0, or -EFAULT when it is not readable.
 * Async-signal-safe, no system call unless it faults. */
int kp_load_nofault(uintptr_t addr, uintptr_t *out);

/* Called first by the library's SIGSEGV/SIGBUS handler: a fault on
 * kp_load_nofault's load resumes at its fixup (true). */
bool arch_unwind_fixup(ucontext_t *uc);

/* An ip inside an out-of-line slot or a detour's copied instructions
 * becomes the probed instruction's address (true); the stack there is the
 * one the original instruction runs with. */
bool arch_unwind_map_ip(uintptr_t *ip);

#endif
