/* Code patching through /proc/self/mem, core serialization with membarrier,
 * and executable pages placed near the code they serve. */
#include "os/linux/memory.h"
#include "asm/uaccess.h"
#include "os/linux/signals.h"
#include "os/linux/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int mem_fd = -1;
static pid_t mem_fd_pid;
static struct kp_fd_id mem_fd_id;
static int sync_core_state;	/* 0 unknown, 1 registered, -1 unavailable */

static int membarrier(int cmd, unsigned int flags)
{
	return (int)syscall(__NR_membarrier, cmd, flags, 0);
}

static int batch_depth;		/* changed under the registry lock only */

/* This process's id: from a system call, except inside a batch. */
static pid_t mem_pid(void)
{
	if (__atomic_load_n(&batch_depth, __ATOMIC_RELAXED) && mem_fd_pid)
		return mem_fd_pid;
	return kp_getpid();
}

/* Lowest number kp_fd_move_high() uses: near the top of the soft limit
 * (1024 for most programs), never more than 64 Ki. */
#define FD_HIGH_ROOM 64

int kp_fd_move_high(int fd)
{
	struct rlimit rl;
	rlim_t top;
	int high;

	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl))
		return fd;
	top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;
	if (top <= 3 + FD_HIGH_ROOM)
		return fd;
	high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - FD_HIGH_ROOM));
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

int kp_fd_identify(int fd, struct kp_fd_id *id)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	id->dev = (uint64_t)st.st_dev;
	id->ino = (uint64_t)st.st_ino;
	return 0;
}

bool kp_fd_unchanged(int fd, const struct kp_fd_id *id)
{
	struct kp_fd_id now;

	return fd >= 0 && !kp_fd_identify(fd, &now) && now.dev == id->dev && now.ino == id->ino;
}

/* /proc/self/mem of the current process; reopened after fork, and when the
 * program closed it (then the number may be one of its own files now:
 * never written, never closed by us). */
static int mem_fd_get(void)
{
	pid_t pid = mem_pid();
	bool batched = __atomic_load_n(&batch_depth, __ATOMIC_RELAXED) != 0;

	if (mem_fd >= 0 && mem_fd_pid == pid && (batched || kp_fd_unchanged(mem_fd, &mem_fd_id)))
		return mem_fd;
	if (mem_fd >= 0 && mem_fd_pid != pid && kp_fd_unchanged(mem_fd, &mem_fd_id))
		close(mem_fd);	/* the parent's, inherited over fork */
	mem_fd = kp_fd_move_high(open("/proc/self/mem", O_RDWR | O_CLOEXEC));
	if (mem_fd >= 0 && kp_fd_identify(mem_fd, &mem_fd_id)) {
		close(mem_fd);
		mem_fd = -1;
	}
	mem_fd_pid = pid;
	return mem_fd;
}

void kp_mem_release(void)
{
	if (mem_fd >= 0 && mem_fd_pid == kp_getpid() && kp_fd_unchanged(mem_fd, &mem_fd_id))
		close(mem_fd);
	mem_fd = -1;
	mem_fd_pid = 0;
}

/* Fallback for systems where /proc/self/mem is not writable: briefly add
 * PROT_WRITE while keeping PROT_EXEC, so concurrent executors never fault. */
static int mem_write_mprotect(uintptr_t addr, const void *buf, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = addr & ~(uintptr_t)(pg - 1);
	size_t span = (addr + len - start + pg - 1) & ~(size_t)(pg - 1);

	if (mprotect((void *)start, span, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	memcpy((void *)addr, buf, len);
	if (mprotect((void *)start, span, PROT_READ | PROT_EXEC))
		return -errno;
	return 0;
}

int kp_mem_write(uintptr_t addr, const void *buf, size_t len)
{
	int fd = mem_fd_get();
	ssize_t n;

	if (fd < 0)
		return mem_write_mprotect(addr, buf, len);
	/* The system call itself, not libc's pwrite(): a probe on that (as
	 * on every function of libc) would trap at each write of a batch. */
	n = kp_syscall6(SYS_pwrite64, fd, (long)buf, (long)len, (long)addr, 0, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n == -EIO)
		return -EFAULT;
	return mem_write_mprotect(addr, buf, len);
}

void kp_mem_batch_begin(void)
{
	int depth = __atomic_load_n(&batch_depth, __ATOMIC_RELAXED);

	if (!depth)
		mem_fd_get();	/* with the system call, once for the batch */
	__atomic_store_n(&batch_depth, depth + 1, __ATOMIC_RELAXED);
}

void kp_mem_batch_end(void)
{
	__atomic_store_n(&batch_depth, __atomic_load_n(&batch_depth, __ATOMIC_RELAXED) - 1,
			 __ATOMIC_RELAXED);
}

void kp_sync_cores(void)
{
	if (sync_core_state == 0)
		sync_core_state = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0) ? -1 : 1;
	if (sync_core_state > 0 &&
	    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0) == 0)
		return;
	/* Without SYNC_CORE: a full barrier on every running thread; the
	 * return to user mode after the IPI is serializing on x86. */
	if (membarrier(MEMBARRIER_CMD_SHARED, 0))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* The low len (1, 2, 4 or 8) bytes of v at buf (little-endian). */
static inline __attribute__((always_inline)) void store_low(void *buf, uint64_t v, size_t len)
{
	uint32_t w = (uint32_t)v;
	uint16_t h = (uint16_t)v;
	uint8_t b = (uint8_t)v;

	if (len == 8)
		__builtin_memcpy(buf, &v, 8);
	else if (len == 4)
		__builtin_memcpy(buf, &w, 4);
	else if (len == 2)
		__builtin_memcpy(buf, &h, 2);
	else
		__builtin_memcpy(buf, &b, 1);
}

/* len bytes at addr through the kernel (process_vm_readv): for a thread
 * where a fault would not reach the library's handler. */
static int kernel_read(uintptr_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)addr, len };

	if (kp_syscall6(SYS_process_vm_readv, mem_pid(), (long)&local, 1, (long)&remote, 1, 0) == (long)len)
		return 0;
	return -EFAULT;
}

/* A copy whose fault the library's handler catches where it can (no
 * system call: a handler reading a stack argument, the analysis reading
 * every function of a library at registration), else the kernel's.  A
 * word is one load (rep movsb starts slowly), stored by copies of
 * constant size: a call to memcpy, which may use vector registers, would
 * make the handler analysis save them for every handler that reads a
 * stack argument. */
int kp_mem_read_nofault(uintptr_t addr, void *buf, size_t len)
{
	uint64_t v;

	if (!len)
		return 0;
	if (addr + len < addr)
		return -EFAULT;	/* wraps around: nobody's memory */
	if (len == 8 || len == 4 || len == 2 || len == 1) {
		if (kp_read_small_nofault(addr, (unsigned int)len, &v))
			return -EFAULT;
		store_low(buf, v, len);
		return 0;
	}
	if (kp_load_nofault_usable())
		return kp_copy_nofault(buf, (const void *)addr, len) ? -EFAULT : 0;
	return kernel_read(addr, buf, len);
}

int kp_read_small_nofault(uintptr_t addr, unsigned int size, uint64_t *out)
{
	uint64_t v = 0;

	if (size != 1 && size != 2 && size != 4 && size != 8)
		return -EFAULT;
	if (kp_load_nofault_usable())
		return kp_load_nofault_sized(addr, size, out);
	if (kernel_read(addr, &v, size))
		return -EFAULT;
	*out = v;
	return 0;
}

/* One line of /proc/self/maps: start, end and permissions. */
struct map_range {
	uintptr_t start, end;
	char perms[5];
};

static int maps_next(FILE *f, struct map_range *m)
{
	char line[512];

	if (!fgets(line, sizeof(line), f))
		return 0;
	if (sscanf(line, "%lx-%lx %4s", &m->start, &m->end, m->perms) != 3)
		return 0;
	return 1;
}

/* Tries to map at hint without replacing anything already there. */
static uintptr_t map_exact(uintptr_t hint, size_t size)
{
	void *p = mmap((void *)hint, size, PROT_READ | PROT_EXEC,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return 0;
	if ((uintptr_t)p != hint) {
		munmap(p, size);
		return 0;
	}
	return hint;
}

uintptr_t kp_map_exec_near(uintptr_t lo, uintptr_t hi, size_t size)
{
	const uintptr_t gran = 0x10000;
	uintptr_t prev_end = 0x10000, got = 0;
	struct map_range m;
	FILE *f;

	lo = (lo + gran - 1) & ~(gran - 1);
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	/* Walk the gaps between mappings, prefer the first one that fits in
	 * the window; keep a page of distance from neighbours. */
	for (;;) {
		int more = maps_next(f, &m);
		uintptr_t gap_end = more ? m.start : 0x7ffffffff000UL;
		uintptr_t s = (prev_end + gran + gran - 1) & ~(gran - 1);

		if (s < lo)
			s = lo;
		if (s + size + gran <= gap_end && s + size <= hi) {
			got = map_exact(s, size);
			if (got)
				break;
		}
		if (!more)
			break;
		prev_end = m.end;
	}
	fclose(f);
	return got;
}

bool kp_mem_is_exec(uintptr_t addr, size_t len)
{
	struct map_range m;
	bool ok = false;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return false;
	while (maps_next(f, &m)) {
		if (addr >= m.start && addr + len <= m.end) {
			ok = m.perms[2] == 'x';
			break;
		}
	}
	fclose(f);
	return ok;
}
