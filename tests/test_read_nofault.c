/* kprobes_read_nofault(), the public fault-safe copy: copies what is
 * readable, returns -EFAULT for what is not (unmapped, PROT_NONE, a kernel
 * or non-canonical address, past the end of a file mapping, a range half
 * in a readable page), and never lets the fault reach the process: not
 * from another thread, not from a probe handler or a signal handler, not
 * past a SIGSEGV handler the program installed (which still gets its own
 * faults), not on a thread that blocks SIGSEGV, nor inside the program's
 * SIGSEGV handler while the kernel blocks it there. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(read_nofault, .timeout = 10);

#define PAGE 4096

/* Two pages, the second one inaccessible. */
static char *readable_then_none(void)
{
	char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	memset(p, 'a', PAGE);
	cr_assert_eq(mprotect(p + PAGE, PAGE, PROT_NONE), 0);
	return p;
}

Test(read_nofault, copies_readable_memory_of_every_size)
{
	static const size_t sizes[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 64, 4097, 10000 };
	static char src[10000], dst[10000];

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(dst, 0, sizeof(dst));
		cr_assert_eq(kprobes_read_nofault(dst, src + 1, sizes[i] > 9999 ? 9999 : sizes[i]), 0);
		cr_assert_eq(memcmp(dst, src + 1, sizes[i] > 9999 ? 9999 : sizes[i]), 0, "size %zu",
			     sizes[i]);
	}
	cr_assert_eq(kprobes_read_nofault(dst, NULL, 0), 0);
}

Test(read_nofault, bad_addresses_are_efault)
{
	static const uintptr_t bad[] = {
		0, 1, 4095, 0x8000000000000000ull /* non-canonical */,
		0xffff888000000000ull /* the kernel's */, UINTPTR_MAX - 3,
	};
	static const size_t sizes[] = { 1, 2, 4, 8, 3, 64 };
	char buf[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			cr_assert_eq(kprobes_read_nofault(buf, (const void *)bad[i], sizes[j]),
				     -EFAULT, "%#lx, %zu bytes", (unsigned long)bad[i], sizes[j]);
	/* a bad destination too */
	cr_assert_eq(kprobes_read_nofault((void *)8, buf, 8), -EFAULT);
	cr_assert_eq(kprobes_read_nofault((void *)8, buf, 20), -EFAULT);
}

Test(read_nofault, unmapped_and_prot_none_are_efault)
{
	char *p = readable_then_none();
	uint64_t v = 0;

	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE, 8), -EFAULT);
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE + 100, 1), -EFAULT);
	cr_assert_eq(munmap(p, 2 * PAGE), 0);
	cr_assert_eq(kprobes_read_nofault(&v, p, 8), -EFAULT);
	cr_assert_eq(kprobes_read_nofault(&v, p + 17, 33), -EFAULT);
}

Test(read_nofault, a_range_across_into_a_bad_page_is_efault_with_the_bytes_before)
{
	char *p = readable_then_none();
	char buf[32];
	uint64_t v = 0;

	/* ending exactly at the boundary: fine */
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE - 8, 8), 0);
	cr_assert_eq(v, 0x6161616161616161ull);
	/* one load straddling it */
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE - 4, 8), -EFAULT);
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE - 1, 2), -EFAULT);
	/* a copy straddling it stops at the fault */
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(kprobes_read_nofault(buf, p + PAGE - 10, sizeof(buf)), -EFAULT);
	cr_assert_eq(memcmp(buf, "aaaaaaaaaa", 10), 0);
	munmap(p, 2 * PAGE);
}

Test(read_nofault, past_the_end_of_a_file_mapping_is_efault)
{
	int fd = memfd_create("nofault", 0);
	char *p;
	uint64_t v = 1;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, PAGE), 0);
	p = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	cr_assert_eq(kprobes_read_nofault(&v, p, 8), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE, 8), -EFAULT);	/* SIGBUS */
	cr_assert_eq(kprobes_read_nofault(&v, p + PAGE + 8, 24), -EFAULT);
	munmap(p, 2 * PAGE);
	close(fd);
}

/* ---- the program's own SIGSEGV handler ---- */

static volatile sig_atomic_t prog_faults;
static sigjmp_buf prog_jmp;

static void prog_segv(int sig)
{
	(void)sig;
	prog_faults++;
	siglongjmp(prog_jmp, 1);
}

Test(read_nofault, the_programs_segv_handler_sees_only_its_own_faults)
{
	struct sigaction sa = { .sa_handler = prog_segv };
	static volatile uintptr_t bad_addr = 16;
	volatile char *bad = (volatile char *)bad_addr;
	uint64_t v;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(kprobes_read_nofault(&v, (const void *)bad, 8), -EFAULT);
	cr_assert_eq(prog_faults, 0);
	if (!sigsetjmp(prog_jmp, 1))
		KEEP(*bad);	/* the program's own fault */
	cr_assert_eq(prog_faults, 1);
	/* and after it, ours are still caught */
	cr_assert_eq(kprobes_read_nofault(&v, (const void *)bad, 8), -EFAULT);
	cr_assert_eq(prog_faults, 1);
}

/* ---- other threads, signal handlers, probe handlers ---- */

static void *thread_reads(void *arg)
{
	uint64_t v;
	long bad = 0;

	(void)arg;
	for (int i = 0; i < 1000; i++)
		bad += kprobes_read_nofault(&v, (const void *)(uintptr_t)(64 + i * 8), 8) == -EFAULT;
	return (void *)bad;
}

Test(read_nofault, works_on_every_thread)
{
	pthread_t th[4];
	void *bad;

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, thread_reads, NULL), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], &bad);
		cr_assert_eq((long)bad, 1000);
	}
}

static volatile long in_signal_result = 1;

static void usr1_reads(int sig)
{
	uint64_t v;

	(void)sig;
	in_signal_result = kprobes_read_nofault(&v, (const void *)24, 8);
}

Test(read_nofault, works_inside_a_signal_handler)
{
	cr_assert_neq(signal(SIGUSR1, usr1_reads), SIG_ERR);
	raise(SIGUSR1);
	cr_assert_eq(in_signal_result, -EFAULT);
}

static const char good_string[] = "seen from the handler";
static long handler_bad = 1, handler_good = 1;
static char handler_copy[sizeof(good_string)];

long nofault_target(const char *s, const void *bad);
TEST_FN long nofault_target(const char *s, const void *bad)
{
	KEEP(s);
	KEEP(bad);
	return 0;
}

static int reads_arguments(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	handler_good = kprobes_read_nofault(handler_copy, (const void *)regs_get_kernel_argument(regs, 0),
					    sizeof(handler_copy));
	handler_bad = kprobes_read_nofault(handler_copy + 4, (const void *)regs_get_kernel_argument(regs, 1), 8);
	return 0;
}

Test(read_nofault, works_in_a_probe_handler)
{
	struct kprobe kp = { .symbol_name = "nofault_target", .pre_handler = reads_arguments };
	struct sigaction sa = { .sa_handler = prog_segv };

	/* the program's handler is there too, and must not run */
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	cr_assert_eq(register_kprobe(&kp), 0);
	nofault_target(good_string, (const void *)0x10);
	unregister_kprobe(&kp);
	cr_assert_eq(handler_good, 0);
	cr_assert_eq(handler_bad, -EFAULT);
	cr_assert_str_eq(handler_copy, good_string);
	cr_assert_eq(prog_faults, 0);
}

/* A thread that blocks the fault signals: a caught fault would kill the
 * process there, so the copy takes the kernel's way. */
static void *blocked_reads(void *arg)
{
	sigset_t set;
	uint64_t v = 0;
	static const uint64_t good = 0x1122334455667788ull;
	long bad;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGSEGV);
	sigaddset(&set, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	bad = kprobes_read_nofault(&v, (const void *)32, 8);
	if (bad != -EFAULT || kprobes_read_nofault(&v, &good, 8) || v != good)
		return (void *)1;
	return NULL;
}

Test(read_nofault, works_on_a_thread_that_blocks_the_fault_signals)
{
	pthread_t th;
	void *r;

	cr_assert_eq(pthread_create(&th, NULL, blocked_reads, NULL), 0);
	pthread_join(th, &r);
	cr_assert_null(r);
}

static volatile long in_segv_result = 1;
static sigjmp_buf segv_jmp;

/* Installed without SA_NODEFER: SIGSEGV is blocked while it runs. */
static void segv_reads(int sig)
{
	uint64_t v;

	(void)sig;
	in_segv_result = kprobes_read_nofault(&v, (const void *)40, 8);
	siglongjmp(segv_jmp, 1);
}

Test(read_nofault, works_inside_the_programs_segv_handler)
{
	struct sigaction sa = { .sa_handler = segv_reads };
	static volatile uintptr_t bad_addr = 48;

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	if (!sigsetjmp(segv_jmp, 1))
		KEEP(*(volatile char *)bad_addr);
	cr_assert_eq(in_segv_result, -EFAULT);
}
