/*
 * Jump optimization on arm64: not implemented.  Every probe keeps its BRK;
 * the optimizer asks, and is told why not (kprobes_list() shows no
 * [OPTIMIZED], as with the kernel's kprobes on an architecture without
 * optprobes).  A detour would replace the probed word by a B within
 * +-128 MB (see "The arm64 backend" in docs/design.md).
 */
#include <errno.h>

#include "arch/arch.h"
#include "core/arch_api.h"

static const char not_here[] = "jump optimization is not implemented on arm64";

int arch_opt_analyse_pp(struct kp_probepoint *pp)
{
	(void)pp;
	return -EINVAL;
}

const char *arch_opt_why(const struct kp_probepoint *pp)
{
	(void)pp;
	return not_here;
}

uint8_t arch_opt_region_len(const struct kp_probepoint *pp)
{
	(void)pp;
	return 1;
}

int arch_opt_census_ranges(const struct kp_probepoint *pp, uintptr_t (*r)[2])
{
	(void)pp;
	(void)r;
	return 0;
}

const char *arch_opt_check(uintptr_t addr, uintptr_t func, size_t size, size_t pad)
{
	(void)addr;
	(void)func;
	(void)size;
	(void)pad;
	return not_here;
}

int arch_detour_build(struct kp_probepoint *pp)
{
	(void)pp;
	return -EINVAL;
}

int arch_optimize(struct kp_probepoint **pps, int n)
{
	(void)pps;
	return n ? -EINVAL : 0;
}

int arch_unoptimize(struct kp_probepoint **pps, int n)
{
	(void)pps;
	(void)n;
	return 0;
}

/* No analysis of handler code on arm64: every handler is taken to need
 * everything saved (the return trampoline then keeps the FP/SIMD
 * registers and errno around it). */
uint8_t arch_code_needs(uintptr_t fn)
{
	(void)fn;
	return KP_OPT_SAVE_ALL;
}
