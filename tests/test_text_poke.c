/*
 * The text-patching routine (src/arch/x86_64/text_poke.c): a thread that
 * meets the breakpoint of a rewrite in progress is sent on as the new
 * instruction would take it, through the in-progress table the trap
 * handler consults; the steps leave the code as asked.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch/x86_64/text_poke.h"
#include "core/internal.h"
#include "os/linux/memory.h"

TestSuite(text_poke, .timeout = 20);

/* A 5-byte NOP (the site), then "return 1"; at alt, "return 2". */
int poke_site_fn(void);
extern char poke_site[], poke_alt[];
__asm__(".text\n"
	".globl poke_site_fn, poke_site, poke_alt\n"
	".type poke_site_fn, @function\n"
	"poke_site_fn:\n"
	"poke_site:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	mov $1, %eax\n"
	"	ret\n"
	"poke_alt:\n"
	"	mov $2, %eax\n"
	"	ret\n"
	".size poke_site_fn, .-poke_site_fn\n");

static int (*volatile site_fn)(void) = poke_site_fn;

/* Calls of get() by the writer, and what the site returned when it was
 * run from inside the rewrite (between its steps). */
static int writer_gets;
static volatile int seen_mid = -1;
static volatile bool running_site;

/* The site becomes "jmp poke_alt"; a thread meeting its breakpoint goes
 * on at poke_alt. */
static void jump_entry(struct text_poke *tp)
{
	int32_t rel = (int32_t)((uintptr_t)poke_alt - ((uintptr_t)poke_site + 5));

	tp->addr = (uintptr_t)poke_site;
	tp->skip = false;
	tp->len = 5;
	tp->bp_in_place = false;
	tp->bytes[0] = 0xe9;
	memcpy(tp->bytes + 1, &rel, 4);
	tp->resume = (uintptr_t)poke_alt;
}

static void site_jump(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	jump_entry(tp);
	/* The first call that finds the breakpoint in place is the tail
	 * step's (the cores synchronized after it was written).  (The trap
	 * handler's own calls come while the site runs, and must not run it
	 * again.) */
	if (running_site || *(volatile uint8_t *)poke_site != 0xcc)
		return;
	if (++writer_gets == 1) {
		running_site = true;
		seen_mid = site_fn();
		running_site = false;
	}
}

Test(text_poke, breakpoint_of_a_rewrite_in_progress_is_emulated)
{
	struct text_poke_batch b = { .n = 1, .get = site_jump, .emulate = true };
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	uint8_t want[5] = { 0xe9 };
	int32_t rel = (int32_t)((uintptr_t)poke_alt - ((uintptr_t)poke_site + 5));

	cr_assert_eq(kp_init(), 0);
	cr_assert_arr_eq(poke_site, nop5, 5);
	cr_assert_eq(site_fn(), 1);

	cr_assert_eq(text_poke_bp(&b), 0);
	cr_expect_eq(seen_mid, 2, "the thread met the breakpoint and went on as %d", seen_mid);
	memcpy(want + 1, &rel, 4);
	cr_assert_arr_eq(poke_site, want, 5, "the site is not the jump asked for");
	cr_assert_eq(site_fn(), 2);
	/* After the rewrite, the breakpoint is no longer anyone's. */
	cr_assert_not(text_poke_trap((uintptr_t)poke_site, &(uintptr_t){ 0 }));
}

/* One byte, already a breakpoint at the end: nothing but the first step. */
static void one_byte(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	tp->addr = (uintptr_t)poke_site;
	tp->skip = false;
	tp->len = 1;
	tp->bp_in_place = false;
	tp->bytes[0] = ARCH_BREAKPOINT_INSN;
	tp->resume = 0;
}

static int done_calls;

static void count_done(const struct text_poke_batch *b, int i)
{
	done_calls++;
}

Test(text_poke, a_breakpoint_alone_is_done_after_the_first_step)
{
	struct text_poke_batch b = { .n = 1, .get = one_byte, .done = count_done };
	uint8_t orig = (uint8_t)poke_site[0];

	cr_assert_eq(kp_init(), 0);
	cr_assert_eq(text_poke_bp(&b), 0);
	cr_expect_eq((uint8_t)poke_site[0], ARCH_BREAKPOINT_INSN);
	cr_expect_eq(done_calls, 1);
	/* Put the byte back so that the process can exit through it. */
	cr_assert_eq(kp_mem_write((uintptr_t)poke_site, &orig, 1), 0);
}

/* fork() while another thread is inside the trap handler's look at a
 * rewrite in progress: the child, which has only the forking thread, must
 * not wait for that reader at its own next rewrite that emulates. */
static volatile pid_t reader_tid;
static volatile int reader_inside, reader_release, bp_ready, fork_writer_gets;


/* The writer's second call comes with the breakpoint in place: it waits
 * for the reader to trap there.  The reader's call (from the trap
 * handler) stays until released. */
static void fork_site_get(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	jump_entry(tp);
	if (gettid() == reader_tid) {
		reader_inside = 1;
		while (!reader_release)
			sched_yield();
		return;
	}
	if (++fork_writer_gets == 2) {
		bp_ready = 1;
		while (!reader_inside)
			sched_yield();
	}
}

static void *fork_writer(void *arg)
{
	struct text_poke_batch b = { .n = 1, .get = fork_site_get, .emulate = true };

	/* Not text_poke_bp(): the library's writers hold a lock that fork()
	 * takes, so that they are never inside at a fork; this one stays
	 * inside on purpose, and its site is in no object that can be
	 * unloaded, so it needs no look at the loader's list. */
	return (void *)(intptr_t)text_poke_steps(&b);
}

static void *fork_reader(void *arg)
{
	reader_tid = gettid();
	while (!bp_ready)
		sched_yield();
	return (void *)(intptr_t)site_fn();
}

static void nop_back(const struct text_poke_batch *b, int i, struct text_poke *tp)
{
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	tp->addr = (uintptr_t)poke_site;
	tp->skip = false;
	tp->len = 5;
	tp->bp_in_place = false;
	memcpy(tp->bytes, nop5, 5);
	tp->resume = (uintptr_t)poke_site + 5;
}

Test(text_poke, a_fork_child_does_not_wait_for_the_parents_trap_handlers)
{
	pthread_t w, r;
	void *wrc, *rrc;
	pid_t child;
	int status;

	cr_assert_eq(kp_init(), 0);
	cr_assert_eq(pthread_create(&r, NULL, fork_reader, NULL), 0);
	while (!reader_tid)
		sched_yield();
	cr_assert_eq(pthread_create(&w, NULL, fork_writer, NULL), 0);
	while (!reader_inside)
		sched_yield();
	usleep(20000);		/* the writer on to the end of its rewrite */
	child = fork();
	if (child == 0) {
		struct text_poke_batch b = { .n = 1, .get = nop_back, .emulate = true };

		alarm(5);
		_exit(text_poke_bp(&b) == 0 && site_fn() == 1 ? 0 : 1);
	}
	cr_assert_gt(child, 0);
	cr_assert_eq(waitpid(child, &status, 0), child);
	reader_release = 1;
	pthread_join(r, &rrc);
	pthread_join(w, &wrc);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the child's rewrite: status %#x (SIGALRM: it waited for a reader it does not have)",
		  status);
	cr_expect_eq((intptr_t)wrc, 0);
	cr_expect_eq((intptr_t)rrc, 2, "the reader went on as %ld", (long)(intptr_t)rrc);
}
