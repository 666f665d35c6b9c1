/* The fault fix-up of the caught loads and copies (asm/uaccess.h), for the
 * architecture's fault handler. */
#ifndef KP_ARM64_UNWIND_H
#define KP_ARM64_UNWIND_H

#include <stdbool.h>
#include <ucontext.h>

#include "asm/uaccess.h"

/* Called first by the library's SIGSEGV/SIGBUS handler: a fault on one of
 * kp_load_nofault's loads or kp_copy_nofault's resumes after it with
 * -EFAULT (true). */
bool arch_unwind_fixup(ucontext_t *uc);

#endif
