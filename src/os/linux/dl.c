/* Unloading of shared objects: probes on an object that dlclose() unmapped
 * become [GONE]. */
#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <stdlib.h>

#define KP_EXPORT __attribute__((visibility("default")))

#include "os/linux/loader.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

void *kp_next_symbol(const char *name, const char *lib)
{
	void *fn = dlsym(RTLD_NEXT, name), *h;

	if (fn)
		return fn;
	/* the handle is kept: the object stays loaded as it was */
	h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen(lib, RTLD_LAZY);
	return h ? dlsym(h, name) : NULL;
}

KP_EXPORT int dlclose(void *handle)
{
	static int (*real)(void *);
	struct kp_thread *t;
	int ret;

	if (!real) {
		t = kp_lib_code_begin();
		real = (int (*)(void *))kp_next_symbol("dlclose", LIBC_SO);
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
