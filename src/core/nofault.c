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

/* Whether the caught loads may be used is asked once for the chain; each
 * hop is then one load (kp_load_nofault_sized()), or one read through the
 * kernel where a fault could not reach the library. */
KP_EXPORT int kprobes_read_chain_nofault(unsigned long base, const int32_t *off,
					 const uint8_t *size, int n, uint64_t *out)
{
	bool caught;
	uint64_t v = base;

	if (n < 0 || n > KPROBES_CHAIN_MAX || (n && (!off || !size)) || !out)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (size[i] != 1 && size[i] != 2 && size[i] != 4 && size[i] != 8)
			return -EINVAL;
	caught = n && __builtin_expect(kp_load_nofault_usable(), 1);
	for (int i = 0; i < n; i++) {
		uint64_t addr = v + (uint64_t)(int64_t)off[i];

		/* The first page is nobody's: a NULL pointer's field. */
		if (addr < 4096)
			return -EFAULT;
		if (caught ? kp_load_nofault_sized((uintptr_t)addr, size[i], &v) :
			     kp_read_small_nofault((uintptr_t)addr, size[i], &v))
			return -EFAULT;
	}
	*out = v;
	return 0;
}
