/* Resource counters for tests and soak runs: after every probe is gone and
 * the quarantine has passed, they return to their baseline. */
#include "core/stats.h"

#include "core/internal.h"
#include "os/linux/execmem.h"

extern unsigned long kp_probepoints_alive;
extern unsigned long kp_rp_pools_alive;

void kp_get_stats(struct kp_stats *st)
{
	pthread_mutex_lock(&kp_registry_lock);
	st->probepoints = __atomic_load_n(&kp_probepoints_alive, __ATOMIC_RELAXED);
	st->rp_pools = __atomic_load_n(&kp_rp_pools_alive, __ATOMIC_RELAXED);
	arch_stats(&st->xol_slots, &st->retired_slots, &st->detours);
	st->kept_bytes = arch_kept_bytes() + exec_kept_bytes();
	pthread_mutex_unlock(&kp_registry_lock);
}

int kp_reclaim_now(void)
{
	int n;

	pthread_mutex_lock(&kp_registry_lock);
	n = arch_reclaim();
	pthread_mutex_unlock(&kp_registry_lock);
	return n;
}
