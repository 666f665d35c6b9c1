/*
 * Functions with known ways out, for kprobes_exit_sites() (test_exits.c).
 * Each global label ex_*_site* marks an exit site the test expects; each
 * function is followed by int3 padding to a 16-byte boundary, so that a
 * site near a function's end can take a jump over it.
 */
	.text

/* One run from the entry to the return: one site, the entry. */
	.globl ex_straight
	.type ex_straight, @function
	.p2align 4, 0xcc
ex_straight:
	push %rbx
	lea 1(%rdi), %rbx
	mov %rbx, %rax
	pop %rbx
	ret
	.size ex_straight, . - ex_straight

/* Two returns, each at the end of a run that starts after a branch or at
 * its target; a loop that stays inside. */
	.globl ex_two, ex_two_site0, ex_two_site1
	.type ex_two, @function
	.p2align 4, 0xcc
ex_two:
	push %rbp
	xor %eax, %eax
1:	add $1, %rax
	cmp %rdi, %rax
	jl 1b
	cmp $1, %rdi
	jg 2f
ex_two_site0:
	mov %rdi, %rax
	add $0, %rax
	pop %rbp
	ret
2:
ex_two_site1:
	lea (%rdi,%rdi), %rax
	add $0, %rax
	pop %rbp
	ret
	.size ex_two, . - ex_two

/* A return and a tail call: the tail call's run is an exit too. */
	.globl ex_tail, ex_tail_site0, ex_tail_site1
	.type ex_tail, @function
	.p2align 4, 0xcc
ex_tail:
	test %rdi, %rdi
	jne 1f
ex_tail_site0:
	mov $7, %eax
	add $0, %rax
	ret
1:
ex_tail_site1:
	add $1, %rdi
	add $0, %rdi
	jmp ex_straight
	.size ex_tail, . - ex_tail

/* A return after a call: the run starts after the call (a return event
 * must come after the callee's). */
	.globl ex_after_call, ex_after_call_site0
	.type ex_after_call, @function
	.p2align 4, 0xcc
ex_after_call:
	push %rbx
	call ex_straight
ex_after_call_site0:
	add $1, %rax
	add $0, %rax
	pop %rbx
	ret
	.size ex_after_call, . - ex_after_call

/* A conditional branch out of the function: no site can stand for it. */
	.globl ex_cond_out
	.type ex_cond_out, @function
	.p2align 4, 0xcc
ex_cond_out:
	test %rdi, %rdi
	je ex_straight
	mov $3, %eax
	ret
	.size ex_cond_out, . - ex_cond_out

/* An indirect jump whose targets are unknown. */
	.globl ex_indirect
	.type ex_indirect, @function
	.p2align 4, 0xcc
ex_indirect:
	mov %rdi, %rax
	jmp *%rsi
	.size ex_indirect, . - ex_indirect

/* A return whose run is one byte long, inside the function (another run
 * follows): a breakpoint could stand there, a jump cannot. */
	.globl ex_short, ex_short_site0, ex_short_site1
	.type ex_short, @function
	.p2align 4, 0xcc
ex_short:
	cmp $1, %rdi
	je 1f
ex_short_site0:
	ret
1:
ex_short_site1:
	mov $9, %eax
	add $0, %rax
	ret
	.size ex_short, . - ex_short

/* A tail another function jumps into: its return would pass a site of
 * ex_shared without a call of ex_shared. */
	.globl ex_shared
	.type ex_shared, @function
	.p2align 4, 0xcc
ex_shared:
	mov $1, %eax
	add $0, %rax
ex_shared_tail:
	add $2, %rax
	add $0, %rax
	ret
	.size ex_shared, . - ex_shared

	.globl ex_enters
	.type ex_enters, @function
	.p2align 4, 0xcc
ex_enters:
	mov $5, %eax
	jmp ex_shared_tail
	.size ex_enters, . - ex_enters

/* A part moved away that comes back (as GCC's NAME.cold): one return
 * would pass the jump's site and the return's. */
	.globl ex_hot
	.type ex_hot, @function
	.p2align 4, 0xcc
ex_hot:
	test %rdi, %rdi
	jne 1f
	jmp ex_hot_cold
1:
	mov $1, %eax
	add $0, %rax
	ret
	.size ex_hot, . - ex_hot

	.type ex_hot_cold, @function
	.p2align 4, 0xcc
ex_hot_cold:
	mov $2, %edi
	jmp 1b
	.size ex_hot_cold, . - ex_hot_cold

/* Never returns: no site. */
	.globl ex_forever
	.type ex_forever, @function
	.p2align 4, 0xcc
ex_forever:
	pause
	jmp ex_forever
	.size ex_forever, . - ex_forever
	.p2align 4, 0xcc

	.section .note.GNU-stack, "", @progbits
