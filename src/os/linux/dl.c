/* Unloading of shared objects: probes on an object that dlclose() unmapped
 * become [GONE]. */
#include <dlfcn.h>
#include <stdlib.h>

#define KP_EXPORT __attribute__((visibility("default")))

#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

KP_EXPORT int dlclose(void *handle)
{
	static int (*real)(void *);
	struct kp_thread *t;
	int ret;

	if (!real) {
		t = kp_lib_code_begin();
		real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
		kp_lib_code_end(t);
	}
	if (!real)
		abort();
	/* The program's own call: its probes fire as usual. */
	ret = real(handle);
	if (ret == 0) {
		void (*unloaded)(void) = kp_os_upcall_get(objects_unloaded);
		void (*changed)(void) = kp_os_upcall_get(stack_objects_changed);

		/* The loader walks and locks here are the library's. */
		t = kp_lib_code_begin();
		if (unloaded)
			unloaded();
		if (changed)
			changed();
		kp_lib_code_end(t);
	}
	return ret;
}

/* Referenced from registry.c so that static links keep the interposer. */
char kp_dl_interposer;
