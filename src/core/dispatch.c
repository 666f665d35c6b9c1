/* Running the handlers of an aggregate probepoint on the hit path.
 * Lock-free: the lists are read with acquire loads while writers publish
 * with release stores and free only after a grace period. */
/* On the hit path of optimized probes, which save vector state only for
 * handlers that need it: this code must not touch it. */
#include "asm/hitpath.h"

#include "core/internal.h"

#define for_each_probe(p, pp)						\
	for (struct kprobe *p = __atomic_load_n(&(pp)->probes, __ATOMIC_ACQUIRE); p; \
	     p = __atomic_load_n(&p->__next, __ATOMIC_ACQUIRE))

static bool enabled(const struct kprobe *p)
{
	return kp_probe_enabled(p);
}

int kp_run_pre_handlers(struct kp_probepoint *pp, struct pt_regs *regs)
{
	return kp_pre_handlers_inline(pp, regs);
}

void kp_run_post_handlers(struct kp_probepoint *pp, struct pt_regs *regs)
{
	for_each_probe(p, pp)
		if (enabled(p) && p->post_handler)
			p->post_handler(p, regs, 0);
}

int kp_run_fault_handlers(struct kp_probepoint *pp, struct pt_regs *regs, int trapnr)
{
	for_each_probe(p, pp)
		if (enabled(p) && p->fault_handler && p->fault_handler(p, regs, trapnr))
			return 1;
	return 0;
}

bool kp_probepoint_has_post(const struct kp_probepoint *pp)
{
	for_each_probe(p, pp)
		if (enabled(p) && p->post_handler)
			return true;
	return false;
}

void kp_count_missed(struct kp_probepoint *pp)
{
	for_each_probe(p, pp)
		__atomic_fetch_add(&p->nmissed, 1, __ATOMIC_RELAXED);
}
