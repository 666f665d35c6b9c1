/* The public kprobe calls: thin wrappers over the registry. */
#include <errno.h>

#include "core/internal.h"

KP_EXPORT int register_kprobe(struct kprobe *p)
{
	return kp_register_batch(&p, 1, KP_TYPE_KPROBE);
}

KP_EXPORT void unregister_kprobe(struct kprobe *p)
{
	kp_unregister_batch(&p, 1);
}

KP_EXPORT int register_kprobes(struct kprobe **kps, int num)
{
	return kp_register_batch(kps, num, KP_TYPE_KPROBE);
}

KP_EXPORT void unregister_kprobes(struct kprobe **kps, int num)
{
	kp_unregister_batch(kps, num);
}

KP_EXPORT int disable_kprobe(struct kprobe *p)
{
	return kp_set_disabled(p, true);
}

KP_EXPORT int enable_kprobe(struct kprobe *p)
{
	return kp_set_disabled(p, false);
}
