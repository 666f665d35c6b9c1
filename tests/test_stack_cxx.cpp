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

static unsigned long mid_ra, top_ra;
static volatile int recording;	// the return addresses, in a run without probes

NOFP long cxx_middle(long x)
{
	Guard g{x};

	if (recording)
		mid_ra = (unsigned long)__builtin_return_address(0);

	fp_thrower(x);
	return x;
}

static long (*volatile fp_middle)(long) = cxx_middle;

NOFP long cxx_top(long x)
{
	if (recording)
		top_ra = (unsigned long)__builtin_return_address(0);
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

// One call site for the recording run and the probed one.
NOFP long cxx_run(long x)
{
	long r = cxx_top(x);

	__asm__ volatile("" : "+r"(r));
	return r;
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

// Without gdb: at the destructor's probe, while the exception passes a
// return-probed frame, kprobes_stack() shows cxx_middle's real return
// address (its slot holds the stub) and the callers above.
static unsigned long dtor_ips[64];
static int dtor_n, leaf_hits;

static int leaf_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (leaf_hits++ == 0)
		dtor_n = kprobes_stack(regs, dtor_ips, 64);
	return 0;
}

static bool has_ip(unsigned long ip)
{
	for (int i = 0; i < dtor_n; i++)
		if (dtor_ips[i] == ip)
			return true;
	return false;
}

Test(stack_cxx, destructor_during_unwinding_through_a_return_probed_frame)
{
	struct kprobe leaf = {};
	struct kretprobe mid = {};

	recording = 1;
	cr_assert_eq(cxx_run(5), 18);
	recording = 0;
	leaf.addr = (kprobe_opcode_t *)cxx_leaf;
	leaf.pre_handler = leaf_pre;
	mid.kp.addr = (kprobe_opcode_t *)cxx_middle;
	cr_assert_eq(register_kprobe(&leaf), 0);
	cr_assert_eq(register_kretprobe(&mid), 0);
	cr_assert_eq(cxx_run(5), 18);
	unregister_kprobe(&leaf);
	unregister_kretprobe(&mid);
	cr_assert_eq(leaf_hits, 2, "the destructor and the catch block");
	cr_assert_gt(dtor_n, 3);
	cr_expect_eq(dtor_ips[0], (unsigned long)cxx_leaf + 1);
	cr_expect(has_ip(mid_ra), "cxx_middle's real return address is missing (%d frames)", dtor_n);
	cr_expect(has_ip(top_ra), "cxx_top's return address is missing (%d frames)", dtor_n);
}
