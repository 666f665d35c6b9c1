/* Running the handlers of an aggregate probepoint on the hit path.
 * Lock-free: the lists are read with acquire loads while writers publish
 * with release stores and free only after a grace period. */
/* On the hit path of optimized probes, which save vector state only for
 * handlers that need it: this code must not touch it. */
#include "asm/hitpath.h"

#include <errno.h>

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

/* For a hit that saved the general registers only: each pre-handler with
 * what its needs (KP_OPT_SAVE_*, decoded when it was registered) say it
 * may change saved around it.  The needs travel with each probe, so one
 * registered while the hit is under way is called with what it needs. */
int kp_run_pre_handlers_saving(struct kp_probepoint *pp, struct pt_regs *regs)
{
	for_each_probe(p, pp) {
		int rc, saved_errno = 0;
		uint8_t need;

		if (!enabled(p) || !p->pre_handler)
			continue;
		need = kp_probe_needs(p);
		if (need & KP_OPT_SAVE_ERRNO)
			saved_errno = errno;
		if (need & KP_OPT_SAVE_VECTOR)
			rc = kp_call_fpu_saved((int (*)(void *, void *))p->pre_handler, p, regs);
		else
			rc = p->pre_handler(p, regs);
		if (need & KP_OPT_SAVE_ERRNO)
			errno = saved_errno;
		if (rc)
			return 1;
	}
	return 0;
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
