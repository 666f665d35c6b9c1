/* The architecture's side of the stack unwinder (see unwind.h). */
#include "arch/x86_64/unwind.h"

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "arch/x86_64/unwind_detour.h"
#include "arch/x86_64/xol.h"
#include "core/arch_api.h"

#include <errno.h>

/* The bounds of kp_extable (every kp_load_nofault() site); the linker
 * defines them. */
extern const struct kp_extable __start_kp_extable[] __attribute__((visibility("hidden")));
extern const struct kp_extable __stop_kp_extable[] __attribute__((visibility("hidden")));

/* The table holds one entry per inlined load: a handful, scanned. */
bool arch_unwind_fixup(ucontext_t *uc)
{
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];

	for (const struct kp_extable *e = __start_kp_extable; e < __stop_kp_extable; e++) {
		if ((uintptr_t)&e->insn + (intptr_t)e->insn != ip)
			continue;
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)((uintptr_t)&e->resume + (intptr_t)e->resume);
		uc->uc_mcontext.gregs[REG_RAX] = -EFAULT;
		return true;
	}
	return false;
}

bool arch_unwind_map_ip(uintptr_t *ip, uintptr_t *sp)
{
	struct xol_slot *s = xol_slot_of(*ip);
	struct kp_probepoint *pp;
	uintptr_t orig = 0, copy, cfa;

	/* anywhere in a detour: the frame its rows describe */
	if (!s && detour_unwind_frame(*ip, *sp, &orig, &cfa)) {
		*ip = orig;
		*sp = cfa;
		return true;
	}
	if (s) {
		pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
		if (!pp)
			return false;
		*ip = pp->addr;
		return true;
	}
	arch_detour_fault_addr(*ip, &orig, &copy, &pp);
	if (!orig)
		return false;
	*ip = orig;
	return true;
}

bool arch_unwind_return_into(uintptr_t *pc, uintptr_t *sp)
{
	uintptr_t ra, cfa;

	if (!detour_unwind_frame(*pc, *sp, &ra, &cfa))
		return false;
	*pc = ra;
	*sp = cfa;
	return true;
}
