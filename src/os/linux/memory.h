/* Memory of this process: code patching and placement of executable pages. */
#ifndef KP_OS_MEMORY_H
#define KP_OS_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes len bytes at addr through /proc/self/mem, so read-only or
 * execute-only pages are patched without ever losing PROT_EXEC.  The caller
 * serializes cores afterwards (kp_sync_cores).  0 or -errno. */
int kp_mem_write(uintptr_t addr, const void *buf, size_t len);

/* Around a batch of patches made under the registry lock, which a fork
 * waits for: the process stays the same throughout, so its id is checked
 * once (every read and write outside a batch checks it, in case a fork
 * made this a new process).  Nest. */
void kp_mem_batch_begin(void);
void kp_mem_batch_end(void);

/* Makes every thread of the process execute a serializing instruction before
 * it next runs user code, so freshly written code is seen by all cores. */
void kp_sync_cores(void);

/* Closes the /proc/self/mem descriptor (reopened when next needed): for
 * an agent leaving a process it was injected into.  Not during patching. */
void kp_mem_release(void);

/* Reads len bytes at addr without faulting; 0 or -EFAULT. */
int kp_mem_read_nofault(uintptr_t addr, void *buf, size_t len);

/* The size (1, 2, 4 or 8) bytes at addr, zero-extended into *out, for a
 * handler on the hit path: a plain load whose fault the library's fault
 * handler catches (kp_load_nofault_sized(), asm/uaccess.h: no
 * system call) when kp_load_nofault_usable(), else a read through the kernel.
 * 0 or -EFAULT.  Async-signal-safe. */
int kp_read_small_nofault(uintptr_t addr, unsigned int size, uint64_t *out);

/* Whether a caught load may be used now: a blocked synchronous fault
 * signal would kill the process instead of reaching the library. */
extern bool kp_nofault_loads_ok;
extern __thread int kp_fault_masked_depth __attribute__((tls_model("initial-exec")));
extern __thread int kp_thread_mask_state __attribute__((tls_model("initial-exec")));
int kp_thread_mask_refresh(void);

/* The library's fault handler catches a fault here, and it will be
 * delivered: neither the thread's mask nor a running handler's blocks the
 * fault signals (a thread's first call reads its mask: one system call). */
static inline bool kp_load_nofault_usable(void)
{
	int state = kp_thread_mask_state;

	if (!__atomic_load_n(&kp_nofault_loads_ok, __ATOMIC_ACQUIRE) || kp_fault_masked_depth)
		return false;
	if (__builtin_expect(!state, 0))
		state = kp_thread_mask_refresh();
	return state == 1;	/* KP_MASK_CLEAR */
}


/* Maps size bytes (a multiple of the page size) of read+exec anonymous
 * memory somewhere in [lo, hi); returns the address or 0. */
uintptr_t kp_map_exec_near(uintptr_t lo, uintptr_t hi, size_t size);

/* Whether [addr, addr+len) lies in executable mapped memory. */
bool kp_mem_is_exec(uintptr_t addr, size_t len);

/* Descriptors kept open for long (ours in a program we were loaded into):
 * moved high, out of the way of a program that opens the lowest free
 * number, and checked before use, since the program may close them (all
 * of its descriptors, say) and get the number back for a file of its own. */
struct kp_fd_id {
	uint64_t dev, ino;
};

/* Moves fd (close-on-exec) to a number near the top of the descriptor
 * limit; returns the new number, or fd itself when none is free. */
int kp_fd_move_high(int fd);
/* Records what fd refers to; 0 or -errno. */
int kp_fd_identify(int fd, struct kp_fd_id *id);
/* Whether fd still refers to what kp_fd_identify() recorded. */
bool kp_fd_unchanged(int fd, const struct kp_fd_id *id);

#endif
