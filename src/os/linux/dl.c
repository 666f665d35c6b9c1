/* Unloading of shared objects: probes on an object that dlclose() unmapped
 * become [GONE]. */
#include <dlfcn.h>
#include <stdlib.h>

#define KP_EXPORT __attribute__((visibility("default")))

void kp_objects_unloaded(void);
void kp_stack_objects_changed(void);

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
		kp_objects_unloaded();
		kp_stack_objects_changed();
	}
	return ret;
}

/* Referenced from registry.c so that static links keep the interposer. */
char kp_dl_interposer;
