/* A small x86-64 code writer on top of the Zydis encoder, for slots. */
#ifndef KP_X86_WRITER_H
#define KP_X86_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xw {
	uint8_t *buf;
	size_t len, cap;
	uintptr_t pc0;		/* runtime address of buf[0] */
	bool err;
};

static inline uintptr_t xw_pc(const struct xw *w)
{
	return w->pc0 + w->len;
}

void xw_init(struct xw *w, uint8_t *buf, size_t cap, uintptr_t pc0);
void xw_bytes(struct xw *w, const void *p, size_t n);
void xw_int3(struct xw *w);
/* jmp to target: rel32 when it reaches, else an absolute jmp through rip. */
void xw_jmp(struct xw *w, uintptr_t target);
size_t xw_jmp_len(uintptr_t from, uintptr_t to);
/* Short conditional jump (cc 0..15) or loop-family op (0xe0..0xe3). */
void xw_jcc_short(struct xw *w, unsigned int cc, uintptr_t target);
void xw_loop_short(struct xw *w, unsigned int op, bool addr32, uintptr_t target);
/* Pushes ret as a return address without touching flags or registers
 * (push %rax; movabs $ret,%rax; xchg %rax,(%rsp)). */
void xw_push_return(struct xw *w, uintptr_t ret);
/* Re-encodes `call r/m64` (bytes) as `jmp r/m64` for code that already
 * pushed the return address: rsp-based operands are shifted by 8 and a
 * RIP-relative one re-targeted from orig_next. */
void xw_call_ind_as_jmp(struct xw *w, const uint8_t *bytes, size_t len, uintptr_t orig_next);

/* lea disp(%rsp),%rsp: moves rsp without touching the flags. */
void xw_lea_rsp(struct xw *w, int32_t disp);
/* call *slot(%rip): calls the address stored at `slot`. */
void xw_call_indirect(struct xw *w, uintptr_t slot);

#endif
