/* A fault-safe copy without a system call: the copy is one `rep movsb`
 * between two labels; a SIGSEGV/SIGBUS handler that calls
 * lang_fault_fixup() first turns a fault there into a return of -EFAULT
 * (the kernel's exception-table technique).  Async-signal-safe. */
#include <errno.h>
#include <signal.h>
#include <ucontext.h>

#include "lang.h"

long lang_copy_asm(void *dst, uintptr_t src, size_t len);
extern const char lang_copy_fault_begin[], lang_copy_fault_end[], lang_copy_fixup[];

__asm__(".pushsection .text\n"
	".globl lang_copy_asm\n"
	".hidden lang_copy_asm\n"
	".type lang_copy_asm,@function\n"
	"lang_copy_asm:\n"
	"	mov %rdx, %rcx\n"
	".globl lang_copy_fault_begin\n"
	".hidden lang_copy_fault_begin\n"
	"lang_copy_fault_begin:\n"
	"	rep movsb\n"
	".globl lang_copy_fault_end\n"
	".hidden lang_copy_fault_end\n"
	"lang_copy_fault_end:\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	".globl lang_copy_fixup\n"
	".hidden lang_copy_fixup\n"
	"lang_copy_fixup:\n"
	"	mov $-14, %rax\n"	/* -EFAULT */
	"	ret\n"
	".size lang_copy_asm, .-lang_copy_asm\n"
	".popsection\n");

int lang_read_nofault(void *dst, uintptr_t src, size_t len, void *arg)
{
	(void)arg;
	if (!len)
		return 0;
	if (src + len < src)
		return -EFAULT;
	return (int)lang_copy_asm(dst, src, len);
}

bool lang_fault_fixup(void *ucontext)
{
	ucontext_t *uc = ucontext;
	uintptr_t ip;

	if (!uc)
		return false;
	ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (ip < (uintptr_t)lang_copy_fault_begin || ip >= (uintptr_t)lang_copy_fault_end)
		return false;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)lang_copy_fixup;
	return true;
}
