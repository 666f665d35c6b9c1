/* An object linked against libkprobes.so that a program preloads
 * (LD_PRELOAD): its constructor probes write() and its destructor says how
 * many calls the probe saw.  A preloaded object's dependencies come after
 * the program's in the lookup order, libc among them, so the library's own
 * look-ups of the libc functions it wraps cannot rely on RTLD_NEXT. */
#include <stdio.h>

#include <kprobes.h>

static long hits;
static struct kprobe kp = { .symbol_name = "write" };

static int count_hit(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}

__attribute__((constructor)) static void probe_write(void)
{
	int rc;

	kp.pre_handler = count_hit;
	rc = register_kprobe(&kp);
	if (rc)
		fprintf(stderr, "preload: register_kprobe: %d\n", rc);
}

__attribute__((destructor)) static void report(void)
{
	unregister_kprobe(&kp);
	fprintf(stderr, "preload: write hits %ld\n", hits);
}
