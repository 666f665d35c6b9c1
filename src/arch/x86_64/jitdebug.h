/* Code the library generates at run time, made known to debuggers through
 * GDB's JIT interface: an in-memory ELF object per batch of code, with its
 * unwind information (.eh_frame) and a symbol, so that gdb unwinds through
 * return stubs and detours as libgcc does (which gets the same FDEs from
 * __register_frame). */
#ifndef KP_X86_JITDEBUG_H
#define KP_X86_JITDEBUG_H

#include <stddef.h>
#include <stdint.h>

struct kp_jit_object;

/* Describes the code [lo, hi) named name, whose unwind information is the
 * .eh_frame image eh (eh_size bytes, absolute addresses, ended by a zero
 * terminator or not).  NULL on allocation failure (nothing registered). */
struct kp_jit_object *kp_jit_register(const char *name, uintptr_t lo, uintptr_t hi,
				      const void *eh, size_t eh_size);
void kp_jit_unregister(struct kp_jit_object *o);

/* Bytes of the images registered now. */
size_t kp_jit_bytes(void);

#endif
