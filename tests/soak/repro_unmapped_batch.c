/* Reproduction: one optimizer batch with a probe whose code was just
 * unmapped (dlclose() has unmapped the object but its interposer has not
 * yet marked the probes GONE) leaves the other probes of the batch with
 * the jump's displacement written over their code and no jump: the
 * instructions after the first are corrupted for good.
 *
 *   repro-unmapped-batch PLUGIN.so
 *
 * The window is reproduced deterministically by calling libc's dlclose
 * directly (what the interposer does first) and running an optimizer pass
 * before telling libkprobes.  Exit 0: rp_fn intact; 1: corrupted.
 */
#include <dlfcn.h>
#include <kprobes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

/*   rp_fn+0 mulsd %xmm1,%xmm0 (4)  +4 mulsd %xmm3,%xmm2 (4)
 *   +8 addsd %xmm2,%xmm0 (4)  +12 ret   (st_fdot's code) */
__asm__(".text\n.p2align 4, 0xcc\n"
	".globl rp_fn\n.type rp_fn,@function\nrp_fn:\n"
	"\tmulsd %xmm1, %xmm0\n\tmulsd %xmm3, %xmm2\n\taddsd %xmm2, %xmm0\n\tret\n"
	".size rp_fn, .-rp_fn\n.p2align 4, 0xcc\n");
double rp_fn(double a, double b, double c, double d);

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

long slow_fn(long x);
__attribute__((noinline)) long slow_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static volatile int in_slow;
static void *plugin;
static int (*libc_dlclose)(void *);

/* Holds the optimizer's grace period open: a thread in a breakpoint
 * handler.  (Its post_handler keeps this probe itself unoptimized.) */
static int slow_pre(struct kprobe *p, struct pt_regs *regs)
{
	in_slow = 1;
	usleep(300000);
	return 0;
}

static void slow_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static void *call_slow(void *arg)
{
	return (void *)slow_fn(1);
}

/* What dlclose() does first, while the optimizer is between preparing the
 * batch and installing it: unmap the object. */
static void *unmap_plugin(void *arg)
{
	usleep(100000);
	libc_dlclose(plugin);
	return NULL;
}

static void flush(void)
{
	pthread_mutex_lock(&kp_registry_lock);
	kp_optimizer_flush();
	pthread_mutex_unlock(&kp_registry_lock);
}

/* One attempt; 1 if rp_fn's code was left corrupted. */
static int attempt(const char *path)
{
	struct kprobe gone = { .symbol_name = "libsoakplugin.so:plug_mid", .pre_handler = pre };
	struct kprobe kp = { .addr = (kprobe_opcode_t *)rp_fn, .pre_handler = pre };
	struct kprobe slow = { .addr = (kprobe_opcode_t *)slow_fn, .pre_handler = slow_pre,
			       .post_handler = slow_post };
	unsigned char before[8], after[8];
	pthread_t t1, t2;

	if (!(plugin = dlopen(path, RTLD_NOW)))
		return fprintf(stderr, "dlopen %s: %s\n", path, dlerror()), 2;
	memcpy(before, (void *)rp_fn, sizeof(before));
	kprobes_set_optimization(false);
	/* queued last-in first: rp_fn's probe comes first in the batch */
	if (register_kprobe(&gone) || register_kprobe(&kp) || register_kprobe(&slow))
		return 2;
	in_slow = 0;
	pthread_create(&t1, NULL, call_slow, NULL);
	while (!in_slow)
		;
	pthread_create(&t2, NULL, unmap_plugin, NULL);
	kprobes_set_optimization(true);		/* both queued, one batch */
	flush();	/* prepares, waits for t1, meanwhile t2 unmaps, installs */
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	dlclose(dlopen("libm.so.6", RTLD_NOW));	/* the interposer: now GONE */
	kprobes_set_optimization(false);
	unregister_kprobe(&kp);
	unregister_kprobe(&gone);
	unregister_kprobe(&slow);
	memcpy(after, (void *)rp_fn, sizeof(after));
	printf("rp_fn: ");
	for (int i = 0; i < 8; i++)
		printf("%02x ", before[i]);
	printf("-> ");
	for (int i = 0; i < 8; i++)
		printf("%02x ", after[i]);
	printf("%s\n", memcmp(before, after, 8) ? "CORRUPTED (no probe left)" : "intact");
	return memcmp(before, after, 8) ? 1 : 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	libc_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	if (argc != 2)
		return fprintf(stderr, "usage: %s libsoakplugin.so\n", argv[0]), 2;
	/* the unmap has to land inside the optimizer's grace period */
	for (int i = 0; i < 5 && !rc; i++)
		rc = attempt(argv[1]);
	return rc;
}
