// Stacks at probe hits while a C++ exception is in flight: in a destructor
// run by the unwinder, in the personality routine (libstdc++, called by
// libgcc's unwinder, both without frame pointers), in a catch block, and
// through a return-probed frame the exception passes.  kprobes_stack()
// must equal gdb's unwind at the same point (stack_oracle.h).
#include <stdexcept>

extern "C" {
#include "kprobes.h"
#include "core/internal.h"
#include "os/linux/threads.h"
}

#include "testutil.h"
#include "stack_oracle.h"

TestSuite(stack_cxx, .timeout = 60);

#define NOFP __attribute__((noinline, noclone, used, optimize("omit-frame-pointer")))

NOFP long cxx_leaf(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3;
}

static long (*volatile fp_cxx_leaf)(long) = cxx_leaf;

struct Guard {
	long v;
	~Guard() { fp_cxx_leaf(v); }
};

NOFP void cxx_thrower(long x)
{
	if (x >= 0)
		throw std::runtime_error("in flight");
}

static void (*volatile fp_thrower)(long) = cxx_thrower;

NOFP long cxx_middle(long x)
{
	Guard g{x};

	fp_thrower(x);
	return x;
}

static long (*volatile fp_middle)(long) = cxx_middle;

NOFP long cxx_top(long x)
{
	try {
		return fp_middle(x);
	} catch (const std::exception &) {
		return fp_cxx_leaf(x + 1);
	}
}

static int personality_hits;

static int personality_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (personality_hits++ >= 2)
		return 0;
	return oracle_pre(p, regs);
}

static void exception_scenario(void)
{
	struct kprobe leaf = {};
	struct kprobe pers = {};
	struct kretprobe mid = {};

	leaf.addr = (kprobe_opcode_t *)cxx_leaf;
	leaf.pre_handler = oracle_pre;
	pers.symbol_name = "__gxx_personality_v0";
	pers.pre_handler = personality_pre;
	mid.kp.addr = (kprobe_opcode_t *)cxx_middle;
	kprobes_set_optimization(false);
	if (register_kprobe(&leaf) || register_kprobe(&pers) || register_kretprobe(&mid))
		_exit(4);
	if (cxx_top(5) != 18)
		_exit(6);
	unregister_kprobe(&leaf);
	unregister_kprobe(&pers);
	unregister_kretprobe(&mid);
}

Test(stack_cxx, gdb_exception_in_flight)
{
	// the destructor, the catch block, two calls of the personality routine
	expect_gdb_stacks(exception_scenario, 4);
}
