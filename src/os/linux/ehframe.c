/* .eh_frame for generated code, registered with libgcc (ehframe.h). */
#include "os/linux/ehframe.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "asm/dwarf.h"	/* ARCH_DWARF_SP, ARCH_DWARF_RA */
#include "os/linux/threads.h"

#define DW_CFA_def_cfa 0x0c
#define DW_CFA_expression 0x10
#define DW_OP_addr 0x03

#define CIE_BYTES 24	/* length word and body */
#define FDE_BYTES 48	/* the most one FDE takes, padding included */

typedef void (*register_frame_fn)(void *);

/* libgcc's frame registry.  The dlopen() (once per process) stays outside
 * the loader lock, which is a leaf: a dlopen() may run the kprobe agent's
 * hook, which registers probes.  RTLD_LOCAL: the process has one
 * libgcc_s either way, and a dlopen() that added to the global scope
 * before the program's initializers ran (the kprobe agent may arm that
 * early) would break the loader's list of initializers. */
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

/* CIE: CFA = the stack pointer at the code (the caller's after return). */
static uint8_t *put_cie(uint8_t *p)
{
	static const uint8_t body[] = {
		0, 0, 0, 0,		/* CIE id */
		1,			/* version */
		'z', 'R', 0,		/* augmentation */
		1,			/* code alignment (no advance_loc is used) */
		0x78,			/* data alignment -8 (sleb128) */
		ARCH_DWARF_RA,		/* return address column */
		1, 0x00,		/* augmentation data: absolute pointers */
		DW_CFA_def_cfa, ARCH_DWARF_SP, 0,
		0, 0, 0, 0,		/* DW_CFA_nop padding to 24 bytes */
	};

	_Static_assert(4 + sizeof(body) == CIE_BYTES, "CIE size");
	p = put32(p, sizeof(body));
	memcpy(p, body, sizeof(body));
	return p + sizeof(body);
}

/* FDE of one piece of code: the return address is stored at *ret_loc. */
static uint8_t *put_fde(uint8_t *p, const uint8_t *cie, uintptr_t start, size_t len,
			uintptr_t ret_loc)
{
	uint8_t *head = p;

	p = put32(p, 0);
	p = put32(p, (uint32_t)(p - cie));
	p = put64(p, start);
	p = put64(p, len);
	*p++ = 0;			/* augmentation data length */
	*p++ = DW_CFA_expression;
	*p++ = ARCH_DWARF_RA;
	*p++ = 9;
	*p++ = DW_OP_addr;
	p = put64(p, ret_loc);
	while ((p - head) % 8)
		*p++ = 0;		/* DW_CFA_nop */
	put32(head, (uint32_t)(p - head - 4));
	return p;
}

void kp_ehframe_build(struct kp_ehframe *eh, int n, const uintptr_t *at, size_t before,
		      size_t len, uintptr_t (*ret_loc)(int, void *), void *arg)
{
	register_frame_fn reg = frame_fn("__register_frame");
	struct kp_thread *t;
	uint8_t *p;

	memset(eh, 0, sizeof(*eh));
	/* The allocation and libgcc's registry are the library's calls
	 * (kp_lib_code_begin()); frame_fn()'s dlopen() stays unmarked, as
	 * any load must be seen by whoever watches for new objects. */
	t = kp_lib_code_begin();
	eh->buf = malloc(CIE_BYTES + (size_t)n * FDE_BYTES + 4);
	if (!eh->buf)
		goto out;
	p = put_cie(eh->buf);
	for (int i = 0; i < n; i++)
		p = put_fde(p, eh->buf, at[i] - before, len, ret_loc(i, arg));
	eh->size = (size_t)(p - eh->buf);
	put32(p, 0);			/* the terminator, not counted in size */
	if (reg) {
		reg(eh->buf);
		eh->registered = true;
	}
out:
	kp_lib_code_end(t);
}

void kp_ehframe_release(struct kp_ehframe *eh)
{
	register_frame_fn deregister = eh->registered ? frame_fn("__deregister_frame") : NULL;
	struct kp_thread *t = kp_lib_code_begin();

	if (deregister)
		deregister(eh->buf);
	free(eh->buf);
	memset(eh, 0, sizeof(*eh));
	kp_lib_code_end(t);
}
