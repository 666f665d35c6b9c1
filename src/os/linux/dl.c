/* Unloading of shared objects: probes on an object that dlclose() unmapped
 * become [GONE]. */
#include <dlfcn.h>
#include <stdlib.h>

#define KP_EXPORT __attribute__((visibility("default")))

#include "os/linux/upcalls.h"

KP_EXPORT int dlclose(void *handle)
{
	static int (*real)(void *);
	int ret;

	if (!real)
		real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	if (!real)
		abort();
	ret = real(handle);
	if (ret == 0) {
		void (*unloaded)(void) = kp_os_upcall_get(objects_unloaded);
		void (*changed)(void) = kp_os_upcall_get(stack_objects_changed);

		if (unloaded)
			unloaded();
		if (changed)
			changed();
	}
	return ret;
}

/* Referenced from registry.c so that static links keep the interposer. */
char kp_dl_interposer;
