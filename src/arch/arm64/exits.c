/*
 * Exit sites (kprobes_exit_sites()) are found on x86-64 only so far: on
 * arm64 every function is reported as having none that can be told, and
 * callers keep return probes (kretprobes) for its returns.
 */
#include <errno.h>

#include "arch/arch.h"

int arch_exit_sites(uintptr_t func, size_t size, size_t pad, uintptr_t *sites, int max,
		    bool *tail)
{
	*tail = false;
	(void)func;
	(void)size;
	(void)pad;
	(void)sites;
	(void)max;
	return -EOPNOTSUPP;
}
