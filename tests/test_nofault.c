/* kp_read_small_nofault(): a handler's load of program memory that may fault.
 * With the library's fault handler in place (a probe registered) it is a
 * plain load whose SIGSEGV the handler turns into -EFAULT; on a thread
 * whose mask blocks SIGSEGV or SIGBUS it goes through process_vm_readv
 * instead, since a blocked synchronous fault would kill the process. */
#include <pthread.h>
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "os/linux/memory.h"

static struct kprobe kp;

static int empty(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	return 0;
}

/* Brings the library's signal handlers up as any probe does. */
static void arm_library(void)
{
	kp.symbol_name = "getppid";
	kp.pre_handler = empty;
	cr_assert_eq(register_kprobe(&kp), 0);
}

static void check_loads(void)
{
	static const uint64_t value = 0x1122334455667788ull;
	/* A page no load may read, kept reserved while the loads run: two
	 * threads check at once, and an unmapped page could be the other's
	 * next mmap(). */
	unsigned char *gone = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t out = 7;

	cr_assert_neq(gone, MAP_FAILED);
	cr_assert_eq(kp_read_small_nofault((uintptr_t)&value, 8, &out), 0);
	cr_assert_eq(out, value);
	cr_assert_eq(kp_read_small_nofault((uintptr_t)&value, 4, &out), 0);
	cr_assert_eq(out, 0x55667788u);
	cr_assert_eq(kp_read_small_nofault((uintptr_t)&value, 2, &out), 0);
	cr_assert_eq(out, 0x7788u);
	cr_assert_eq(kp_read_small_nofault((uintptr_t)&value, 1, &out), 0);
	cr_assert_eq(out, 0x88u);
	out = 7;
	cr_assert_eq(kp_read_small_nofault((uintptr_t)gone, 8, &out), -EFAULT);
	cr_assert_eq(kp_read_small_nofault(0, 1, &out), -EFAULT);
	cr_assert_eq(kp_read_small_nofault(0xffff800000000000ull, 4, &out), -EFAULT);
	cr_assert_eq(kp_read_small_nofault(0x8000000000000000ull, 2, &out), -EFAULT);
	cr_assert_eq(out, 7, "a faulting load leaves *out alone");
	cr_assert_eq(kp_read_small_nofault((uintptr_t)&value, 3, &out), -EFAULT);
	munmap(gone, 4096);
}

Test(nofault, plain_loads_caught_by_the_fault_handler)
{
	arm_library();
	cr_assert(kp_load_nofault_usable());
	check_loads();
	unregister_kprobe(&kp);
}

Test(nofault, system_call_once_the_program_blocks_sigsegv)
{
	sigset_t set, old;

	arm_library();
	cr_assert(kp_load_nofault_usable());
	sigemptyset(&set);
	sigaddset(&set, SIGSEGV);
	cr_assert_eq(sigprocmask(SIG_BLOCK, &set, &old), 0);
	cr_assert(!kp_load_nofault_usable());
	/* Blocked SIGSEGV: a caught load would have killed the process. */
	check_loads();
	sigprocmask(SIG_SETMASK, &old, NULL);
	cr_assert(kp_load_nofault_usable(), "unblocked again: caught loads again");
	unregister_kprobe(&kp);
}

static void *blocked_thread(void *arg)
{
	(void)arg;
	/* Its mask, inherited, blocks everything it may. */
	cr_assert(!kp_load_nofault_usable());
	check_loads();
	return NULL;
}

/* The pattern of many libraries: block every signal, start a thread (which
 * inherits the mask), restore.  Only that thread takes the slow path. */
Test(nofault, thread_started_with_signals_blocked)
{
	sigset_t all, old;
	pthread_t th;

	arm_library();
	sigfillset(&all);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, &all, &old), 0);
	cr_assert_eq(pthread_create(&th, NULL, blocked_thread, NULL), 0);
	cr_assert_eq(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
	cr_assert(kp_load_nofault_usable());
	check_loads();
	cr_assert_eq(pthread_join(th, NULL), 0);
	unregister_kprobe(&kp);
}
