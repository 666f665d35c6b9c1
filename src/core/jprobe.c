/* Jprobes, from the classic Kprobes: the entry function runs with the
 * probed function's registers and a copy of its stack, then
 * jprobe_return() puts the original state back and the function runs
 * unchanged. */
#include <errno.h>
#include <stdlib.h>

#include "core/internal.h"
#include "os/linux/threads.h"

static int jprobe_entry(struct kprobe *p, struct pt_regs *regs)
{
	struct jprobe *jp = container_of(p, struct jprobe, kp);
	struct kp_thread *t = kp_thread_self();

	if (t->jprobe_pp || arch_jprobe_save(t, regs)) {
		__atomic_fetch_add(&p->nmissed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	t->jprobe_pp = p->__pp;
	/* Probes hit while the entry function runs count as missed, as while
	 * any handler runs; jprobe_return() lowers this again. */
	t->in_handler++;
	instruction_pointer_set(regs, (unsigned long)jp->entry);
	return 1;
}

static struct kprobe **jprobe_kps(struct jprobe **jps, int num, bool setup)
{
	struct kprobe **kps = calloc((size_t)num, sizeof(*kps));

	for (int i = 0; kps && i < num; i++) {
		if (!jps[i] && !setup)
			continue;	/* unregistering skips NULLs */
		if (!jps[i] || (setup && !jps[i]->entry)) {
			free(kps);
			return NULL;
		}
		if (setup) {
			jps[i]->kp.pre_handler = jprobe_entry;
			jps[i]->kp.post_handler = NULL;
		}
		kps[i] = &jps[i]->kp;
	}
	return kps;
}

KP_EXPORT int register_jprobes(struct jprobe **jps, int num)
{
	struct kprobe **kps;
	int err;

	if (num <= 0 || !jps)
		return num == 0 ? 0 : -EINVAL;
	kps = jprobe_kps(jps, num, true);
	if (!kps)
		return -EINVAL;
	err = kp_register_batch(kps, num, KP_TYPE_JPROBE);
	free(kps);
	return err;
}

KP_EXPORT int register_jprobe(struct jprobe *jp)
{
	return register_jprobes(&jp, 1);
}

KP_EXPORT void unregister_jprobes(struct jprobe **jps, int num)
{
	struct kprobe **kps;

	if (num <= 0 || !jps)
		return;
	void **pps;

	kps = jprobe_kps(jps, num, false);
	pps = calloc((size_t)num, sizeof(*pps));
	if (kps && pps) {
		for (int i = 0; i < num; i++)
			pps[i] = kps[i] ? kps[i]->__pp : NULL;
		kp_unregister_batch(kps, num);
		/* An entry function started before is still running: it
		 * uses the jprobe until its jprobe_return(). */
		for (int i = 0; i < num; i++)
			if (pps[i])
				kp_wait_jprobes_left(pps[i]);
	} else if (kps) {
		kp_unregister_batch(kps, num);
	}
	free(pps);
	free(kps);
}

KP_EXPORT void unregister_jprobe(struct jprobe *jp)
{
	unregister_jprobes(&jp, 1);
}

KP_EXPORT int disable_jprobe(struct jprobe *jp)
{
	return jp ? disable_kprobe(&jp->kp) : -EINVAL;
}

KP_EXPORT int enable_jprobe(struct jprobe *jp)
{
	return jp ? enable_kprobe(&jp->kp) : -EINVAL;
}
