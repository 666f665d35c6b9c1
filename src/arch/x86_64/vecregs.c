/* kprobes_vector_reg(): the probed code's vector registers, from wherever
 * the hit whose handlers run kept them (the signal frame of a breakpoint
 * hit, the image a detour saved, the image saved around a return
 * handler).  The hit path notes the place in the
 * thread record (vec_regs, vec_area, vec_layout) for as long as its
 * handlers run.  General registers only, as the hit path: a handler that
 * calls this does not count as touching vector state. */
#include "asm/hitpath.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kprobes.h"
#include "arch/arch.h"
#include "arch/x86_64/regs.h"
#include "core/arch_api.h"
#include "os/linux/threads.h"

#define VEC_XMM_BYTES 16
#define VEC_NREGS 16
#define VEC_ENTRY_NREGS 8	/* an entry detour keeps the argument registers */

/* xsave leaves a component's area alone when the component is in its
 * initial state (all xmm registers zero) and says so in XSTATE_BV. */
static bool xmm_in_use(const unsigned char *image)
{
	uint64_t bv;

	memcpy(&bv, image + KP_VEC_XSTATE_BV, sizeof(bv));
	return bv & KP_VEC_XSTATE_SSE;
}

KP_EXPORT int kprobes_vector_reg(const struct pt_regs *regs, unsigned int n, void *out, size_t len)
{
	struct kp_thread *t = kp_thread_current();
	const unsigned char *src;
	unsigned char *dst = out;
	unsigned int layout;

	if (!regs || !out || !len || len > VEC_XMM_BYTES || n >= VEC_NREGS)
		return -EINVAL;
	if (!t || __atomic_load_n(&t->vec_regs, __ATOMIC_RELAXED) != regs)
		/* In a handler whose hit kept no vector state, or not in a
		 * handler of this regs' hit at all. */
		return t && t->in_handler ? -ENOENT : -EINVAL;
	layout = t->vec_layout;
	src = t->vec_area;
	if (layout == KP_VEC_XSAVE && !xmm_in_use(src)) {
		for (size_t i = 0; i < len; i++)
			dst[i] = 0;
		return 0;
	}
	if (layout == KP_VEC_FXSAVE || layout == KP_VEC_XSAVE) {
		src += KP_VEC_FX_XMM + (size_t)n * VEC_XMM_BYTES;
	} else {
		if (n >= VEC_ENTRY_NREGS)
			return -ENOENT;
		src += (size_t)n * layout;
	}
	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
	return 0;
}

/* The image kp_call_fpu_image() hands its function (trampoline.S). */
unsigned int arch_fpu_image_layout(void)
{
	return kp_xsave_size ? KP_VEC_XSAVE : KP_VEC_FXSAVE;
}
