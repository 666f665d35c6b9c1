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
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/x86_64/detour.h"
#include "os/linux/execmem.h"
#include "arch/x86_64/jitdebug.h"
#include "os/linux/memory.h"

#define STUB_SIZE 16
#define STUB_RET ARCH_RET_STUB_ENTRY	/* the return point's offset */
#define DW_CFA_def_cfa 0x0c
#define DW_CFA_expression 0x10
#define DW_OP_addr 0x03
#define DW_REG_RSP 7
#define DW_REG_RA 16

static struct exec_arena arena = { .unit = STUB_SIZE, .meta_size = 1 };

struct ret_stubs {
	int n;
	uintptr_t *stub;	/* the return point of each stub */
	uint8_t *eh_frame;	/* registered with the unwinder, or NULL */
	bool registered;	/* with libgcc's frame registry */
	struct kp_jit_object *jit;	/* the same for debuggers */
};

typedef void (*register_frame_fn)(void *);

/* libgcc's frame registry, the one every unwinder of the process uses.
 * The dlopen() (once per process) stays outside the loader lock, which is a
 * leaf: a dlopen() may run the kprobe agent's hook, which registers probes.
 * RTLD_LOCAL: the process has one libgcc_s either way, and a dlopen()
 * that added to the global scope before the program's initializers ran
 * (the kprobe agent may arm that early) would break the loader's list of
 * initializers. */
static register_frame_fn frame_fn(const char *name)
{
	void *fn = dlsym(RTLD_DEFAULT, name), *h;

	if (!fn && (h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)))
		fn = dlsym(h, name);
	return (register_frame_fn)fn;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
	return p + 8;
}

/* CIE: CFA = rsp at the stub (the caller's stack pointer after return). */
static uint8_t *put_cie(uint8_t *p)
{
	static const uint8_t body[] = {
		0, 0, 0, 0,		/* CIE id */
		1,			/* version */
		'z', 'R', 0,		/* augmentation */
		1,			/* code alignment */
		0x78,			/* data alignment -8 (sleb128) */
		DW_REG_RA,		/* return address column */
		1, 0x00,		/* augmentation data: absolute pointers */
		DW_CFA_def_cfa, DW_REG_RSP, 0,
		0, 0, 0, 0,		/* DW_CFA_nop padding to 24 bytes */
	};

	p = put32(p, sizeof(body));
	memcpy(p, body, sizeof(body));
	return p + sizeof(body);
}

/* FDE of one stub: the return address is stored at *ret_loc. */
static uint8_t *put_fde(uint8_t *p, const uint8_t *cie, uintptr_t start, uintptr_t ret_loc)
{
	uint8_t *len = p;

	p = put32(p, 0);
	p = put32(p, (uint32_t)(p - cie));
	p = put64(p, start);
	p = put64(p, STUB_SIZE);
	*p++ = 0;			/* augmentation data length */
	*p++ = DW_CFA_expression;
	*p++ = DW_REG_RA;
	*p++ = 9;
	*p++ = DW_OP_addr;
	p = put64(p, ret_loc);
	while ((p - len) % 8)
		*p++ = 0;		/* DW_CFA_nop */
	put32(len, (uint32_t)(p - len - 4));
	return p;
}

static int write_stub(uintptr_t at, uintptr_t tramp)
{
	uint8_t code[STUB_SIZE] = {
		0x48, 0x8d, 0x64, 0x24, 0x08,	/* lea 8(%rsp),%rsp */
		0xff, 0x54, 0x24, 0xf8,		/* call *-8(%rsp) */
		0xe9, 0, 0, 0, 0,		/* jmp trampoline */
		0xcc, 0xcc,
	};
	int32_t rel = (int32_t)(tramp - (at + STUB_RET + 5));

	memcpy(code + STUB_RET + 1, &rel, 4);
	return kp_mem_write(at, code, sizeof(code));
}

void arch_ret_stubs_destroy(struct ret_stubs *rs)
{
	register_frame_fn deregister;

	if (!rs)
		return;
	kp_jit_unregister(rs->jit);
	if (rs->registered && (deregister = frame_fn("__deregister_frame")))
		deregister(rs->eh_frame);
	for (int i = 0; i < rs->n; i++)
		if (rs->stub[i])
			exec_free(&arena, rs->stub[i] - STUB_RET);
	free(rs->eh_frame);
	free(rs->stub);
	free(rs);
}

/* n stubs; ret_loc(i, arg) is where instance i keeps its real return
 * address.  Caller holds the registry lock. */
struct ret_stubs *arch_ret_stubs_create(int n, uintptr_t (*ret_loc)(int, void *), void *arg)
{
	uintptr_t tramp = arch_kretprobe_trampoline(), lo, hi, code_lo = UINTPTR_MAX, code_hi = 0;
	struct ret_stubs *rs = calloc(1, sizeof(*rs));
	register_frame_fn reg = frame_fn("__register_frame");
	uint8_t *p;
	void *meta;

	if (!rs || !(rs->stub = calloc((size_t)n, sizeof(*rs->stub))))
		goto fail;
	rs->n = n;
	exec_reach_window(&tramp, 1, &lo, &hi);
	for (int i = 0; i < n; i++) {
		uintptr_t at = exec_alloc(&arena, lo, hi, &meta);

		if (!at || write_stub(at, tramp))
			goto fail;
		rs->stub[i] = at + STUB_RET;
		code_lo = at < code_lo ? at : code_lo;
		code_hi = at + STUB_SIZE > code_hi ? at + STUB_SIZE : code_hi;
	}
	rs->eh_frame = malloc(28 + (size_t)n * 48 + 4);
	if (!rs->eh_frame)
		return rs;	/* stubs still work, unwinders stop at them */
	p = put_cie(rs->eh_frame);
	for (int i = 0; i < n; i++)
		p = put_fde(p, rs->eh_frame, rs->stub[i] - STUB_RET, ret_loc(i, arg));
	put32(p, 0);
	if (reg) {
		reg(rs->eh_frame);
		rs->registered = true;
	}
	rs->jit = kp_jit_register("kprobes_return_stub", code_lo, code_hi, rs->eh_frame,
				  (size_t)(p - rs->eh_frame));
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
