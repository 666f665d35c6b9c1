/* kprobes_read_nofault(): a copy from memory that may not be there, for
 * handlers that follow pointers.  Where the fault signal reaches the
 * library (kp_load_nofault_usable()), the copy is the architecture's
 * kp_copy_nofault(), whose fault the library's SIGSEGV/SIGBUS handler
 * turns into -EFAULT before anything else sees it: no system call.  On a
 * thread whose mask blocks those signals, or in a program's handler that
 * blocks them, a fault would kill the process instead, and the copy goes
 * through the kernel (kp_mem_read_nofault). */
#include <errno.h>
#include <stdint.h>

#include "asm/uaccess.h"
#include "core/internal.h"
#include "os/linux/memory.h"

KP_EXPORT long kprobes_read_nofault(void *dst, const void *src, size_t len)
{
	uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;

	if (!len)
		return 0;
	/* A range that wraps around is nobody's memory. */
	if (s + len < s || d + len < d)
		return -EFAULT;
	if (__builtin_expect(kp_load_nofault_usable(), 1))
		return kp_copy_nofault(dst, src, len);
	return kp_mem_read_nofault(s, dst, len);
}
