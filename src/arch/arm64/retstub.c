/*
 * Return stubs (arm64): one stub per return-probe instance, with unwind
 * information of its own:
 *
 *   S+0  BRK #0x6b73          never run: "return address - 1" lookups of
 *                             unwinders land in the stub's FDE
 *   S+4  B trampoline         the return point
 *
 * A return-probed function's x30 is hijacked at its entry with its
 * instance's return point, and the stub's CFI says where the real return
 * address is (in the instance: CFA = sp, x30 = *ret_loc), so any unwinder
 * (C++ exceptions, pthread_cancel's forced unwind, backtrace()) walks
 * through return-probed frames to the real callers.  The stubs are placed
 * within a B's reach of the trampoline.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "os/linux/ehframe.h"
#include "os/linux/execmem.h"
#include "arch/arm64/text_poke.h"
#include "arch/arm64/xol.h"

#define STUB_SIZE 8
#define STUB_RET ARCH_RET_STUB_ENTRY	/* the return point's offset */
#define A64_BRK_STUB_IMM 0x6b73

static struct exec_arena arena = { .unit = STUB_SIZE, .meta_size = 1 };

struct ret_stubs {
	int n;
	uintptr_t *stub;	/* the return point of each stub */
	struct kp_ehframe eh;	/* the stubs' unwind information */
};

/* A return probe has a stub per instance, hundreds of them, in units the
 * arena hands out one after the other: each run of them (at most RUN_MAX)
 * goes in one write. */
#define RUN_MAX 64

static int write_stubs(const struct ret_stubs *rs, uintptr_t tramp)
{
	uint32_t code[RUN_MAX * 2];

	for (int i = 0, k; i < rs->n; i += k) {
		uintptr_t first = rs->stub[i] - STUB_RET;

		k = exec_run_length(rs->stub + i, rs->n - i, STUB_SIZE, RUN_MAX);
		for (int j = 0; j < k; j++) {
			code[2 * j] = A64_BRK(A64_BRK_STUB_IMM);
			if (!a64_b(first + (uintptr_t)j * STUB_SIZE + STUB_RET, tramp, &code[2 * j + 1]))
				return -EINVAL;
		}
		if (text_write_fresh(first, code, 2 * k))
			return -EFAULT;
	}
	return 0;
}

void arch_ret_stubs_destroy(struct ret_stubs *rs)
{
	if (!rs)
		return;
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
	uintptr_t tramp = arch_kretprobe_trampoline(), lo, hi;
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
	}
	if (write_stubs(rs, tramp))
		goto fail;
	/* Without it the stubs still work; unwinders stop at them. */
	kp_ehframe_build(&rs->eh, n, rs->stub, STUB_RET, STUB_SIZE, ret_loc, arg);
	return rs;
fail:
	arch_ret_stubs_destroy(rs);
	return NULL;
}

uintptr_t arch_ret_stub(const struct ret_stubs *rs, int i)
{
	return rs->stub[i];
}
