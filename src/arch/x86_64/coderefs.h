/* Where a function's code can be entered from outside it (coderefs.c). */
#ifndef KP_X86_CODEREFS_H
#define KP_X86_CODEREFS_H

#include <stdint.h>

enum code_ref {
	CODE_REF_BRANCH,	/* targets of the object's direct branches */
	CODE_REF_HELD,		/* code addresses in the object's memory */
};

/* Calls add() for every address of the kind in [lo, hi), for the object
 * that contains lo (read_code reads code with probes taken out).  0,
 * -ENOENT (lo in no loaded object), -ENOMEM, -EFAULT, or add's error.
 * Not thread-safe: called under the registry lock, as the analysis is. */
int code_refs_into(uintptr_t lo, uintptr_t hi, enum code_ref kind,
		   int (*read_code)(uintptr_t, uint8_t *, size_t), int (*add)(uintptr_t));

#endif
