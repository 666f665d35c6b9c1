/*
 * kprobe_module_example: a Kprobes "module" for `kprobe load`.
 *
 * Like a kernel module that registers a kretprobe in its init and
 * unregisters it in its exit, this shared object is loaded into a target
 * by the tool:
 *
 *   kprobe load build/examples/kprobe_module_example.so FUNCTION [MAX] -- COMMAND
 *   kprobe load build/examples/kprobe_module_example.so FUNCTION [MAX] -p PID
 *
 * It prints the first MAX calls of FUNCTION (default 10) with their first
 * two integer arguments and the return value, and at the end how many
 * calls there were.  Lines go to the tool's output with kprobe_printk().
 * Built without -lkprobes: the agent provides the library.
 */
#include <kprobes.h>
#include <kprobes/module.h>
#include <stdlib.h>
#include <string.h>

struct call_args {
	unsigned long a, b;
};

static char function[128];
static long max_lines = 10;
static long calls;		/* updated atomically: any thread may call */

static int on_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct call_args *args = (struct call_args *)ri->data;

	args->a = regs_get_kernel_argument(regs, 0);
	args->b = regs_get_kernel_argument(regs, 1);
	return 0;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const struct call_args *args = (const struct call_args *)ri->data;
	long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);

	if (n <= max_lines)
		kprobe_printk("%s(%ld, %ld) = %ld [tid %d]\n", function, (long)args->a,
			      (long)args->b, (long)regs_return_value(regs), (int)ri->task);
	return 0;
}

static struct kretprobe rp = {
	.entry_handler = on_entry,
	.handler = on_return,
	.data_size = sizeof(struct call_args),
	.maxactive = 64,
};

int kprobe_module_init(int argc, char **argv)
{
	int rc;

	if (argc < 2) {
		kprobe_printk("usage: %s FUNCTION [MAX]", argv[0]);
		return -22;	/* EINVAL */
	}
	strncpy(function, argv[1], sizeof(function) - 1);
	if (argc > 2)
		max_lines = atol(argv[2]);
	rp.kp.symbol_name = function;
	rc = register_kretprobe(&rp);
	if (rc < 0)
		return rc;
	kprobe_printk("probing %s at %p", function, (void *)rp.kp.addr);
	return 0;
}

void kprobe_module_exit(void)
{
	unregister_kretprobe(&rp);
	kprobe_printk("%s: %ld calls, %d missed", function,
		      __atomic_load_n(&calls, __ATOMIC_RELAXED), rp.nmissed);
}
