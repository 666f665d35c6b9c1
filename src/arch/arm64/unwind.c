/* The architecture's side of the stack unwinder (see unwind.h). */
#include "arch/arm64/unwind.h"

#include <errno.h>

#include "arch/arch.h"
#include "arch/arm64/optimize.h"
#include "arch/arm64/xol.h"
#include "core/arch_api.h"

/* The bounds of kp_extable (every caught load); the linker defines them. */
extern const struct kp_extable __start_kp_extable[] __attribute__((visibility("hidden")));
extern const struct kp_extable __stop_kp_extable[] __attribute__((visibility("hidden")));

bool arch_unwind_fixup(ucontext_t *uc)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;

	for (const struct kp_extable *e = __start_kp_extable; e < __stop_kp_extable; e++) {
		if ((uintptr_t)&e->insn + (intptr_t)e->insn != pc)
			continue;
		if (e->err_reg < 0 || e->err_reg > 30)
			return false;
		uc->uc_mcontext.pc = (uintptr_t)&e->resume + (intptr_t)e->resume;
		uc->uc_mcontext.regs[e->err_reg] = (unsigned long)-EFAULT;
		return true;
	}
	return false;
}

bool arch_unwind_map_ip(uintptr_t *ip, uintptr_t *sp)
{
	struct xol_slot *s = xol_slot_of(*ip);
	struct kp_probepoint *pp;

	if (!s)
		return a64_detour_map_ip(ip);
	pp = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
	if (!pp)
		return false;
	*ip = pp->addr;
	return true;
}

/* No generated code here is returned into with a frame the tables lack a
 * rule for and this file knows: the walk goes on by frame pointers (the
 * detours' shared code keeps a frame record {x29, R}). */
bool arch_unwind_return_into(uintptr_t *pc, uintptr_t *sp)
{
	return false;
}
