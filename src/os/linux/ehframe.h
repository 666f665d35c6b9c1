/* Unwind information for generated code whose return address is kept in
 * memory: an .eh_frame of one CIE and one FDE per piece of code, built
 * here and registered with libgcc's frame registry, the one every
 * unwinder of the process uses (C++ exceptions, pthread_cancel's forced
 * unwind, backtrace()).  The return stubs of both architectures use it:
 * each stub's frame has CFA = the stack pointer at the stub, and the
 * return address at a fixed address (the instance that owns the stub). */
#ifndef KP_OS_EHFRAME_H
#define KP_OS_EHFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kp_ehframe {
	uint8_t *buf;		/* the .eh_frame, NULL when it could not be built */
	size_t size;		/* bytes of buf in use */
	bool registered;	/* with libgcc's frame registry */
};

/* Build and register the frames of n pieces of code of len bytes each,
 * piece i starting `before` bytes ahead of at[i], with its return address
 * stored at ret_loc(i, arg).  On failure eh->buf is NULL and the code
 * still runs; unwinders stop there. */
void kp_ehframe_build(struct kp_ehframe *eh, int n, const uintptr_t *at, size_t before,
		      size_t len, uintptr_t (*ret_loc)(int, void *), void *arg);

/* Deregister and free; eh may be all zero. */
void kp_ehframe_release(struct kp_ehframe *eh);

#endif
