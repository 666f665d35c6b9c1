/* What the stack unwinder (src/core/stack.c) needs from the architecture:
 * a load that cannot kill the thread, and the addresses of probe code
 * (out-of-line slots, detours) mapped back to the code they stand for. */
#ifndef KP_X86_UNWIND_H
#define KP_X86_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "asm/uaccess.h"	/* kp_load_nofault(), kp_load_nofault_sized() */

/* memcpy(dst, src, len) that returns 0, or -EFAULT when a byte of either
 * side faults (dst may then hold part of the copy); nofault.S.  Like
 * kp_load_nofault(), only where kp_load_nofault_usable() (os/linux/memory.h). */
long kp_copy_nofault(void *dst, const void *src, size_t len);

/* Called first by the library's SIGSEGV/SIGBUS handler: a fault on one of
 * kp_load_nofault's loads or kp_copy_nofault's resumes after it with
 * -EFAULT (true). */
bool arch_unwind_fixup(ucontext_t *uc);

#endif
