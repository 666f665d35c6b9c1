/* The architecture's side of the stack unwinder (see unwind.h). */
#include "arch/x86_64/unwind.h"

#include "arch/arch.h"
#include "arch/x86_64/xol.h"
#include "core/internal.h"

extern const char kp_load_nofault_insn[], kp_load_nofault_fixup[];

bool arch_unwind_fixup(ucontext_t *uc)
{
	if ((uintptr_t)uc->uc_mcontext.gregs[REG_RIP] != (uintptr_t)kp_load_nofault_insn)
		return false;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)kp_load_nofault_fixup;
	return true;
}

bool arch_unwind_map_ip(uintptr_t *ip)
{
	struct xol_slot *s = xol_slot_of(*ip);
	struct kp_probepoint *pp;
	uintptr_t orig = 0, copy;

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
