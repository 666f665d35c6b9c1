/* kprobes_vector_reg() on arm64: the probed code's V registers (q0..q31),
 * from wherever the hit whose handlers run kept them.  A BRK hit keeps them
 * in its signal frame: the kernel saves the FP/SIMD state there as a
 * struct fpsimd_context record (and, when the thread uses SVE, the low 128
 * bits of each Z register are still that record's V registers), and puts it
 * back from there when the handler returns.  The hit path notes the record's
 * registers in the thread record (vec_regs, vec_area, vec_layout) while its
 * handlers run.  A return handler of a probe registered with
 * KPROBE_FLAG_VECTOR_REGS runs with the V registers saved around it and
 * noted the same way (kretprobe.c).  General registers only, as the hit
 * path. */
#include "asm/hitpath.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kprobes.h"
#include "arch/arm64/regs.h"
#include "core/arch_api.h"
#include "os/linux/threads.h"

/* The records of the signal frame's __reserved area (the kernel's
 * asm/sigcontext.h, which cannot be included beside glibc's signal.h):
 * each begins with a 32-bit magic and its 32-bit size; a zero magic ends
 * the list.  The FP/SIMD record: the header, fpsr and fpcr (4 bytes each),
 * then vregs[32], 16 bytes each. */
#define A64_CTX_HDR 8
#define A64_FPSIMD_MAGIC 0x46508001U
#define A64_FPSIMD_VREGS 16
#define A64_FPSIMD_SIZE (A64_FPSIMD_VREGS + A64_VEC_NREGS * A64_VEC_BYTES)

const void *a64_sigframe_vregs(const ucontext_t *uc)
{
	const unsigned char *rec = (const unsigned char *)uc->uc_mcontext.__reserved;
	const unsigned char *end = rec + sizeof(uc->uc_mcontext.__reserved);

	while (rec + A64_CTX_HDR <= end) {
		uint32_t magic, size;

		memcpy(&magic, rec, sizeof(magic));
		memcpy(&size, rec + 4, sizeof(size));
		if (!magic || size < A64_CTX_HDR || size > (size_t)(end - rec))
			return NULL;
		if (magic == A64_FPSIMD_MAGIC)
			return size >= A64_FPSIMD_SIZE ? rec + A64_FPSIMD_VREGS : NULL;
		rec += size;
	}
	return NULL;
}

/* The image kp_call_fpu_image() hands its function (trampoline.S): the
 * V registers, 16 bytes each, in order. */
unsigned int arch_fpu_image_layout(void)
{
	return KP_VEC_FPSIMD;
}

KP_EXPORT int kprobes_vector_reg(const struct pt_regs *regs, unsigned int n, void *out, size_t len)
{
	struct kp_thread *t = kp_thread_current();
	const unsigned char *src;
	unsigned char *dst = out;

	if (!regs || !out || !len || len > A64_VEC_BYTES || n >= A64_VEC_NREGS)
		return -EINVAL;
	if (!t || __atomic_load_n(&t->vec_regs, __ATOMIC_RELAXED) != regs)
		/* In a handler whose hit kept no vector state, or not in a
		 * handler of this regs' hit at all. */
		return t && t->in_handler ? -ENOENT : -EINVAL;
	if (t->vec_layout != KP_VEC_FPSIMD)
		return -ENOENT;
	src = (const unsigned char *)t->vec_area + (size_t)n * A64_VEC_BYTES;
	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
	return 0;
}
