/*
 * The return-probe trampoline and the jprobe return trap.
 *
 * A return-probed function returns here instead of to its caller.  The
 * trampoline never traps.  It keeps every register the program may hold
 * a value in (a caller that knows its callee may keep one in a register
 * the ABI lets the callee change: GCC's interprocedural register
 * allocation does) and the status flags, and then:
 *
 *  - the fast path, in assembly: this frame has just one instance (the
 *    newest of the thread's; its set-up noted whether the next one is of
 *    the same frame, dup), its handler needs neither vector state nor
 *    errno, the thread is in no handler or cache window of its own, and
 *    its cache has room for the instance (a bounded stack per pool).  It begins a read-side section
 *    that raises in_handler too (as the optimized entry's fast path does:
 *    detour_common.S), puts the instance back into the thread's cache and
 *    calls the handler.  A handler that provably reads no struct pt_regs
 *    (KP_OPT_SAVE_REGS) gets the frame with the caller-saved registers
 *    only, and r8-r11 are kept only for one that may change them
 *    (KP_OPT_SAVE_SCRATCH); one that reads it gets the complete struct.
 *
 *  - every other case completes a struct pt_regs and calls
 *    kp_kretprobe_dispatch(regs), which fills regs->ip with the real return
 *    address.
 *
 * Either way the general registers come back from the frame, with the
 * handler's changes; the flags and the return address do not change.
 * When the function was called from its instance's stub (retstub.c), the
 * return predictor's top entry is the real return address: a ret,
 * predicted.  Otherwise the function's ret to here already took (and
 * missed) the predictor's entry for this call, so a ret would be
 * mispredicted as well and leave the predictor one entry off for the
 * callers' returns: a jump.  Vector and x87 state (the return values in
 * xmm/ymm/zmm0-1 and st0/st1) is left alone: the code here and the
 * dispatcher are general registers only, and a handler that may touch it
 * is called with it saved (kp_call_fpu_saved).
 *
 * Stack at entry: rsp = S, the caller's frame above; everything below S is
 * dead (the callee's frame is gone), so the red zone is free to use.
 * Frame F = S-192: struct pt_regs at F, a pad at F+168, the flags in
 * lahf/seto form at F+176, the real return address at F+184 (S-8).
 */
#include "arch/x86_64/ptregs.inc"
#include "arch/x86_64/hitpath.inc"

	.set T_FLAGS, 176
	.set T_RET, 184
	.set T_FRAME, 192

/* r8-r11: kept by the fast path only for handlers that may change them
 * (KP_OPT_SAVE_SCRATCH; the fast path itself does not use them). */
	.macro T_SAVE_HIGH
	PT_STORE_R8_R11
	.endm

/* The rest of struct pt_regs, as the breakpoint path builds it: ip the
 * real return address (\ip) or 0 for the dispatcher to fill.  rcx is
 * kept. */
	.macro T_FILL_REGS ip
	mov %r15, 0(%rsp)
	mov %r14, 8(%rsp)
	mov %r13, 16(%rsp)
	mov %r12, 24(%rsp)
	mov %rbp, 32(%rsp)
	mov %rbx, 40(%rsp)
	movq $-1, 120(%rsp)		/* orig_ax */
	.if \ip
	mov T_RET(%rsp), %rax
	mov %rax, 128(%rsp)		/* ip: the real return address */
	.else
	movq $0, 128(%rsp)		/* ip: filled by the dispatcher */
	.endif
	movq $0x33, 136(%rsp)		/* cs */
	mov %rcx, %rdi
	mov T_FLAGS(%rsp), %rax
	LAHF_TO_EFLAGS
	mov %rax, 144(%rsp)
	mov %rdi, %rcx
	lea T_FRAME(%rsp), %rax
	mov %rax, 152(%rsp)		/* sp as the caller sees it */
	movq $0x2b, 160(%rsp)		/* ss */
	.endm

/* The registers the fast path kept (\high: r8-r11 too; 2: all of them,
 * which the handler may have changed in its struct pt_regs), and the
 * flags, back. */
	.macro T_LOAD_LIGHT high
	mov T_FLAGS(%rsp), %rax
	LAHF_RESTORE
	.if \high == 2
	PT_LOAD_GPRS
	.else
	.if \high
	PT_LOAD_R8_R11
	.endif
	PT_LOAD_RAX_RDI
	.endif
	.endm

/* The rest of the fast path, rcx = the instance, rdx = its pool: the
 * handler, if the probe is still there and enabled; the section's end
 * (the thread record loaded again: nothing is kept across the handler);
 * the registers back, and to the caller by a return (\called) or a jump. */
	.macro T_HANDLER_AND_OUT called, high
	cmpb $0, POOL_LIVE(%rdx)
	je 1f
	mov POOL_RP(%rdx), %rsi
	mov KRP_HANDLER(%rsi), %rax
	test %rax, %rax
	jz 1f
	testl $KP_FLAG_DISABLED, KP_FLAGS(%rsi)
	jnz 1f
	lea RI_PUB(%rcx), %rdi
	mov %rsp, %rsi
	call *%rax
1:	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	SECTION_CLOSE
	T_OUT \called, \high
	.endm

/* Unwind information: the frame's CFA is S, the caller's stack pointer
 * after the return; the return address is in the slot at S-8 once the
 * real one is there (before that it is undefined: unwinding stops), or
 * in pt_regs.ip while the dispatcher runs.  The callee-saved registers are
 * the handler's to change in a complete struct pt_regs: there they are
 * described while it is in use. */
	.macro T_CFI_SAVED_IN_REGS
	.cfi_offset %r15, 0 - T_FRAME
	.cfi_offset %r14, 8 - T_FRAME
	.cfi_offset %r13, 16 - T_FRAME
	.cfi_offset %r12, 24 - T_FRAME
	.cfi_offset %rbp, 32 - T_FRAME
	.cfi_offset %rbx, 40 - T_FRAME
	.endm

	.macro T_CFI_RESTORED
	.cfi_restore %r15
	.cfi_restore %r14
	.cfi_restore %r13
	.cfi_restore %r12
	.cfi_restore %rbp
	.cfi_restore %rbx
	.endm

/* The registers back and out, to the caller by a return (\called) or a
 * jump; the unwind state after it is the one before. */
	.macro T_OUT called, high
	.cfi_remember_state
	T_LOAD_LIGHT \high
	.if \high == 2
	T_CFI_RESTORED
	.endif
	.if \called
	lea T_RET(%rsp), %rsp
	.cfi_def_cfa_offset 8
	ret
	.else
	lea T_FRAME(%rsp), %rsp
	.cfi_def_cfa_offset 0
	jmp *-8(%rsp)			/* below rsp: no signal frame writes there */
	.endif
	.cfi_restore_state
	.endm

	.macro T_CALL_AND_OUT high
	cmpb $0, RI_CALLED(%rcx)
	je 2f
	T_HANDLER_AND_OUT 1, \high
2:	T_HANDLER_AND_OUT 0, \high
	.endm

	.text
	.globl kp_kretprobe_trampoline
	.hidden kp_kretprobe_trampoline
	.type kp_kretprobe_trampoline, @function
	.p2align 4
kp_kretprobe_trampoline:
	.cfi_startproc
	.cfi_def_cfa %rsp, 0
	.cfi_undefined %rip
	lea -T_FRAME(%rsp), %rsp
	.cfi_def_cfa_offset T_FRAME
	mov %rax, 80(%rsp)
	/* The flags without pushfq (slow, microcoded): lahf and seto change
	 * none; DF is clear at a return, as the ABI says. */
	lahf
	seto %al
	mov %rax, T_FLAGS(%rsp)
	mov %rcx, 88(%rsp)
	mov %rdx, 96(%rsp)
	mov %rsi, 104(%rsp)
	mov %rdi, 112(%rsp)
	/* the fast path calls with the caller's alignment */
	test $15, %spl
	jnz 69f
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax			/* the thread record */
	test %rax, %rax
	jz 69f
	mov KPT_RI_TOP(%rax), %rcx		/* the instance */
	test %rcx, %rcx
	jz 69f
	lea T_RET(%rsp), %rdx			/* the slot */
	cmp %rdx, RI_SLOT(%rcx)
	jne 69f
	/* its frame's only instance (set at the entry: no second load) */
	cmpb $0, RI_DUP(%rcx)
	jne 69f
	cmpl $0, KPT_IN_HANDLER(%rax)
	jne 69f
	cmpl $0, KPT_RI_BUSY(%rax)
	jne 69f
	mov RI_POOL(%rcx), %rdx
	testb $KP_NEEDS_ALL_ONLY, POOL_NEEDS(%rdx)
	jnz 69f
	/* The section begins before the cache is looked at: a thread that
	 * turns the pool's caching off then waits for it to end. */
	mov $KPT_NEST_AND_HANDLER, %rdi
	add %rdi, KPT_NEST(%rax)
	/* Room for it in the thread's cache (caching is on only with
	 * membarrier, which the section relies on): the slot empty, or its
	 * list of this pool's and shorter than cache_max. */
	cmpb $POOL_CACHE_ON, POOL_CACHE_STATE(%rdx)
	jne 68f
	movzbl POOL_CACHE_SLOT(%rdx), %edi
	lea KPT_RI_CACHE(%rax,%rdi,8), %rdi
	/* The instance leaves the list, and the frame returns for real.
	 * It goes onto the cache already: until the section ends only this
	 * thread's fast paths could take it, and in_handler keeps them off.
	 * An empty cache here; a stack below it out of line. */
	cmpq $0, (%rdi)
	jne 62f
	movl $1, RI_CACHE_N(%rcx)
	mov RI_NEXT(%rcx), %rsi
	mov %rsi, KPT_RI_TOP(%rax)
	movq $0, RI_NEXT(%rcx)
63:	mov RI_RET(%rcx), %rsi
	mov %rsi, T_RET(%rsp)
	.cfi_remember_state
	.cfi_offset %rip, -8
	movb $1, RI_CACHED(%rcx)
	mov %rcx, (%rdi)
	testb $KP_SAVE_REGS, POOL_NEEDS(%rdx)
	jnz 65f
	testb $KP_SAVE_SCRATCH, POOL_NEEDS(%rdx)
	jnz 64f
	T_CALL_AND_OUT 0
64:	T_SAVE_HIGH
	T_CALL_AND_OUT 1
65:	T_SAVE_HIGH
	T_FILL_REGS 1
	T_CFI_SAVED_IN_REGS
	T_CALL_AND_OUT 2

	.cfi_restore_state		/* before the real return address */
	/* Onto a stack of this pool's that is not full (cache_max). */
62:	mov (%rdi), %rsi
	cmp %rdx, RI_POOL(%rsi)
	jne 68f
	mov RI_CACHE_N(%rsi), %esi
	cmp POOL_CACHE_MAX(%rdx), %esi
	jae 68f
	inc %esi
	mov %esi, RI_CACHE_N(%rcx)
	mov RI_NEXT(%rcx), %rsi
	mov %rsi, KPT_RI_TOP(%rax)
	mov (%rdi), %rsi
	mov %rsi, RI_NEXT(%rcx)
	jmp 63b
68:	SECTION_CLOSE
69:	T_SAVE_HIGH
	/* The rest of struct pt_regs, and the dispatcher. */
	T_FILL_REGS 0
	T_CFI_SAVED_IN_REGS
	mov %rsp, %rbx
	.cfi_def_cfa_register %rbx
	and $-16, %rsp
	mov %rbx, %rdi
	cld
	.cfi_offset %rip, 128 - T_FRAME	/* filled before any handler runs */
	call kp_kretprobe_dispatch
	mov %rbx, %rsp
	.cfi_def_cfa_register %rsp
	mov 128(%rsp), %rcx
	mov %rcx, T_RET(%rsp)		/* the real return address */
	.cfi_offset %rip, -8
	test %al, %al
	jz 1f
	T_OUT 1, 2			/* flags as the function left them */
1:	T_OUT 0, 2
	.cfi_endproc
	.size kp_kretprobe_trampoline, . - kp_kretprobe_trampoline

/*
 * int kp_call_fpu_saved(int (*fn)(void *, void *), void *a, void *b):
 * fn(a, b) with the whole x87/SSE/AVX state saved and restored around it
 * (xsave, or fxsave without it), for handlers that may change it.  fn
 * also gets the saved image as a third argument, which
 * kp_call_fpu_image(fn, a, b), the same code, declares (vecregs.c).
 */
	.globl kp_call_fpu_saved, kp_call_fpu_image
	.hidden kp_call_fpu_saved, kp_call_fpu_image
	.type kp_call_fpu_saved, @function
	.type kp_call_fpu_image, @function
	.p2align 4
kp_call_fpu_saved:
kp_call_fpu_image:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
	push %rbx
	.cfi_offset %rbx, -24
	push %r12
	.cfi_offset %r12, -32
	push %r13
	.cfi_offset %r13, -40
	push %r14
	.cfi_offset %r14, -48
	mov %rdi, %r14
	mov %rsi, %r12
	mov %rdx, %r13
	mov kp_xsave_size(%rip), %ecx
	test %ecx, %ecx
	jz 1f
	sub %rcx, %rsp
	and $-64, %rsp
	mov %rsp, %rbx
	xor %eax, %eax
	mov %rax, 512(%rbx)
	mov %rax, 520(%rbx)
	mov %rax, 528(%rbx)
	mov %rax, 536(%rbx)
	mov %rax, 544(%rbx)
	mov %rax, 552(%rbx)
	mov %rax, 560(%rbx)
	mov %rax, 568(%rbx)
	mov $-1, %eax
	mov $-1, %edx
	xsave64 (%rbx)
	mov %r12, %rdi
	mov %r13, %rsi
	mov %rbx, %rdx
	call *%r14
	mov %eax, %r12d
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%rbx)
	jmp 2f
1:	sub $512, %rsp
	and $-64, %rsp
	mov %rsp, %rbx
	fxsave64 (%rbx)
	mov %r12, %rdi
	mov %r13, %rsi
	mov %rbx, %rdx
	call *%r14
	mov %eax, %r12d
	fxrstor64 (%rbx)
2:	mov %r12d, %eax
	lea -32(%rbp), %rsp
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size kp_call_fpu_saved, . - kp_call_fpu_saved
	.size kp_call_fpu_image, . - kp_call_fpu_image

/* jprobe_return(): the trap handler recognizes this int3 and restores the
 * state saved at the jprobe's entry. */
	.text
	.globl jprobe_return
	.type jprobe_return, @function
	.globl kp_jprobe_return_trap
	.hidden kp_jprobe_return_trap
	.p2align 4
jprobe_return:
kp_jprobe_return_trap:
	int3
	ud2
	.size jprobe_return, . - jprobe_return

	.section .note.GNU-stack, "", @progbits
