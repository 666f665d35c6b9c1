/* Public calls for tools that drive the library from inside a process (the
 * kprobe tool's agent): optimizing now, the library's own threads, a
 * thread's quiet stretches, instruction boundaries, leaving a process. */
#include <errno.h>

#include "core/internal.h"
#include "os/linux/memory.h"
#include "os/linux/threads.h"

/* Two passes: the second takes what the first had to leave to a retry
 * (a thread that was in a region then). */
KP_EXPORT int kprobes_optimize_now(void)
{
	int left = 0;

	kp_optimizer_wait_ready();
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&kp_registry_lock);
		left = kp_optimizer_flush();
		pthread_mutex_unlock(&kp_registry_lock);
		if (!left)
			break;
	}
	return left;
}

KP_EXPORT bool kprobes_library_thread(pid_t tid)
{
	return tid > 0 && tid == __atomic_load_n(&kp_optimizer_tid, __ATOMIC_ACQUIRE);
}

/* The library's own mark for its work on program threads (lib_code, with
 * in_handler), which every hit path checks already. */
KP_EXPORT int kprobes_quiet_begin(void)
{
	return kp_lib_code_begin() ? 0 : -ENOMEM;
}

KP_EXPORT void kprobes_quiet_end(void)
{
	struct kp_thread *t = kp_thread_existing();

	if (t && t->lib_code)
		kp_lib_code_end(t);
}

KP_EXPORT const char *kprobes_probe_refusal(unsigned long addr, bool is_return)
{
	return kp_probe_refusal(addr, is_return);
}

KP_EXPORT int kprobes_insn_boundary(unsigned long start, size_t len, unsigned long addr)
{
	int err;

	if (!len || addr < start || addr - start >= len)
		return -EINVAL;
	/* Under the registry lock: probes' original bytes stand in for their
	 * breakpoints and jumps, and none is written meanwhile. */
	pthread_mutex_lock(&kp_registry_lock);
	err = arch_check_boundary(start, len, addr);
	pthread_mutex_unlock(&kp_registry_lock);
	return err;
}

KP_EXPORT void kprobes_release_resources(void)
{
	kp_optimizer_stop();
	pthread_mutex_lock(&kp_registry_lock);
	kp_mem_release();
	pthread_mutex_unlock(&kp_registry_lock);
}
