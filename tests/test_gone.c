/* Probes on an object that dlclose() unloads become [GONE]; they can still
 * be unregistered, and other code is not mistaken for them. */
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int hits;

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	hits++;
	return 0;
}

Test(gone, dlclose_marks_probes_gone)
{
	void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	double (*cbrt_fn)(double);
	struct kprobe kp = { .symbol_name = "libm.so.6:cbrt", .pre_handler = count_hit };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	cr_assert_not_null(h);
	if (dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD) != h)
		cr_skip_test("libm.so.6 cannot be unloaded here");
	dlclose(h);	/* the NOLOAD reference */
	cbrt_fn = (double (*)(double))dlsym(h, "cbrt");
	double want = cbrt_fn(27.0);

	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(cbrt_fn(27.0), want);
	cr_assert_eq(hits, 1);
	cr_assert_eq(dlclose(h), 0);
	if (dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD))
		cr_skip_test("libm.so.6 stays loaded (another user holds it)");
	cr_assert(kp.flags & KPROBE_FLAG_GONE, "flags %#x", kp.flags);
	cr_assert(!(kp.flags & KPROBE_FLAG_OPTIMIZED));
	f = open_memstream(&buf, &len);
	cr_assert_eq(kprobes_list(f), 0);
	fclose(f);
	cr_assert_not_null(strstr(buf, "cbrt+0x0  [libm.so.6]  [GONE]"), "list: %s", buf);
	free(buf);
	unregister_kprobe(&kp);
	/* loading it again works, unprobed */
	h = dlopen("libm.so.6", RTLD_NOW);
	cr_assert_not_null(h);
	cbrt_fn = (double (*)(double))dlsym(h, "cbrt");
	cr_assert_eq(cbrt_fn(27.0), want);
	cr_assert_eq(hits, 1);
	dlclose(h);
}
