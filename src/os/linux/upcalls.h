/*
 * What the OS layer tells the layers above it.  It calls nothing above by
 * name: the core and the architecture register these functions (a plain
 * store each, idempotent) before they have anything to be told about, and
 * an upcall not registered yet is one with nothing to do.
 */
#ifndef KP_OS_UPCALLS_H
#define KP_OS_UPCALLS_H

#include <stdbool.h>
#include <stdint.h>

struct kp_os_upcalls {
	/* dlclose() unmapped something: probes there become gone (core,
	 * registered at initialization), and the unwind tables of stacks
	 * change (core, registered when they are first built). */
	void (*objects_unloaded)(void);
	void (*stack_objects_changed)(void);
	/* The unwinder interposers: return addresses of return-probed frames
	 * put back for an unwinder and re-hijacked after (release: the
	 * thread is leaving), and the frames an exception caught at cfa left
	 * (core/kretprobe.c). */
	void (*ret_unhijack)(bool release);
	void (*ret_rehijack)(void);
	void (*ret_after_catch)(uintptr_t cfa);
	/* The census: is ip on the way into a detour from outside it (a
	 * return stub's call)?  Signal context (the architecture). */
	bool (*ip_bound_for_detour)(uintptr_t ip);
};

extern struct kp_os_upcalls kp_os_upcalls;

#define kp_os_upcall_set(name, fn) __atomic_store_n(&kp_os_upcalls.name, (fn), __ATOMIC_RELEASE)
#define kp_os_upcall_get(name) __atomic_load_n(&kp_os_upcalls.name, __ATOMIC_ACQUIRE)

#endif
