/* kprobes_vector_reg() on arm64: the hit paths here keep no note of where
 * the FP/SIMD registers of a hit are, so no value can be given. */
#include <errno.h>

#include "kprobes.h"
#include "core/arch_api.h"

KP_EXPORT int kprobes_vector_reg(const struct pt_regs *regs, unsigned int n, void *out, size_t len)
{
	if (!regs || !out || !len || len > 16 || n >= 32)
		return -EINVAL;
	return -ENOENT;
}
