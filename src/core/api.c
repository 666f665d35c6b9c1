/* The public kprobe calls: thin wrappers over the registry. */
#include <errno.h>

#include "core/internal.h"
#include "os/linux/memory.h"

int kp_register_batch(struct kprobe **ps, int n, enum kp_type type);
void kp_unregister_batch(struct kprobe **ps, int n);
int kp_set_disabled(struct kprobe *p, bool disabled);

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

KP_EXPORT unsigned long regs_get_kernel_argument(struct pt_regs *regs, unsigned int n)
{
	static const size_t arg_regs[] = {
		offsetof(struct pt_regs, di), offsetof(struct pt_regs, si),
		offsetof(struct pt_regs, dx), offsetof(struct pt_regs, cx),
		offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9),
	};
	unsigned long v = 0;

	if (n < 6)
		return *(unsigned long *)((char *)regs + arg_regs[n]);
	/* At the entry, sp points at the return address; then args 7.. */
	if (kp_mem_read_nofault(regs->sp + 8 * (n - 5), &v, sizeof(v)))
		return 0;
	return v;
}
