/*
 * What the arm64 port relies on in the machine it runs on, checked inside
 * the qemu-system-aarch64 guest of `make check-arm64`:
 *  - a BRK traps to SIGTRAP (TRAP_BRKPT) with the BRK's address, and the
 *    handler resumes by setting the PC (the probe hit path);
 *  - code rewritten through /proc/self/mem and cache maintenance runs as
 *    written, also after it has run before (the reason qemu-user, which
 *    keeps running its stale translation, cannot host the tests);
 *  - membarrier's SYNC_CORE command (other threads' instruction streams);
 *  - hardware breakpoints through perf (skipped when the kernel has none),
 *    and how a write watchpoint's SIGTRAP (TRAP_PERF) arrives: before the
 *    access, unlike x86-64;
 *  - pointer authentication and BTI as the emulator's -cpu max has them;
 *  - a backtrace from the SIGTRAP handler crosses the signal frame into
 *    the trapped function and its caller (handlers' backtraces).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/membarrier.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#ifndef __aarch64__
#error "test_arm64_smoke is for arm64 only"
#endif

#ifndef PROT_BTI
#define PROT_BTI 0x10
#endif
#ifndef HWCAP2_BTI
#define HWCAP2_BTI (1 << 17)
#endif

/* A64 encodings the tests write. */
#define A64_BRK(imm)	(0xd4200000u | ((uint32_t)(imm) << 5))
#define A64_MOVZ_W0(v)	(0x52800000u | ((uint32_t)(v) << 5))
#define A64_RET		0xd65f03c0u
#define A64_BTI_C	0xd503245fu
#define BRK_IMM		0x7ab

typedef int (*int_fn)(void);

/* Keeps a value alive across an asm barrier. */
#define KEEP_VALUE(x) __asm__ volatile("" : : "r"(x) : "memory")

/*
 * Functions in the executable's own text (file-backed, mapped read-only),
 * where probes go: "mov w0, #1; ret" and one for hardware breakpoints.
 */
__asm__(".text\n"
	".balign 16\n"
	".globl smoke_text_fn\n"
	".type smoke_text_fn, %function\n"
	"smoke_text_fn:\n"
	"	mov w0, #1\n"
	"	ret\n"
	".size smoke_text_fn, .-smoke_text_fn\n"
	".balign 16\n"
	".globl smoke_hwbp_fn\n"
	".type smoke_hwbp_fn, %function\n"
	"smoke_hwbp_fn:\n"
	"	mov w0, #3\n"
	"	ret\n"
	".size smoke_hwbp_fn, .-smoke_hwbp_fn\n");
int smoke_text_fn(void);
int smoke_hwbp_fn(void);

/* Calls through a volatile pointer so that the compiler cannot fold it. */
static int call(int_fn fn)
{
	int_fn volatile f = fn;

	return f();
}

static void poke(void *addr, uint32_t insn)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open /proc/self/mem: %s", strerror(errno));
	cr_assert_eq(pwrite(fd, &insn, 4, (off_t)(uintptr_t)addr), 4,
		     "pwrite /proc/self/mem: %s", strerror(errno));
	close(fd);
	__builtin___clear_cache((char *)addr, (char *)addr + 4);
}

static volatile sig_atomic_t trap_count;
static volatile uintptr_t trap_addr, trap_pc;
static volatile int trap_code;
static volatile uint32_t trap_insn;
static uint32_t restore_insn;

/*
 * SIGTRAP as the probe hit path sees it: record, put the original
 * instruction back (the test's stand-in for running it out of line) and
 * resume at the same PC.
 */
static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	trap_count++;
	trap_code = si->si_code;
	trap_addr = (uintptr_t)si->si_addr;
	trap_pc = uc->uc_mcontext.pc;
	trap_insn = *(volatile uint32_t *)trap_pc;
	if (restore_insn) {
		poke((void *)trap_pc, restore_insn);
		restore_insn = 0;
	} else {
		uc->uc_mcontext.pc += 4;
	}
}

static void catch_signal(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = { .sa_sigaction = fn, .sa_flags = SA_SIGINFO };

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(sig, &sa, NULL), 0);
}

Test(arm64_smoke, brk_raises_sigtrap_at_its_address)
{
	uintptr_t at;

	catch_signal(SIGTRAP, on_trap);
	__asm__ volatile("adr %0, 1f\n"
			 "1: brk %1\n"
			 : "=&r"(at) : "i"(BRK_IMM) : "memory");
	cr_assert_eq(trap_count, 1);
	cr_assert_eq(trap_code, TRAP_BRKPT, "si_code %d", trap_code);
	cr_assert_eq(trap_addr, at, "si_addr %#lx, brk at %#lx",
		     (unsigned long)trap_addr, (unsigned long)at);
	cr_assert_eq(trap_pc, at);
	cr_assert_eq(trap_insn, A64_BRK(BRK_IMM), "insn %#x", trap_insn);
}

/* An executable page already run once, rewritten, run again. */
Test(arm64_smoke, rewritten_anonymous_code_runs_new_bytes)
{
	uint32_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(page, MAP_FAILED);
	page[0] = A64_MOVZ_W0(10);
	page[1] = A64_RET;
	__builtin___clear_cache((char *)page, (char *)(page + 2));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(call((int_fn)page), 10);
	poke(page, A64_MOVZ_W0(20));
	cr_assert_eq(call((int_fn)page), 20,
		     "stale code ran after a write through /proc/self/mem");
	munmap(page, 4096);
}

/* The probe's life cycle on the program's own text: BRK in, hit, out. */
Test(arm64_smoke, brk_written_into_text_traps_then_original_runs)
{
	uint32_t orig = *(volatile uint32_t *)(void *)smoke_text_fn;

	cr_assert_eq(orig, A64_MOVZ_W0(1), "unexpected code %#x", orig);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(call(smoke_text_fn), 1);
	catch_signal(SIGTRAP, on_trap);
	poke((void *)smoke_text_fn, A64_BRK(BRK_IMM));
	restore_insn = orig;
	cr_assert_eq(call(smoke_text_fn), 1);
	cr_assert_eq(trap_count, 1, "the BRK written into text did not trap");
	cr_assert_eq(trap_pc, (uintptr_t)smoke_text_fn);
	cr_assert_eq(trap_insn, A64_BRK(BRK_IMM));
	cr_assert_eq(call(smoke_text_fn), 1);
	cr_assert_eq(trap_count, 1, "the restored instruction still traps");
	cr_assert_eq(*(volatile uint32_t *)(void *)smoke_text_fn, orig);
}

Test(arm64_smoke, membarrier_sync_core)
{
	long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	cr_assert_geq(cmds, 0, "membarrier: %s", strerror(errno));
	cr_assert(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
		  "no SYNC_CORE in %#lx", cmds);
	cr_assert_eq(syscall(__NR_membarrier,
			     MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0), 0,
		     "register: %s", strerror(errno));
	cr_assert_eq(syscall(__NR_membarrier,
			     MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0), 0,
		     "sync core: %s", strerror(errno));
}

/* An execute breakpoint counts each call (the kernel steps over it). */
Test(arm64_smoke, perf_hardware_breakpoint_counts_calls)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof(attr),
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = (uintptr_t)smoke_hwbp_fn,
		.bp_len = 4,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	uint64_t count = 0;
	int fd = syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0);

	if (fd < 0 && (errno == ENOENT || errno == ENODEV || errno == EOPNOTSUPP ||
		       errno == ENOSPC))
		cr_skip_test("no hardware breakpoint here: %s", strerror(errno));
	cr_assert_geq(fd, 0, "perf_event_open: %s", strerror(errno));
	for (int i = 0; i < 5; i++)
		cr_assert_eq(call(smoke_hwbp_fn), 3);
	cr_assert_eq(read(fd, &count, sizeof(count)), (ssize_t)sizeof(count));
	cr_assert_eq(count, 5, "breakpoint counted %llu calls of 5",
		     (unsigned long long)count);
	close(fd);
}

/* PACIA/AUTIA sign and check a pointer; PACIASP/AUTIASP frame a call. */
Test(arm64_smoke, pointer_authentication)
{
	uintptr_t p = (uintptr_t)&trap_count, signed_p, back;
	int r, changed = 0;

	cr_assert(getauxval(AT_HWCAP) & HWCAP_PACA, "no PAC (HWCAP_PACA)");
	/*
	 * With 48-bit addresses the code is 15 bits, or 7 (bits 54:48) where
	 * the top byte is ignored: up to one signature in 128 leaves the
	 * pointer as it was (seen once), so sign with eight modifiers and
	 * require one change.
	 */
	for (uintptr_t mod = 1; mod <= 8; mod++) {
		__asm__ volatile(".arch armv8.3-a\n"
				 "mov %0, %2\n"
				 "pacia %0, %3\n"
				 "mov %1, %0\n"
				 "autia %1, %3\n"
				 : "=&r"(signed_p), "=&r"(back) : "r"(p), "r"(mod));
		changed += signed_p != p;
		cr_assert_eq(back, p, "AUTIA did not restore the pointer");
	}
	cr_assert_gt(changed, 0, "PACIA left the pointer unsigned");
	/* A frame as -mbranch-protection=standard compiles it. */
	__asm__ volatile(".arch armv8.3-a\n"
			 "stp x29, x30, [sp, #-16]!\n"
			 "bl 1f\n"
			 "b 2f\n"
			 "1: bti c\n"
			 "paciasp\n"
			 "mov %w0, #42\n"
			 "autiasp\n"
			 "ret\n"
			 "2: ldp x29, x30, [sp], #16\n"
			 : "=&r"(r) : : "x30", "memory");
	cr_assert_eq(r, 42);
}

static sigjmp_buf ill_env;
static volatile int ill_code;

static void on_ill(int sig, siginfo_t *si, void *uc)
{
	ill_code = si->si_code;
	siglongjmp(ill_env, 1);
}

/*
 * On a PROT_BTI page an indirect call must land on a BTI (or PACIASP):
 * the port's out-of-line slots and detours must begin with one.
 */
Test(arm64_smoke, bti_guarded_page_needs_landing_pad)
{
	uint32_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile int r = -1;

	cr_assert(getauxval(AT_HWCAP2) & HWCAP2_BTI, "no BTI (HWCAP2_BTI)");
	cr_assert_neq(page, MAP_FAILED);
	page[0] = A64_MOVZ_W0(5);
	page[1] = A64_RET;
	page[4] = A64_BTI_C;
	page[5] = A64_MOVZ_W0(6);
	page[6] = A64_RET;
	__builtin___clear_cache((char *)page, (char *)(page + 8));
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC | PROT_BTI), 0,
		     "mprotect PROT_BTI: %s", strerror(errno));
	catch_signal(SIGILL, on_ill);
	if (sigsetjmp(ill_env, 1) == 0)
		r = call((int_fn)page);
	cr_assert_eq(r, -1, "an indirect call to a non-BTI instruction ran");
	cr_assert_eq(ill_code, ILL_ILLOPC, "si_code %d", ill_code);
	cr_assert_eq(call((int_fn)(page + 4)), 6);
	munmap(page, 4096);
}

#define BT_MAX 64
static volatile uintptr_t bt_ips[BT_MAX];
static volatile int bt_n;
static volatile uintptr_t bt_ret;

static _Unwind_Reason_Code bt_frame(struct _Unwind_Context *ctx, void *arg)
{
	if (bt_n >= BT_MAX)
		return _URC_END_OF_STACK;
	bt_ips[bt_n++] = _Unwind_GetIP(ctx);
	return _URC_NO_REASON;
}

static void on_trap_backtrace(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	trap_pc = uc->uc_mcontext.pc;
	_Unwind_Backtrace(bt_frame, NULL);
	uc->uc_mcontext.pc += 4;
}

__attribute__((noinline)) static int bt_target(void)
{
	bt_ret = (uintptr_t)__builtin_return_address(0);
	__asm__ volatile("brk %0" : : "i"(BRK_IMM) : "memory");
	return 7;
}

__attribute__((noinline)) static int bt_caller(void)
{
	return bt_target() + 1;
}

static bool bt_has(uintptr_t ip)
{
	for (int i = 0; i < bt_n; i++)
		if (bt_ips[i] == ip)
			return true;
	return false;
}

Test(arm64_smoke, backtrace_from_trap_handler_crosses_signal_frame)
{
	catch_signal(SIGTRAP, on_trap_backtrace);
	cr_assert_eq(bt_caller(), 8);
	cr_assert_gt(bt_n, 2, "backtrace of %d frames", bt_n);
	cr_assert(bt_has(trap_pc), "the trapped PC %#lx is not in the backtrace",
		  (unsigned long)trap_pc);
	cr_assert(bt_has(bt_ret), "the caller (%#lx) is not in the backtrace",
		  (unsigned long)bt_ret);
}

/* TRAP_PERF's siginfo fields, at their kernel offsets (glibc 2.36 does not
 * name them): sig_data, then the event type. */
#ifndef TRAP_PERF
#define TRAP_PERF 6
#endif
#define WP_COOKIE 0x5eed00c0ffeeull

static volatile uint32_t wp_var;
static volatile int wp_hits, wp_code, wp_fd = -1;
static volatile uint32_t wp_seen, wp_type;
static volatile uint64_t wp_data;
static volatile uintptr_t wp_pc;

/*
 * Records the trap and switches the watchpoint off: on arm64 the trap
 * comes before the store, which runs again when the handler returns and
 * would trap again for ever with the event still on.
 */
static void on_watch(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	wp_hits++;
	ioctl(wp_fd, PERF_EVENT_IOC_DISABLE, 0);
	wp_code = si->si_code;
	wp_data = *(const uint64_t *)((const char *)si + 24);
	wp_type = *(const uint32_t *)((const char *)si + 32);
	wp_seen = wp_var;
	wp_pc = uc->uc_mcontext.pc;
}

/*
 * A write watchpoint with sigtrap, as watchpoint probes open them: reads do
 * not trap; a write raises SIGTRAP (TRAP_PERF, our sig_data) *before* the
 * store, with the PC at the store and the old value in memory (x86-64
 * reports after the access). The kernel's own step over the access does
 * not survive the signal: returning to the store with the event on traps
 * again, so a watchpoint probe on arm64 must step the access itself.
 */
Test(arm64_smoke, perf_watchpoint_sigtrap_before_write)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof(attr),
		.bp_type = HW_BREAKPOINT_W,
		.bp_addr = (uintptr_t)&wp_var,
		.bp_len = HW_BREAKPOINT_LEN_4,
		.sample_period = 1,
		.remove_on_exec = 1,
		.sigtrap = 1,
		.sig_data = WP_COOKIE,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	uintptr_t store;
	uint32_t r;
	int fd;

	wp_var = 5;
	catch_signal(SIGTRAP, on_watch);
	fd = syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0 && (errno == ENOENT || errno == ENODEV || errno == EOPNOTSUPP ||
		       errno == ENOSPC))
		cr_skip_test("no hardware watchpoint here: %s", strerror(errno));
	cr_assert_geq(fd, 0, "perf_event_open: %s", strerror(errno));
	wp_fd = fd;
	r = wp_var;
	KEEP_VALUE(r);
	cr_assert_eq(wp_hits, 0, "a read hit a write watchpoint");
	__asm__ volatile("adr %0, 1f\n"
			 "1: str %w1, [%2]\n"
			 : "=&r"(store) : "r"(41), "r"(&wp_var) : "memory");
	cr_assert_eq(wp_hits, 1, "%d traps for one write", wp_hits);
	cr_assert_eq(wp_code, TRAP_PERF, "si_code %d", wp_code);
	cr_assert_eq(wp_data, WP_COOKIE, "sig_data %#llx", (unsigned long long)wp_data);
	cr_assert_eq(wp_type, PERF_TYPE_BREAKPOINT, "type %u", wp_type);
	cr_assert_eq(wp_pc, store, "trap at pc %#lx, the store at %#lx",
		     (unsigned long)wp_pc, (unsigned long)store);
	cr_assert_eq(wp_seen, 5, "the handler saw %u, not the old value", wp_seen);
	cr_assert_eq(wp_var, 41, "the store did not run after the handler");
	close(fd);
}
