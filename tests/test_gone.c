/* Probes on an object that dlclose() unloads become [GONE]; they can still
 * be unregistered, and other code is not mistaken for them. */
#include "testutil.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int hits;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	return 0;
}

/* build/tests/libkpgone.so (tests/dl/), next to this binary's directory. */
static const char *gone_lib(void)
{
	static char path[PATH_MAX];
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = 0;
	snprintf(path, sizeof(path), "%s/../tests/libkpgone.so", dirname(exe));
	cr_assert_eq(access(path, R_OK), 0, "%s missing (make it)", path);
	return path;
}

Test(gone, dlclose_marks_probes_gone)
{
	const char *lib = gone_lib();
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	long (*cube)(long);
	struct kprobe kp = { .symbol_name = "libkpgone.so:kpgone_cube", .pre_handler = count_hit };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	cr_assert_not_null(h, "%s", dlerror());
	cube = (long (*)(long))dlsym(h, "kpgone_cube");
	cr_assert_not_null(cube);

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(cube(3), 27);
	cr_assert_eq(hits, 1);
	cr_assert_eq(dlclose(h), 0);
	/* nothing else holds it: it is gone */
	cr_assert_null(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), "%s stays loaded", lib);
	cr_assert(kp.flags & KPROBE_FLAG_GONE, "flags %#x", kp.flags);
	cr_assert(!(kp.flags & KPROBE_FLAG_OPTIMIZED));
	f = open_memstream(&buf, &len);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	cr_assert_not_null(strstr(buf, "kpgone_cube+0x0  [libkpgone.so]  [GONE]"), "list: %s", buf);
	free(buf);
	unregister_kprobe(&kp);
	/* loading it again works, unprobed */
	h = dlopen(lib, RTLD_NOW);
	cr_assert_not_null(h);
	cube = (long (*)(long))dlsym(h, "kpgone_cube");
	cr_assert_eq(cube(4), 64);
	cr_assert_eq(hits, 1);
	dlclose(h);
}
