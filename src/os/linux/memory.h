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

/* Reads len bytes at addr without faulting; 0 or -EFAULT. */
int kp_mem_read_nofault(uintptr_t addr, void *buf, size_t len);

/* Maps size bytes (a multiple of the page size) of read+exec anonymous
 * memory somewhere in [lo, hi); returns the address or 0. */
uintptr_t kp_map_exec_near(uintptr_t lo, uintptr_t hi, size_t size);

/* Whether [addr, addr+len) lies in executable mapped memory. */
bool kp_mem_is_exec(uintptr_t addr, size_t len);

#endif
