/*
 * Return stubs: one tiny stub per return-probe instance, with unwind
 * information of its own:
 *
 *   S+0  lea 8(%rsp),%rsp        entry, from an optimized function entry
 *   S+5  call *-8(%rsp)          the copied instructions (their address
 *                                is in the return address's slot)
 *   S+9  jmp trampoline          the return point
 *
 * A return-probed frame's return address is its instance's return point,
 * and the stub's CFI says where the real return address is (in the
 * instance), so any unwinder — C++ exceptions, pthread_cancel's forced
 * unwind, backtrace() — walks through return-probed frames to the real
 * callers.
 *
 * A breakpoint or a generic optimized entry just writes the return point
 * into the slot: the function's return then goes where the processor's
 * return predictor did not expect.  The fast set-up of an optimized entry
 * (with the detour's continuing exit) has the function called from the
 * stub instead: its return is predicted, and so is the trampoline's
 * return to the caller.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "os/linux/ehframe.h"
#include "os/linux/execmem.h"
#include "arch/x86_64/jitdebug.h"
#include "os/linux/memory.h"

#define STUB_SIZE 16
#define STUB_RET ARCH_RET_STUB_ENTRY	/* the return point's offset */

static struct exec_arena arena = { .unit = STUB_SIZE, .meta_size = 1 };

struct ret_stubs {
	int n;
	uintptr_t *stub;	/* the return point of each stub */
	struct kp_ehframe eh;	/* the stubs' unwind information */
	struct kp_jit_object *jit;	/* the same for debuggers */
};

/* The stub at unit address at, into code. */
static void make_stub(uint8_t *code, uintptr_t at, uintptr_t tramp)
{
	static const uint8_t tmpl[STUB_SIZE] = {
		0x48, 0x8d, 0x64, 0x24, 0x08,	/* lea 8(%rsp),%rsp */
		0xff, 0x54, 0x24, 0xf8,		/* call *-8(%rsp) */
		0xe9, 0, 0, 0, 0,		/* jmp trampoline */
		0xcc, 0xcc,
	};
	int32_t rel = (int32_t)(tramp - (at + STUB_RET + 5));

	memcpy(code, tmpl, sizeof(tmpl));
	memcpy(code + STUB_RET + 1, &rel, 4);
}

/* A return probe has a stub per instance, hundreds of them, in units the
 * arena hands out one after the other: each run of them (at most RUN_MAX)
 * goes in one write. */
#define RUN_MAX 64

static int write_stubs(const struct ret_stubs *rs, uintptr_t tramp)
{
	uint8_t code[RUN_MAX * STUB_SIZE];

	for (int i = 0, k; i < rs->n; i += k) {
		uintptr_t first = rs->stub[i] - STUB_RET;

		k = exec_run_length(rs->stub + i, rs->n - i, STUB_SIZE, RUN_MAX);
		for (int j = 0; j < k; j++)
			make_stub(code + j * STUB_SIZE, first + (uintptr_t)j * STUB_SIZE, tramp);
		if (kp_mem_write(first, code, (size_t)k * STUB_SIZE))
			return -EFAULT;
	}
	return 0;
}

void arch_ret_stubs_destroy(struct ret_stubs *rs)
{
	if (!rs)
		return;
	kp_jit_unregister(rs->jit);
	kp_ehframe_release(&rs->eh);
	for (int i = 0; i < rs->n; i++)
		if (rs->stub[i])
			exec_free(&arena, rs->stub[i] - STUB_RET);
	free(rs->stub);
	free(rs);
}

/* n stubs; ret_loc(i, arg) is where instance i keeps its real return
 * address.  Caller holds the registry lock. */
struct ret_stubs *arch_ret_stubs_create(int n, uintptr_t (*ret_loc)(int, void *), void *arg)
{
	uintptr_t tramp = arch_kretprobe_trampoline(), lo, hi, code_lo = UINTPTR_MAX, code_hi = 0;
	struct ret_stubs *rs = calloc(1, sizeof(*rs));
	void *meta;

	if (!rs || !(rs->stub = calloc((size_t)n, sizeof(*rs->stub))))
		goto fail;
	rs->n = n;
	exec_reach_window(&tramp, 1, &lo, &hi);
	for (int i = 0; i < n; i++) {
		uintptr_t at = exec_alloc(&arena, lo, hi, &meta);

		if (!at)
			goto fail;
		rs->stub[i] = at + STUB_RET;
		code_lo = at < code_lo ? at : code_lo;
		code_hi = at + STUB_SIZE > code_hi ? at + STUB_SIZE : code_hi;
	}
	if (write_stubs(rs, tramp))
		goto fail;
	/* Without it the stubs still work; unwinders stop at them. */
	kp_ehframe_build(&rs->eh, n, rs->stub, STUB_RET, STUB_SIZE, ret_loc, arg);
	if (rs->eh.buf)
		rs->jit = kp_jit_register("kprobes_return_stub", code_lo, code_hi, rs->eh.buf,
					  rs->eh.size);
	return rs;
fail:
	arch_ret_stubs_destroy(rs);
	return NULL;
}

uintptr_t arch_ret_stub(const struct ret_stubs *rs, int i)
{
	return rs->stub[i];
}

/* Is ip where a thread has left a detour for a stub's call into it?  A
 * census counts it as inside every detour (threads.c). */
bool arch_ip_bound_for_detour(uintptr_t ip)
{
	uintptr_t unit;

	return exec_meta_of(&arena, ip, &unit) && ip - unit < STUB_RET;
}
