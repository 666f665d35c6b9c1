/* Detour buffers of jump-optimized probes. */
#ifndef KP_X86_DETOUR_H
#define KP_X86_DETOUR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kp_probepoint;

int arch_detour_build(struct kp_probepoint *pp);
void arch_detour_free(struct kp_probepoint *pp);
uintptr_t arch_detour_resume(const struct kp_probepoint *pp);
/* A fault at ip in a detour's copied instructions: the instruction's own
 * address (orig) and its copy's. */
bool arch_detour_fault_addr(uintptr_t ip, uintptr_t *orig, uintptr_t *copy,
			    struct kp_probepoint **pp);
size_t arch_detour_bytes(void);
/* Sizes the vector state the detours save (xsave), once at start-up. */
void arch_fpu_init(void);
/* Detour buffers in use. */
void arch_detour_stats(unsigned long *detours);
/* Is ip on the way into a detour from outside it (a return stub's call)?
 * The census counts such a thread as inside (os/linux/upcalls.h). */
bool arch_ip_bound_for_detour(uintptr_t ip);
int arch_detour_range(const struct kp_probepoint *pp, uintptr_t range[2]);

#endif
