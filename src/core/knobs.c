/* The global knobs: "enabled" (arm/disarm everything) and "optimization". */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/wprobe.h"

bool kp_knob_enabled = true;
/* Never on where the architecture has no jump optimization
 * (ARCH_HAS_OPTPROBES, asm/kprobes.h): kprobes_optimization() says so. */
bool kp_knob_optimize = ARCH_HAS_OPTPROBES;
/* Boosting (no second trap without post handlers); off only to measure
 * the single-stepped path. */
bool kp_knob_boost = true;

void kp_set_boost(bool on)
{
	__atomic_store_n(&kp_knob_boost, on, __ATOMIC_RELAXED);
}

static bool env_flag(const char *name, bool dflt)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0;
}

void kp_knobs_init(void)
{
	kp_knob_enabled = env_flag("KPROBES_ENABLED", true);
	kp_knob_optimize = ARCH_HAS_OPTPROBES && env_flag("KPROBES_OPTIMIZATION", true);
}

KP_EXPORT void kprobes_set_enabled(bool on)
{
	if (kp_init())
		return;
	pthread_mutex_lock(&kp_registry_lock);
	if (kp_knob_enabled != on) {
		kp_knob_enabled = on;
		kp_rearm_all();
		kp_wprobes_rearm();
	}
	pthread_mutex_unlock(&kp_registry_lock);
}

KP_EXPORT bool kprobes_enabled(void)
{
	kp_init();
	return __atomic_load_n(&kp_knob_enabled, __ATOMIC_RELAXED);
}

KP_EXPORT void kprobes_set_optimization(bool on)
{
	if (kp_init())
		return;
	pthread_mutex_lock(&kp_registry_lock);
	kp_knob_optimize = on && ARCH_HAS_OPTPROBES;
	for (struct kp_probepoint *pp = kp_all_probepoints; pp; pp = pp->all_next)
		kp_optimizer_reevaluate(pp);
	pthread_mutex_unlock(&kp_registry_lock);
}

KP_EXPORT bool kprobes_optimization(void)
{
	kp_init();
	return __atomic_load_n(&kp_knob_optimize, __ATOMIC_RELAXED);
}
