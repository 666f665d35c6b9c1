/*
 * Shared save/restore code of jump-optimized probes.
 *
 * A detour buffer calls the code for its kind, which finds the detour's
 * return address R at the top of the stack and the probepoint next to R;
 * it runs the pre-handlers and returns to the detour, which runs the
 * copied instructions.  Mid-function the detour first steps over the red
 * zone ("lea -128(%rsp),%rsp"; probepoint at R+101); at a function entry
 * nothing below the stack pointer is live (the call wrote there), so the
 * call comes first (probepoint at R+106).
 *
 * It saves only what the handlers can change, and learns that from each
 * probe as it reaches it (kprobe needs, KP_OPT_SAVE_*, decoded from the
 * handler when the probe was registered):
 *
 *   light  the registers a C function may change (rax rcx rdx rsi rdi
 *          r8-r11), the status flags, and rbx/r12 which this code uses;
 *          enough for a handler that never reads its pt_regs argument;
 *   regs   a complete struct pt_regs as the breakpoint path builds it,
 *          every register loaded back from it (handlers may change it);
 *   all    also the vector state (at a function entry only the argument
 *          registers x/y/zmm0-7 can be live; mid-function everything may
 *          be: xsave, or fxsave without it) and errno.  Mid-function,
 *          where that state is a whole xsave image, a probe that needs
 *          errno kept but not the vector registers gets errno alone (the
 *          "errno" level between regs and all): the registers the
 *          program has live stay live as long as no handler writes them.
 *
 * A hit starts light and moves up when a probe needs more: the handlers
 * run before that provably left the rest alone, so it is still the
 * program's.  The level is where the code is (three copies of the handler
 * loop), and so is the restore that matches it.  Because the needs travel
 * with each probe, a probe added while a thread is here is called with
 * what it needs.
 *
 * Mid-function frame (rbx): struct pt_regs at 0, errno at 168, the flags
 * pushed on the way in at 184, R at 192 (which keeps the ABI's alignment).
 *
 * At a function entry the light level is pushed, and the common case —
 * one enabled probe whose handler needs nothing more, or a return probe
 * without an entry handler — jumps into the probe's fast function with R
 * as its return address: one call and one return fewer, every return
 * still predicted.  So at an entry the detour itself ends
 * the read-side section and pops the light level, at R (the code is
 * below, copied into each detour); every other way through here returns
 * to R with the light level in place.  The light level is laid out as the
 * caller-saved part of a struct pt_regs: a lone probe whose handler reads
 * only its arguments (the probepoint's afast) gets it as its pt_regs (the
 * args level).
 *
 * In the middle of a function, a detour built for a lone light probe has
 * an exit of its own at R, and kp_opt_midf_* hands over to the handler
 * the same way (see "mid-function: the fast path" below).
 */
#include "arch/x86_64/ptregs.inc"
#include "arch/x86_64/hitpath.inc"
	.set R_PP, 101
	.set R_PP_ENTRY, 106
	.set FRAME, 192
	.set F_ERRNO, 168
	.set F_PUSHF, 184
	.set AC_FLAG, 0x40000
/* Mid-function: the program's stack pointer is 128 (red zone) + 8 (R)
 * above the entry's, FRAME + 8 + 128 above the frame. */
	.set MID_CFA, FRAME + 8 + 128
/* Where the probepoint is from the return address R's slot holds: moved
 * by the slow path, which returns past the section's end. */
	.set CUR_PPOFF, R_PP_ENTRY

	.macro FUNC name
	.text
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	.endm

/* ---- unwind information ----
 *
 * Each routine here is described as a signal frame that stands for the
 * probed code: its CFA is the program's stack pointer at the probe, and
 * its "return address" the probed address itself (pp->addr, read through
 * R, the detour's return address: the probepoint is at R + R_PP or
 * R + R_PP_ENTRY).  As for a frame a signal interrupted, unwinders look
 * the caller up at that address exactly, so a handler's backtrace goes on
 * into the probed function and its callers (libgcc, gdb).  The callee-saved
 * registers this code uses are described where they are kept, in the
 * epilogues too: a program's signal handler runs wherever the signal
 * lands, and its backtrace must go on into the probed code from there.
 */

/* DW_CFA_val_expression for the return address: R at CFA - \below. */
	.macro CFI_RA_AT below, ppoff
	.if \below < 128
	.cfi_escape 0x16, 0x10, 8, 0x10, \below, 0x1c, 0x06, 0x23, \ppoff, 0x06, 0x06
	.else
	.cfi_escape 0x16, 0x10, 9, 0x10, (\below & 0x7f) | 0x80, \below >> 7, 0x1c, 0x06, 0x23, \ppoff, 0x06, 0x06
	.endif
	.endm

/* DW_CFA_def_cfa_expression: the CFA is the word at rsp + \at (0 or 8),
 * plus \off (128 to 16383): where the code realigned the stack pointer
 * and keeps its frame's address at the top for unwinders (the compact
 * tables hold this form, elf/cfi.h; a register would be known to them
 * only in the frame a signal interrupted). */
	.macro CFI_CFA_AT_SP at, off
	.if \off < 128 || \off > 16383 || (\at != 0 && \at != 8)
	.error "CFI_CFA_AT_SP: an offset the expression does not encode"
	.endif
	.cfi_escape 0x0f, 6, 0x77, \at, 0x06, 0x23, (\off & 0x7f) | 0x80, \off >> 7
	.endm

/* The frame's address into the word at the top of a stack just aligned
 * (twice: the alignment stays), the CFA from there on; before it, the CFA
 * is rbx + CUR_BX_CFA.  (The frame is in rbx while the handlers run.) */
	.macro FRAME_AT_TOP
	.cfi_def_cfa %rbx, CUR_BX_CFA
	push %rbx
	CFI_CFA_AT_SP 0, CUR_BX_CFA
	push %rbx
	.endm

/* A handler entered by a jump with R on top of the stack, once nothing
 * else holds R: from here the frame is an ordinary call's, about to
 * return to the detour, whose own rows go on from R. */
	.macro CFI_ABOUT_TO_RETURN
	.cfi_def_cfa %rsp, 8
	.cfi_offset %rip, -8
	.endm

/* An epilogue (each step described where it is); the state after is the
 * one before. */
	.macro CFI_EPILOGUE_BEGIN
	.cfi_remember_state
	.endm

	.macro CFI_EPILOGUE_END
	.cfi_restore_state
	.endm

/* ---- prologues: the light part of the frame, flags at pt_regs.flags ---- */

	.macro SAVE_LIGHT
	mov %r12, 24(%rsp)
	mov %rbx, 40(%rsp)
	PT_STORE_R8_R11
	PT_STORE_RAX_RDI
	.endm

/* Mid-function: every flag may be live.  EFLAGS.AC (alignment checking)
 * would make the handlers' unaligned accesses fault: off while they run
 * (the program's value is kept). */
	.macro PROLOGUE_MID
	pushfq
	.cfi_adjust_cfa_offset 8
	lea -(FRAME - 8)(%rsp), %rsp
	.cfi_adjust_cfa_offset FRAME - 8
	SAVE_LIGHT
	.cfi_offset %r12, 24 - MID_CFA
	.cfi_offset %rbx, 40 - MID_CFA
	mov F_PUSHF(%rsp), %rcx
	mov %rcx, 144(%rsp)
	testl $AC_FLAG, %ecx
	jz 93f
	pushfq
	.cfi_adjust_cfa_offset 8
	andl $~AC_FLAG, (%rsp)
	popfq
	.cfi_adjust_cfa_offset -8
93:
	.endm

/* ---- moving up ---- */

/* The rest of struct pt_regs; rbx = frame.  Clobbers rax. */
	.macro FILL_REGS
	mov %r15, 0(%rbx)
	mov %r14, 8(%rbx)
	mov %r13, 16(%rbx)
	mov %rbp, 32(%rbx)
	movq $-1, 120(%rbx)			/* orig_ax */
	movq $0x33, 136(%rbx)			/* cs */
	movq $0x2b, 160(%rbx)			/* ss */
	lea FRAME + 8 + 128(%rbx), %rax
	mov %rax, 152(%rbx)			/* sp before the detour */
	mov FRAME(%rbx), %rax
	mov MID_PP(%rax), %rax
	mov PP_ADDR(%rax), %rax
	inc %rax
	mov %rax, PT_IP(%rbx)			/* as after an int3 */
	.endm

	.macro SAVE_ERRNO
	call __errno_location@PLT
	mov (%rax), %eax
	mov %eax, F_ERRNO(%rbx)
	.endm

	.macro RESTORE_ERRNO
	call __errno_location@PLT
	mov F_ERRNO(%rbx), %ecx
	mov %ecx, (%rax)
	.endm

/* Vector state below the frame (r13), then errno. */
	.macro SAVE_ALL vsave
	\vsave
	VEC_NOTE
	SAVE_ERRNO
	.endm

/* Tells kprobes_vector_reg() where the program's vector registers are
 * while the handlers of this hit run: the image the save just made (r13,
 * layout VEC_LAYOUT, set by the save), for the pt_regs they get (rbx).
 * Only on the way through a read-side section begun here, so no other hit
 * of this thread has its handlers running (one that came first would have
 * sent this one to the slow path, which leaves the note alone, and one in
 * a signal handler that interrupts these runs no handlers).  Clobbers rax. */
	.macro VEC_NOTE
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	mov %r13, KPT_VEC_AREA(%rax)
	movl $VEC_LAYOUT, KPT_VEC_LAYOUT(%rax)
	mov %rbx, KPT_VEC_REGS(%rax)
	.endm

	.macro VEC_FORGET
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	movq $0, KPT_VEC_REGS(%rax)
	.endm

	.macro RESTORE_ALL vrestore
	RESTORE_ERRNO
	\vrestore
	.endm

/* ---- the handler loop, one copy per level ---- */

/* r12 = the probe (not NULL), rbx = frame.  Calls each enabled
 * pre-handler in order until one returns non-zero; a probe needing more
 * than \level has goes to \up with r12 still on it.  Falls through at the
 * end: laid out so that a hit on one probe takes no branch but the calls. */
	.macro HANDLER_LOOP name, level, need_mask, up
81:	testl $KP_FLAG_DISABLED, KP_FLAGS(%r12)
	jnz 82f
	cmpq $0, KP_PRE_HANDLER(%r12)
	je 82f
	.if \need_mask
	testb $\need_mask, KP_NEEDS(%r12)
	jnz \up
	.endif
\name\()_\level\()_call:
	mov %r12, %rdi
	mov %rbx, %rsi
	call *KP_PRE_HANDLER(%r12)
	test %eax, %eax
	jnz 83f
82:	mov KP_NEXT(%r12), %r12
	test %r12, %r12
	jnz 81b
83:
	.endm

	.macro SECTION_END
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	SECTION_CLOSE
	.endm

/* ---- epilogues ---- */

	.macro LOAD_LIGHT
	mov 24(%rsp), %r12
	mov 40(%rsp), %rbx
	PT_LOAD_R8_R11
	PT_LOAD_RAX_RDI
	.endm

/* Sets AC again if the program had it: before PT_RESTORE_FLAGS, whose
 * arithmetic flags popfq would overwrite. */
	.macro RESTORE_AC
	testl $AC_FLAG, 144(%rsp)
	jz 94f
	pushfq
	.cfi_adjust_cfa_offset 8
	orl $AC_FLAG, (%rsp)
	popfq
	.cfi_adjust_cfa_offset -8
94:
	.endm

/* Mid-function: the flags as they were (AC first: popfq in RESTORE_AC
 * would overwrite the arithmetic flags). */
	.macro EPILOGUE_LIGHT
	mov %rbx, %rsp
	.cfi_def_cfa %rsp, MID_CFA
	RESTORE_AC
	PT_RESTORE_FLAGS
	LOAD_LIGHT
	.cfi_restore %r12
	.cfi_restore %rbx
	lea FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset -FRAME
	ret
	.endm

	.macro EPILOGUE_REGS
	mov %rbx, %rsp
	.cfi_def_cfa %rsp, MID_CFA
	RESTORE_AC
	PT_RESTORE_FLAGS
	PT_LOAD_GPRS
	.cfi_restore %r12
	.cfi_restore %r13
	.cfi_restore %rbx
	lea FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset -FRAME
	ret
	.endm

/* ---- one common routine ---- */

/* The fast path's way in: a thread outside any handler, on a kernel with
 * membarrier, begins a read-side section and sets in_handler with one
 * instruction (a signal handler's own hit sees either none or both);
 * anything else goes to \slow. */
	.macro SECTION_BEGIN slow
	/* rax = the thread record; clobbers rdx */
	cmpl $0, kp_membarrier_ok(%rip)
	je \slow
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	test %rax, %rax
	jz \slow
	cmpl $0, KPT_IN_HANDLER(%rax)
	jne \slow
	mov $KPT_NEST_AND_HANDLER, %rdx
	add %rdx, KPT_NEST(%rax)
	.endm

/* Per kind (0 entry, flags dead; 1 entry, flags kept; 2 mid-function):
 * moving up to a complete pt_regs (rbx = it), the probepoint into rdi
 * once there, and the two ways out. */
	.macro UP_REGS kind
	.if \kind == 2
	FILL_REGS
	.cfi_offset %r13, 16 - MID_CFA
	.else
	ENTRY_UP
	.endif
	.endm

	.macro PP_TO_RDI kind
	.if \kind == 2
	mov FRAME(%rbx), %rax
	mov MID_PP(%rax), %rdi
	.else
	mov E_UP + G_R(%rbx), %rax
	mov R_PP_ENTRY(%rax), %rdi
	.endif
	.endm

	.macro OUT_LIGHT kind
	CFI_EPILOGUE_BEGIN
	.if \kind == 2
	EPILOGUE_LIGHT
	.else
	ENTRY_OUT_LIGHT
	.endif
	CFI_EPILOGUE_END
	.endm

	.macro OUT_REGS kind
	CFI_EPILOGUE_BEGIN
	.if \kind == 2
	EPILOGUE_REGS
	.else
	ENTRY_EPILOGUE_REGS \kind
	.endif
	CFI_EPILOGUE_END
	.endm

/* The unwind state where the slow path is entered (before any frame of
 * this code's at a function entry; before pt_regs mid-function). */
	.macro CFI_SLOW_ENTRY kind
	.cfi_restore %r13
	.if \kind != 2
	.cfi_def_cfa %rsp, CUR_CFA_L
	.cfi_restore %rbx
	.cfi_restore %r12
	CFI_RA_AT 8, R_PP_ENTRY
	.endif
	.endm

/* Mid-function the common code ends the section; at a function entry
 * the detour does, after the handler returned to it. */
	.macro SECTION_END_MID kind
	.if \kind == 2
	SECTION_END
	.endif
	.endm

/* The slow path enters without a section.  At a function entry it makes
 * the generic frame and returns past the detour's section end. */
	.macro SLOW_SETUP kind
	.if \kind != 2
	GENERIC_FRAME
	.endif
	.endm

	.macro SLOW_SKIP kind, skip
	.if \kind != 2
	.if CUR_CONT
	addq $\skip, E_L + C_R(%rbx)
	.else
	addq $\skip, E_UP + G_R(%rbx)
	CFI_RA_AT (CUR_CFA_L+8), (R_PP_ENTRY-\skip)
	.endif
	/* the return address is past the section's end from here on */
	.set CUR_PPOFF, (R_PP_ENTRY-\skip)
	.endif
	.endm

/* Everything after the way in, r12 = the first probe: the handler loop at
 * each level, moving up, the ways out, and at 70 the slow path, which
 * saves everything for the C callback (which keeps errno). */
	.macro LEVELS name, kind, vsave, vrestore, skip=0
	test %r12, %r12
	jz 72f
	HANDLER_LOOP \name, light, KP_NEEDS_ANY, 71f
72:	SECTION_END_MID \kind
	OUT_LIGHT \kind
71:	UP_REGS \kind
	testb $KP_NEEDS_ALL_ONLY, KP_NEEDS(%r12)
	jnz 76f
	jmp \name\()_regs_call
	HANDLER_LOOP \name, regs, KP_NEEDS_ALL_ONLY, 76f
	SECTION_END_MID \kind
	OUT_REGS \kind
76:	.if \kind == 2
	/* Mid-function the vector state is a whole xsave image: a handler
	 * that needs errno kept but provably leaves every vector register
	 * alone (whatever the program has live in them stays there) gets
	 * errno only, and the image is made when a probe needs it. */
	SAVE_ERRNO
	testb $KP_SAVE_VECTOR, KP_NEEDS(%r12)
	jnz 77f
	jmp \name\()_errno_call
	HANDLER_LOOP \name, errno, KP_SAVE_VECTOR, 77f
	SECTION_END_MID \kind
	RESTORE_ERRNO
	OUT_REGS \kind
77:	\vsave
	VEC_NOTE
	.else
	SAVE_ALL \vsave
	.endif
	jmp \name\()_all_call
	HANDLER_LOOP \name, all, 0, 0
	VEC_FORGET
	SECTION_END_MID \kind
	RESTORE_ALL \vrestore
	OUT_REGS \kind

70:	CFI_SLOW_ENTRY \kind
	SLOW_SETUP \kind
	UP_REGS \kind
	and $-16, %rsp
	.cfi_def_cfa %rbx, CUR_BX_CFA
	\vsave
	PP_TO_RDI \kind
	mov %rbx, %rsi
	mov %r13, %rdx
	mov $VEC_LAYOUT, %ecx
	call kp_optimized_callback
	\vrestore
	SLOW_SKIP \kind, \skip
	OUT_REGS \kind
	.set CUR_PPOFF, R_PP_ENTRY
	.endm

/* Mid-function; the probepoint at ppoff from the return address (R_PP,
 * or R_PP - MIDX_SKIP when the fast path of a detour with the fast exit
 * hands over, which returns past that exit). */
	.macro COMMON name, vsave, vrestore, ppoff
	.set MID_PP, \ppoff
	.set CUR_BX_CFA, MID_CFA
FUNC \name
	.cfi_startproc
	.cfi_signal_frame
	.cfi_def_cfa %rsp, 8 + 128
	CFI_RA_AT (MID_CFA-FRAME), \ppoff
	PROLOGUE_MID
	mov %rsp, %rbx
	.cfi_def_cfa_register %rbx
	and $-16, %rsp
	FRAME_AT_TOP
	testl $0x400, 144(%rbx)			/* DF */
	jz 69f
	cld
69:	SECTION_BEGIN 70f
	mov FRAME(%rbx), %rax
	mov MID_PP(%rax), %rax
	mov PP_PROBES(%rax), %r12
	LEVELS \name, 2, \vsave, \vrestore
	.cfi_endproc
	.size \name, . - \name
	.endm

/* ---- function entries ---- */

/* The light level, pushed below the detour's return address R: L = %rsp
 * after it.  No instruction here changes %rsp but push and pop, which the
 * CPU tracks without waiting. */
/* Above the flags, r11 to rdi are in struct pt_regs' order: L - L_PT is
 * a struct pt_regs whose caller-saved registers (r11 r10 r9 r8 ax cx dx
 * si di) are the program's, what the args level hands a handler that
 * reads only its arguments. */
	.set L_FLAGS, 0				/* lahf in %ah, OF in %al */
	.set L_R11, 8
	.set L_R10, 16
	.set L_R9, 24
	.set L_R8, 32
	.set L_RAX, 40
	.set L_RCX, 48
	.set L_RDX, 56
	.set L_RSI, 64
	.set L_RDI, 72
	.set L_R, 80				/* R; then the record or the continuation */
	.set L_PT, PT_R11 - L_R11
	.if PT_R10 - L_PT - L_R10 || PT_R9 - L_PT - L_R9 || PT_R8 - L_PT - L_R8 || PT_RAX - L_PT - L_RAX || PT_RCX - L_PT - L_RCX || PT_RDX - L_PT - L_RDX || PT_RSI - L_PT - L_RSI || PT_RDI - L_PT - L_RDI
	.error "the light level is not in struct pt_regs' order"
	.endif
/* With the continuing exit the frame is two words longer, so that the
 * light level ends right where the exit finds it below the stack pointer:
 * L_R is a pad, the continuation above it, and R above that. */
	.set C_CONT, 88
	.set C_R, 96
/* The kind of exit of the code being assembled, and the return address's
 * slot above L. */
	.set CUR_CONT, 0
	.set CUR_SLOT, L_R + 8
	.set CUR_CFA_L, L_R + 8

/* The generic frame below L: G = %rsp; R pushed again (the return to the
 * detour), rbx and r12 for this code, a pad for the ABI's alignment. */
	.set G_RBX, 8
	.set G_R12, 16
	.set G_R, 24
	.set G_L, 32
	.set E_UP, 176				/* pt_regs and errno below G */
	.set E_L, E_UP + G_L			/* L from the pt_regs */

/* No pushfq (slow, microcoded): the status flags are read with lahf/seto
 * (neither changes them).  DF is clear at a call, as the ABI says. */
	.macro PUSH_LIGHT
	push %rdi
	.cfi_adjust_cfa_offset 8
	push %rsi
	.cfi_adjust_cfa_offset 8
	push %rdx
	.cfi_adjust_cfa_offset 8
	push %rcx
	.cfi_adjust_cfa_offset 8
	push %rax
	.cfi_adjust_cfa_offset 8
	push %r8
	.cfi_adjust_cfa_offset 8
	push %r9
	.cfi_adjust_cfa_offset 8
	push %r10
	.cfi_adjust_cfa_offset 8
	push %r11
	.cfi_adjust_cfa_offset 8
	lahf
	seto %al
	push %rax
	.cfi_adjust_cfa_offset 8
	.endm

/*
 * What the detour runs at R, after the handlers: it ends the read-side
 * section and puts the light level back (with the status flags unless they
 * are dead).  Position independent: detour.c copies it into each detour at
 * a function entry, ahead of the copied instructions.  The slow path,
 * which has no section, returns EXIT_SKIP (CEXIT_SKIP) bytes further.
 *
 * Two kinds.  The plain exit finds the thread record where R was, pops the
 * light level and runs on into the copied instructions.  The continuing
 * exit, in the detours of return probes, is reached with the light level
 * already below the stack pointer (the red zone of the function entry:
 * nothing a signal frame overwrites), where the return probe's fast path
 * leaves the registers it used, and the generic path all of it (rdi and
 * r8-r11 it puts back itself).  It takes the record from its thread-local
 * pointer (whose offset detour.c fills in) and jumps to the continuation
 * left above the light level: the copied instructions, or the stub of the
 * return probe's new instance, which calls them so that the function's
 * own return stays predicted (retstub.c).  The plain one is a jump
 * cheaper.
 */
	.macro EXIT_TEMPLATE name, flags, cont
	.globl \name, \name\()_end
	.hidden \name, \name\()_end
\name:
	.if \cont
	mov %fs:0, %rax				/* disp32: kp_self_tls */
	.else
	mov L_R(%rsp), %rax
	.endif
	SECTION_CLOSE
\name\()_pops:
	.if \cont
	CEXIT_LOADS \flags
	.else
	EXIT_POPS \flags
	.endif
\name\()_end:
	.endm

	.macro EXIT_POPS flags
	pop %rax
	.if \flags
	LAHF_RESTORE
	.endif
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rax
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	lea 8(%rsp), %rsp
	.endm

/* At R the stack pointer is the return address's slot: L is 104 below. */
	.set X_L, -(C_R + 8)

	.macro CEXIT_LOADS flags
	.if \flags
	mov X_L + L_FLAGS(%rsp), %rax
	LAHF_RESTORE
	.endif
	mov X_L + L_RAX(%rsp), %rax
	mov X_L + L_RCX(%rsp), %rcx
	mov X_L + L_RDX(%rsp), %rdx
	mov X_L + L_RSI(%rsp), %rsi
	jmp *X_L + C_CONT(%rsp)
	.if !\flags
	.fill 8, 1, 0xcc			/* as long as the flags' part: the */
	.endif					/* copy is where it is with them */
	.endm

	.section .rodata
	EXIT_TEMPLATE kp_opt_entry_exit, 0, 0
	EXIT_TEMPLATE kp_opt_entry_exit_flags, 1, 0
	EXIT_TEMPLATE kp_opt_entry_cexit, 0, 1
	EXIT_TEMPLATE kp_opt_entry_cexit_flags, 1, 1
	/* The same macro in both of a kind: the same length. */
	.set EXIT_SKIP, kp_opt_entry_exit_pops - kp_opt_entry_exit
	.set CEXIT_SKIP, kp_opt_entry_cexit_pops - kp_opt_entry_cexit
	/* The continuing exit's copied instructions are CEXIT_LEN bytes after
	 * R, with the flags or without (detour.c checks). */
	.set CEXIT_LEN, kp_opt_entry_cexit_end - kp_opt_entry_cexit

/* rcx = R: the generic frame; rbx = G (the light level needs no regs).
 * With \record, the thread record (rax) into R's first slot, where the
 * exit finds it, once R is in its second.  The CFA stays rsp-based: rbx
 * is rsp until the stack is realigned, and a frame returned to from a
 * handler is unwound from rsp. */
	.macro GENERIC_FRAME record=0
	push %rcx
	.cfi_adjust_cfa_offset 8
	CFI_RA_AT (CUR_CFA_L+8), R_PP_ENTRY
	.if \record
	mov %rax, L_R + 8(%rsp)
	.endif
	push %r12
	.cfi_adjust_cfa_offset 8
	.cfi_offset %r12, -(CUR_CFA_L + 16)
	push %rbx
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbx, -(CUR_CFA_L + 24)
	push %rcx				/* pad */
	.cfi_adjust_cfa_offset 8
	mov %rsp, %rbx
	.endm

	.macro COPY_UP from, to
	mov E_L + \from(%rsp), %rax
	mov %rax, \to(%rsp)
	.endm

/* A struct pt_regs below the generic frame, as the breakpoint path builds
 * it; rbx = pt_regs.  Clobbers rax, rcx. */
	.macro ENTRY_UP
	lea -E_UP(%rsp), %rsp
	.cfi_adjust_cfa_offset E_UP
	mov %r15, 0(%rsp)
	mov %r14, 8(%rsp)
	mov %r13, 16(%rsp)
	mov E_UP + G_R12(%rsp), %rax
	mov %rax, 24(%rsp)
	mov %rbp, 32(%rsp)
	mov E_UP + G_RBX(%rsp), %rax
	mov %rax, 40(%rsp)
	COPY_UP L_R11, 48
	COPY_UP L_R10, 56
	COPY_UP L_R9, 64
	COPY_UP L_R8, 72
	COPY_UP L_RAX, 80
	COPY_UP L_RCX, 88
	COPY_UP L_RDX, 96
	COPY_UP L_RSI, 104
	COPY_UP L_RDI, 112
	movq $-1, 120(%rsp)			/* orig_ax */
	mov E_UP + G_R(%rsp), %rax
	mov R_PP_ENTRY(%rax), %rax
	mov PP_ADDR(%rax), %rax
	inc %rax
	mov %rax, PT_IP(%rsp)			/* as after an int3 */
	movq $0x33, 136(%rsp)			/* cs */
	movzwl E_L + L_FLAGS(%rsp), %eax
	LAHF_TO_EFLAGS
	mov %rax, 144(%rsp)
	lea E_L + CUR_SLOT(%rsp), %rax
	mov %rax, 152(%rsp)			/* sp at the probe */
	movq $0x2b, 160(%rsp)			/* ss */
	mov %rsp, %rbx
	.cfi_offset %r13, 16 - (CUR_CFA_L + G_L + E_UP)
	.endm

/* Stores only what a handler changed: the detour's pops then mostly read
 * values stored long before instead of waiting on fresh stores. */
	.macro COPY_DOWN from, to
	mov \from(%rsp), %rax
	cmp %rax, E_L + \to(%rsp)
	je 97f
	mov %rax, E_L + \to(%rsp)
97:
	.endm

/* Back from the pt_regs at rbx: the callee-saved registers directly, the
 * light level where the detour pops it (flags in lahf/seto form; DF set
 * here, nothing after changes it); then to the detour. */
	.macro ENTRY_EPILOGUE_REGS kind
	mov %rbx, %rsp
	.cfi_def_cfa %rsp, CUR_CFA_L + G_L + E_UP
	COPY_DOWN 48, L_R11
	COPY_DOWN 56, L_R10
	COPY_DOWN 64, L_R9
	COPY_DOWN 72, L_R8
	COPY_DOWN 80, L_RAX
	COPY_DOWN 88, L_RCX
	COPY_DOWN 96, L_RDX
	COPY_DOWN 104, L_RSI
	COPY_DOWN 112, L_RDI
	mov 24(%rsp), %rax
	mov %rax, E_UP + G_R12(%rsp)
	mov 40(%rsp), %rax
	mov %rax, E_UP + G_RBX(%rsp)
	.if \kind
	mov 144(%rsp), %rcx
	EFLAGS_TO_LAHF
	mov %rax, E_L + L_FLAGS(%rsp)
	testl $0x400, %ecx
	jz 95f
	std
95:
	.endif
	mov 0(%rsp), %r15
	mov 8(%rsp), %r14
	mov 16(%rsp), %r13
	.cfi_restore %r13
	mov 32(%rsp), %rbp
	lea E_UP(%rsp), %rsp
	.cfi_adjust_cfa_offset -E_UP
	ENTRY_OUT_LIGHT
	.endm

/* The part of the light level that the continuing exit leaves to the
 * generic path; L = rsp + \at. */
	.macro CONT_OWN_LOADS at
	mov \at + L_RDI(%rsp), %rdi
	mov \at + L_R8(%rsp), %r8
	mov \at + L_R9(%rsp), %r9
	mov \at + L_R10(%rsp), %r10
	mov \at + L_R11(%rsp), %r11
	.endm

/* With the continuing exit, which puts back only what the return probe's
 * fast path uses, the rest here, and the return to R (which a signal frame
 * cannot overwrite) from its slot above the light level: the light level
 * is below the stack pointer then, where the exit finds it. */
	.macro ENTRY_OUT_LIGHT
	.cfi_def_cfa %rsp, CUR_CFA_L + G_L	/* rsp is G */
	pop %rbx				/* pad */
	.cfi_adjust_cfa_offset -8
	pop %rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbx
	pop %r12
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r12
	.if CUR_CONT
	CONT_OWN_LOADS 8
	lea 8 + C_R(%rsp), %rsp
	.cfi_def_cfa_offset 8
	CFI_RA_AT 8, CUR_PPOFF
	.endif
	ret
	.endm

/*
 * A return probe's entry, all of it here (in the continuing exit's
 * detours): the probepoint's fast return probe has no entry handler, and
 * the thread has an instance of its pool in its cache (the newest is
 * popped off it).  Nothing is called unless a light kprobe comes first on
 * the probepoint (count or record a function's entry and return: the
 * registry's pair), so only the few registers it uses are kept, in the
 * red zone below R where the continuing exit loads them from (at a
 * function entry nothing there is live, and a signal frame goes below it),
 * and the status flags (lahf/seto) where the generic path keeps them.
 *
 * It runs inside a read-side section that raises in_handler too, so the
 * thread's own signal handlers neither hit a probe's handlers nor use the
 * cache meanwhile, and a thread that empties the caches waits for the
 * section (core/kretprobe.c).  It takes the instance, links it on the
 * thread's list and returns to R (a predicted return) with the instance's
 * stub as the exit's continuation and the copied instructions in the
 * return address's slot: the stub calls them, as kp_kretprobe_entry_fast()
 * arranges (retstub.c).  Any other case saves the rest of the light level
 * where the generic path keeps it, and takes that path.
 *
 * A pair's kprobe runs first, once the instance is known to be there
 * (nothing takes it meanwhile: the section keeps every other user of the
 * cache off), with the whole light level saved and the stack pointer at
 * L; a non-zero return ends the hit there, as the handler loop would.
 *
 * The stack pointer is R's slot here: L is 96 below.
 */
	.set RZ_L, -(C_R)
	/* (The entry's one store to called, cached and dup and a pad:
	 * core/asm-offsets-core.h checks their layout.) */

	.macro RP_ENTRY_FAST
	mov %rax, RZ_L + L_RAX(%rsp)
	lahf
	seto %al
	mov %rax, RZ_L + L_FLAGS(%rsp)
	mov %rcx, RZ_L + L_RCX(%rsp)
	mov %rdx, RZ_L + L_RDX(%rsp)
	mov %rsi, RZ_L + L_RSI(%rsp)
	/* (Without membarrier the section below is not one, but rfast is
	 * then never set: nothing it would protect is read.) */
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	test %rax, %rax
	jz 60f
	/* not inside a handler or a cache window of this thread's */
	cmpl $0, KPT_IN_HANDLER(%rax)
	jne 60f
	cmpl $0, KPT_RI_BUSY(%rax)
	jne 60f
	/* no frame of this thread's at or below this one (one left by a
	 * longjmp, another return probe's on this function) */
	mov KPT_RI_TOP(%rax), %rsi
	test %rsi, %rsi
	jz 61f
	lea 8(%rsp), %rcx
	cmp %rcx, RI_SLOT(%rsi)
	jbe 60f
61:	mov $KPT_NEST_AND_HANDLER, %rcx
	add %rcx, KPT_NEST(%rax)		/* the section begins */
	mov (%rsp), %rcx			/* R */
	mov R_PP_ENTRY(%rcx), %rcx		/* the probepoint */
	mov PP_RFAST(%rcx), %rdx		/* the probe: its struct kretprobe */
	test %rdx, %rdx
	jz 62f
	mov KRP_POOL(%rdx), %rsi
	cmpb $POOL_CACHE_ON, POOL_CACHE_STATE(%rsi)
	jne 62f
	cmp %rdx, PP_PROBES(%rcx)		/* alone, or a pair's second */
	movzbl KP_RI_SLOT(%rdx), %edx
	lea KPT_RI_CACHE(%rax,%rdx,8), %rdx	/* the cache slot */
	mov (%rdx), %rcx			/* the instance */
	jne 65f
	test %rcx, %rcx
	jz 62f
	cmp %rsi, RI_POOL(%rcx)
	jne 62f
	/* Already the thread's (pub.task too, and pub.rp is the pool's):
	 * not so in a fork child, or a record taken over from a thread
	 * that exited, which the generic path sets right. */
	mov KPT_TID(%rax), %esi
	cmp %esi, RI_OWNER(%rcx)
	jne 62f
66:	mov RI_NEXT(%rcx), %rsi			/* the cache's next instance */
	mov %rsi, (%rdx)
	/* called; no longer cached; not a second instance of its frame
	 * (the top is above): one store */
	movl $1, RI_CALLED(%rcx)
	lea 8(%rsp), %rdx
	mov %rdx, RI_SLOT(%rcx)
	mov 8(%rsp), %rdx
	mov %rdx, RI_RET(%rcx)
	mov KPT_RI_TOP(%rax), %rdx
	mov %rdx, RI_NEXT(%rcx)
	mov %rcx, KPT_RI_TOP(%rax)
	/* the stub is the continuation and calls the copy from the slot */
	mov RI_STUB_ENTRY(%rcx), %rcx
	mov %rcx, RZ_L + C_CONT(%rsp)
	mov (%rsp), %rcx
	add $CEXIT_LEN, %rcx
	mov %rcx, 8(%rsp)
	ret					/* the exit ends the section */
	/* A pair: the instance checked as above, then the kprobe, if it is
	 * still the light kprobe right before this return probe. */
65:	test %rcx, %rcx
	jz 62f
	cmp %rsi, RI_POOL(%rcx)
	jne 62f
	mov KPT_TID(%rax), %esi
	cmp %esi, RI_OWNER(%rcx)
	jne 62f
	mov %rdi, RZ_L + L_RDI(%rsp)		/* rdi free from here */
	/* Read again: an unregistration may be changing the list (what
	 * the section reads stays valid; the list may be empty now). */
	mov (%rsp), %rsi
	mov R_PP_ENTRY(%rsi), %rsi
	mov PP_PROBES(%rsi), %rdi		/* the kprobe */
	mov PP_RFAST(%rsi), %rsi
	test %rdi, %rdi
	jz 63f
	test %rsi, %rsi
	jz 63f
	cmp %rsi, KP_NEXT(%rdi)
	jne 63f
	testl $KP_FLAG_DISABLED, KP_FLAGS(%rdi)
	jnz 63f
	cmpq $0, KP_POST_HANDLER(%rdi)
	jne 63f
	mov KP_PRE_HANDLER(%rdi), %rsi
	test %rsi, %rsi
	jz 63f
	cmp %rsi, KP_FAST_FN(%rdi)		/* its fast function: needs no more */
	jne 63f
	/* L must have the ABI's alignment for the call */
	test $15, %spl
	jnz 63f
	mov %r8, RZ_L + L_R8(%rsp)
	mov %r9, RZ_L + L_R9(%rsp)
	mov %r10, RZ_L + L_R10(%rsp)
	mov %r11, RZ_L + L_R11(%rsp)
	lea RZ_L - 16(%rsp), %rsp		/* L, and room for two */
	.cfi_remember_state
	.cfi_adjust_cfa_offset 16 - RZ_L
	mov %rcx, 0(%rsp)
	mov %rdx, 8(%rsp)
	xor %esi, %esi				/* no struct pt_regs */
	call *KP_PRE_HANDLER(%rdi)
	mov 0(%rsp), %rcx
	mov 8(%rsp), %rdx
	lea 16 - RZ_L(%rsp), %rsp
	.cfi_restore_state
	mov RZ_L + L_RDI(%rsp), %rdi
	mov RZ_L + L_R8(%rsp), %r8
	mov RZ_L + L_R9(%rsp), %r9
	mov RZ_L + L_R10(%rsp), %r10
	mov RZ_L + L_R11(%rsp), %r11
	test %eax, %eax
	mov kp_self_tls@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	jz 66b
	/* the kprobe ended the hit: no instance; the exit runs on into the
	 * copied instructions, and ends the section */
	mov (%rsp), %rcx
	add $CEXIT_LEN, %rcx
	mov %rcx, RZ_L + C_CONT(%rsp)
	ret
63:	mov RZ_L + L_RDI(%rsp), %rdi
62:	SECTION_CLOSE
60:	mov %rdi, RZ_L + L_RDI(%rsp)
	mov %r8, RZ_L + L_R8(%rsp)
	mov %r9, RZ_L + L_R9(%rsp)
	mov %r10, RZ_L + L_R10(%rsp)
	mov %r11, RZ_L + L_R11(%rsp)
	lea RZ_L(%rsp), %rsp			/* L */
	.cfi_adjust_cfa_offset -RZ_L
	.endm

/*
 * The fast path: one enabled probe whose fast function needs the light
 * level only (the probepoint's fast probe, kept by the registry): its
 * pre-handler, or for a return probe the instance set-up, which is given
 * the address of the return address instead of a struct pt_regs.  With
 * the plain exit it is entered by a jump with R as its return address, so
 * it returns straight to the detour (which ends the section), with the
 * continuing exit by a call; every return stays predicted.  Anything else
 * takes the generic path, which ends at the same place.
 */
	.macro ENTRY_COMMON name, kind, vsave, vrestore, cont
FUNC \name
	.cfi_startproc
	.cfi_signal_frame
	.cfi_def_cfa %rsp, 8
	CFI_RA_AT 8, R_PP_ENTRY
	.set CUR_CONT, \cont
	.if \cont
	.set CUR_SLOT, C_R + 8
	.set CUR_CFA_L, C_R + 8
	RP_ENTRY_FAST
	mov C_R(%rsp), %rcx
	lea CEXIT_LEN(%rcx), %rdx
	mov %rdx, C_CONT(%rsp)			/* the exit's continuation */
	.else
	.set CUR_SLOT, L_R + 8
	.set CUR_CFA_L, L_R + 8
	PUSH_LIGHT
	mov L_R(%rsp), %rcx
	.endif
	.set CUR_BX_CFA, CUR_CFA_L + G_L + E_UP
	/* The fast path also needs the ABI's aligned stack. */
	test $15, %spl
	jnz 70f
	SECTION_BEGIN 70f
	mov R_PP_ENTRY(%rcx), %rdx
	mov PP_FAST(%rdx), %rdi
	test %rdi, %rdi
	jz 67f
	lea CUR_SLOT(%rsp), %rsi		/* the return address's slot */
	.if \cont
	mov %rax, %rdx				/* the thread record */
	call *KP_FAST_FN(%rdi)
	CONT_OWN_LOADS 0
	CFI_EPILOGUE_BEGIN
	lea C_R(%rsp), %rsp
	.cfi_def_cfa_offset 8
	ret
	CFI_EPILOGUE_END
	.else
	.cfi_remember_state
	push %rcx
	.cfi_adjust_cfa_offset 8
	mov %rax, L_R + 8(%rsp)			/* the thread record, for the exit */
	CFI_ABOUT_TO_RETURN
	mov %rax, %rdx
	jmp *KP_FAST_FN(%rdi)
	.cfi_restore_state
	.endif
67:
	.if !\cont
	/* The args level: the only probe's handler reads nothing of its
	 * pt_regs but the argument registers, which the light level holds
	 * in pt_regs' order: it gets that, and is jumped into as above. */
	mov PP_AFAST(%rdx), %rdi
	test %rdi, %rdi
	jz 68f
	lea -L_PT(%rsp), %rsi
	.cfi_remember_state
	push %rcx
	.cfi_adjust_cfa_offset 8
	mov %rax, L_R + 8(%rsp)
	CFI_ABOUT_TO_RETURN
	mov %rax, %rdx
	jmp *KP_PRE_HANDLER(%rdi)
	.cfi_restore_state
	.endif
68:
	GENERIC_FRAME !\cont
	mov PP_PROBES(%rdx), %r12		/* rdx = the probepoint */
	.if \cont
	LEVELS \name, \kind, \vsave, \vrestore, CEXIT_SKIP
	.else
	LEVELS \name, \kind, \vsave, \vrestore, EXIT_SKIP
	.endif
	.cfi_endproc
	.size \name, . - \name
	.set CUR_CONT, 0
	.set CUR_SLOT, L_R + 8
	.endm

/* ---- mid-function: the fast path ----
 *
 * A mid-function detour whose probepoint had a fast probe when it was
 * built (the only probe, a kprobe whose handler needs the light level)
 * gets the fast exit at R, and one of these as its common code: the same
 * hand-over as at a function entry, for the light level of the middle
 * of a function.  The flags are pushed whole (pushfq is cheap; popfq is
 * not): a thread with DF or AC set takes the general path, otherwise the
 * status flags are put back with sahf and an overflowing add, as at an
 * entry.  The stack pointer here has whatever alignment the probed code
 * had, so the handler's frame is aligned below the light level, with L's
 * address at its top for unwinders, and L in rbx (the program's at
 * L - 8): the handler keeps it, so the exit's first instruction is back
 * at L without a load.  ("pop %rsp" there made the program's stack
 * pointer wait for a store forwarded through memory at every hit: a
 * probe in a loop ran at half the speed.)  Every other case puts everything back as it found it and hands
 * over to the general code (kp_opt_midx_*), which returns past the fast
 * exit (R + MIDX_SKIP).
 *
 * Frame: L = the light level as at an entry (L_FLAGS .. L_RDI), the
 * pushed flags at L + MF_FLAGS, R (then the thread record) at L + MF_R;
 * the program's stack pointer is 128 (red zone) above R's slot.
 */
	.set MF_FLAGS, L_R
	.set MF_R, L_R + 8
	.set MF_CFA, MF_R + 8 + 128
/* The fast exit's length (the mid_exit template's; detour.c checks). */
	.set MIDX_SKIP, 55

/* What a detour with the fast exit runs at R, after the handler: back to
 * L, the section ended, the light level and the status flags put back,
 * the flags and R's slot dropped; the detour's "lea 128(%rsp),%rsp"
 * follows (R + MIDX_SKIP, where the general path returns). */
	.macro MID_EXIT_TEMPLATE
	.globl kp_opt_mid_exit, kp_opt_mid_exit_end
	.hidden kp_opt_mid_exit, kp_opt_mid_exit_end
kp_opt_mid_exit:
	mov %rbx, %rsp
	mov -8(%rsp), %rbx
	mov MF_R(%rsp), %rax
	SECTION_CLOSE
	pop %rax
	LAHF_RESTORE
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rax
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	lea 16(%rsp), %rsp
kp_opt_mid_exit_end:
	.endm

	.section .rodata
	MID_EXIT_TEMPLATE
	.text

	.macro MID_FAST name, general
FUNC \name
	.cfi_startproc
	.cfi_signal_frame
	.cfi_def_cfa %rsp, 8 + 128
	CFI_RA_AT (8+128), R_PP
	pushfq
	.cfi_adjust_cfa_offset 8
	PUSH_LIGHT
	testl $(0x400 | AC_FLAG), MF_FLAGS(%rsp)	/* DF, AC */
	jnz 51f
	SECTION_BEGIN 51f
	mov MF_R(%rsp), %rcx
	mov R_PP(%rcx), %rdx
	mov PP_FAST(%rdx), %rdi
	test %rdi, %rdi
	jz 52f
	.cfi_remember_state
	mov %rax, %rdx
	mov %rsp, %rsi				/* L (a fast function ignores it) */
	push %rbx				/* the program's, at L - 8 */
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbx, -(MF_CFA + 8)
	mov %rsi, %rbx				/* L, which the handler keeps */
	.cfi_def_cfa %rbx, MF_CFA
	lea -8(%rsp), %rsp
	and $-16, %rsp
	mov %rsi, (%rsp)			/* L, for unwinders */
	CFI_CFA_AT_SP 0, MF_CFA
	push %rcx				/* R */
	CFI_CFA_AT_SP 8, MF_CFA
	mov %rax, MF_R(%rbx)			/* the thread record, for the exit */
	CFI_ABOUT_TO_RETURN
	.cfi_restore %rbx
	jmp *KP_FAST_FN(%rdi)
	.cfi_restore_state
	/* Not the fast case: everything back, then the general path. */
52:	SECTION_CLOSE
51:	pop %rax
	.cfi_adjust_cfa_offset -8
	pop %r11
	.cfi_adjust_cfa_offset -8
	pop %r10
	.cfi_adjust_cfa_offset -8
	pop %r9
	.cfi_adjust_cfa_offset -8
	pop %r8
	.cfi_adjust_cfa_offset -8
	pop %rax
	.cfi_adjust_cfa_offset -8
	pop %rcx
	.cfi_adjust_cfa_offset -8
	pop %rdx
	.cfi_adjust_cfa_offset -8
	pop %rsi
	.cfi_adjust_cfa_offset -8
	pop %rdi
	.cfi_adjust_cfa_offset -8
	addq $MIDX_SKIP, 8(%rsp)		/* past the fast exit */
	CFI_RA_AT (8+128), (R_PP-MIDX_SKIP)
	popfq
	.cfi_adjust_cfa_offset -8
	jmp \general
	.cfi_endproc
	.size \name, . - \name
	.endm

/* ---- vector state ---- */

/* Below the frame, 64-byte aligned, at r13 (saved by FILL_REGS). */
	.macro VAREA size
	and $-64, %rsp
	.cfi_def_cfa %rbx, CUR_BX_CFA
	sub $\size, %rsp
	mov %rsp, %r13
	FRAME_AT_TOP
	.endm

	.macro SSE_SAVE
	.set VEC_LAYOUT, 16
	VAREA 128
	movdqu %xmm0, 0(%r13)
	movdqu %xmm1, 16(%r13)
	movdqu %xmm2, 32(%r13)
	movdqu %xmm3, 48(%r13)
	movdqu %xmm4, 64(%r13)
	movdqu %xmm5, 80(%r13)
	movdqu %xmm6, 96(%r13)
	movdqu %xmm7, 112(%r13)
	.endm
	.macro SSE_RESTORE
	movdqu 0(%r13), %xmm0
	movdqu 16(%r13), %xmm1
	movdqu 32(%r13), %xmm2
	movdqu 48(%r13), %xmm3
	movdqu 64(%r13), %xmm4
	movdqu 80(%r13), %xmm5
	movdqu 96(%r13), %xmm6
	movdqu 112(%r13), %xmm7
	.endm
	.macro AVX_SAVE
	.set VEC_LAYOUT, 32
	VAREA 256
	vmovdqu %ymm0, 0(%r13)
	vmovdqu %ymm1, 32(%r13)
	vmovdqu %ymm2, 64(%r13)
	vmovdqu %ymm3, 96(%r13)
	vmovdqu %ymm4, 128(%r13)
	vmovdqu %ymm5, 160(%r13)
	vmovdqu %ymm6, 192(%r13)
	vmovdqu %ymm7, 224(%r13)
	.endm
	.macro AVX_RESTORE
	vmovdqu 0(%r13), %ymm0
	vmovdqu 32(%r13), %ymm1
	vmovdqu 64(%r13), %ymm2
	vmovdqu 96(%r13), %ymm3
	vmovdqu 128(%r13), %ymm4
	vmovdqu 160(%r13), %ymm5
	vmovdqu 192(%r13), %ymm6
	vmovdqu 224(%r13), %ymm7
	.endm
	.macro AVX512_SAVE
	.set VEC_LAYOUT, 64
	VAREA 512
	vmovdqu64 %zmm0, 0(%r13)
	vmovdqu64 %zmm1, 64(%r13)
	vmovdqu64 %zmm2, 128(%r13)
	vmovdqu64 %zmm3, 192(%r13)
	vmovdqu64 %zmm4, 256(%r13)
	vmovdqu64 %zmm5, 320(%r13)
	vmovdqu64 %zmm6, 384(%r13)
	vmovdqu64 %zmm7, 448(%r13)
	.endm
	.macro AVX512_RESTORE
	vmovdqu64 0(%r13), %zmm0
	vmovdqu64 64(%r13), %zmm1
	vmovdqu64 128(%r13), %zmm2
	vmovdqu64 192(%r13), %zmm3
	vmovdqu64 256(%r13), %zmm4
	vmovdqu64 320(%r13), %zmm5
	vmovdqu64 384(%r13), %zmm6
	vmovdqu64 448(%r13), %zmm7
	.endm

/* Mid-function: the whole extended state. */
	.macro XSAVE_SAVE
	.set VEC_LAYOUT, KP_VEC_XSAVE
	mov kp_xsave_size(%rip), %ecx
	sub %rcx, %rsp
	.cfi_def_cfa %rbx, CUR_BX_CFA
	and $-64, %rsp
	mov %rsp, %r13
	FRAME_AT_TOP
	xor %eax, %eax
	mov %rax, 512(%r13)			/* xsave header */
	mov %rax, 520(%r13)
	mov %rax, 528(%r13)
	mov %rax, 536(%r13)
	mov %rax, 544(%r13)
	mov %rax, 552(%r13)
	mov %rax, 560(%r13)
	mov %rax, 568(%r13)
	mov $-1, %eax
	mov $-1, %edx
	xsave64 (%r13)
	.endm
	.macro XSAVE_RESTORE
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%r13)
	.endm
	.macro FXSAVE_SAVE
	.set VEC_LAYOUT, KP_VEC_FXSAVE
	VAREA 512
	fxsave64 (%r13)
	.endm
	.macro FXSAVE_RESTORE
	fxrstor64 (%r13)
	.endm

/* One per vector width, with the flags dead or kept, for one kind of exit
 * (plain: kp_opt_entry_*, continuing: kp_opt_centry_*). */
	.macro ENTRY_SET prefix, cont
	ENTRY_COMMON \prefix\()_sse, 0, SSE_SAVE, SSE_RESTORE, \cont
	ENTRY_COMMON \prefix\()_avx, 0, AVX_SAVE, AVX_RESTORE, \cont
	ENTRY_COMMON \prefix\()_avx512, 0, AVX512_SAVE, AVX512_RESTORE, \cont
	ENTRY_COMMON \prefix\()_sse_flags, 1, SSE_SAVE, SSE_RESTORE, \cont
	ENTRY_COMMON \prefix\()_avx_flags, 1, AVX_SAVE, AVX_RESTORE, \cont
	ENTRY_COMMON \prefix\()_avx512_flags, 1, AVX512_SAVE, AVX512_RESTORE, \cont
	.endm

	ENTRY_SET kp_opt_entry, 0
	ENTRY_SET kp_opt_centry, 1
	COMMON kp_opt_mid_xsave, XSAVE_SAVE, XSAVE_RESTORE, R_PP
	COMMON kp_opt_mid_fxsave, FXSAVE_SAVE, FXSAVE_RESTORE, R_PP
	COMMON kp_opt_midx_xsave, XSAVE_SAVE, XSAVE_RESTORE, (R_PP-MIDX_SKIP)
	COMMON kp_opt_midx_fxsave, FXSAVE_SAVE, FXSAVE_RESTORE, (R_PP-MIDX_SKIP)
	MID_FAST kp_opt_midf_xsave, kp_opt_midx_xsave
	MID_FAST kp_opt_midf_fxsave, kp_opt_midx_fxsave

	.section .note.GNU-stack, "", @progbits
