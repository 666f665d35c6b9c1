/*
 * kprobes_exit_sites(): the places a function returns through, for tools
 * that count or time its returns with kprobes there instead of a return
 * probe: no return address replaced, no instance, nothing the processor's
 * return-stack predictor sees.  The architecture finds the sites
 * (arch_exit_sites()); here the function is looked up and, when asked,
 * every site must be able to take a jump.
 */
#include <errno.h>

#include "core/internal.h"
#include "elf/symbols.h"

/* Sites beyond this many are not looked at (-E2BIG is reported from the
 * count the architecture found). */
#define MAX_SITES 256

static int sites_locked(uintptr_t addr, uintptr_t *v, int max, unsigned int flags)
{
	struct ksym fn;
	bool tail;
	size_t pad;
	int n;

	if (ksym_lookup_addr(addr, &fn) || !fn.size)
		return -ENOENT;
	if (fn.addr != addr)
		return -EINVAL;
	pad = kp_padding_after(fn.addr + fn.size);
	n = arch_exit_sites(fn.addr, fn.size, pad, v, max, &tail);
	if (n >= 0 && tail && (flags & KPROBES_EXITS_RETURNS))
		return -EOPNOTSUPP;
	for (int i = 0; i < n && (flags & KPROBES_EXITS_JUMP); i++)
		if (arch_opt_check(v[i], fn.addr, fn.size, pad))
			return -EOPNOTSUPP;
	return n;
}

KP_EXPORT int kprobes_exit_sites(unsigned long func, unsigned long *sites, int max,
				 unsigned int flags)
{
	uintptr_t v[MAX_SITES];
	int n;

	if (!func || max < 0 || (max && !sites) || (flags & ~(KPROBES_EXITS_JUMP | KPROBES_EXITS_RETURNS)))
		return -EINVAL;
	pthread_mutex_lock(&kp_registry_lock);
	n = sites_locked((uintptr_t)func, v, max < MAX_SITES ? max : MAX_SITES, flags);
	pthread_mutex_unlock(&kp_registry_lock);
	for (int i = 0; i < n; i++)
		sites[i] = (unsigned long)v[i];
	return n;
}
