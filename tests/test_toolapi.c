/* The calls for tools that drive the library from inside a process
 * (<kprobes.h>'s tool section, <kprobes/symbols.h>,
 * <kprobes/nofault_inline.h>): optimizing now, the
 * library's own threads, instruction boundaries, refusals, leaving a
 * process, symbol and object lookups — with every error they return. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <kprobes/nofault_inline.h>
#include <kprobes/symbols.h>

#include "testutil.h"

TestSuite(toolapi, .timeout = 20);

/* Code with a known layout:
 *   tool_opt+0   push %rbp  +1 mov %rsp,%rbp  +4 lea 1(%rdi),%rax (4)
 *   tool_opt+8   pop %rbp   +9 ret            (optimizable entry)
 *   tool_movabs+0  movabs $imm64,%rax (10)  +10 ret
 *   tool_unsized: the same code under a symbol of size 0, right before
 *   tool_opt (its code ends there) */
__asm__(".text\n"
	".globl tool_unsized\n.type tool_unsized,@function\n"
	"tool_unsized:\n"
	"\tmovabs $0x1122334455667788, %rax\n"
	"\tret\n"

	".globl tool_opt\n.type tool_opt,@function\n"
	"tool_opt:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi), %rax\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size tool_opt, .-tool_opt\n"

	".globl tool_movabs\n.type tool_movabs,@function\n"
	"tool_movabs:\n"
	"\tmovabs $0x1122334455667788, %rax\n"
	"\tret\n"
	".size tool_movabs, .-tool_movabs\n");

long tool_opt(long x);
long tool_movabs(void);
long tool_unsized(void);

static int hits;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	__atomic_fetch_add(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static bool is_optimized(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
}

/* The thread id of the library's optimizer thread, 0 when there is none. */
static pid_t optimizer_thread(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	pid_t tid = 0;

	while (d && (de = readdir(d))) {
		char path[96], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%.32s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "kprobes-opt", 11))
			tid = (pid_t)atoi(de->d_name);
		fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- kprobes_optimize_now ---- */

Test(toolapi, optimize_now_installs_the_jump_at_once)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_opt, .pre_handler = count_pre };

	cr_assert_eq(register_kprobe(&kp), 0);
	/* The optimizer thread would wait 5 ms first: no wait here. */
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(is_optimized(&kp), "the probe is not optimized when the call returns");
	cr_assert_eq(tool_opt(41), 42);
	cr_assert_eq(hits, 1);
	cr_assert_eq(kprobes_optimize_now(), 0, "nothing left to optimize");
	unregister_kprobe(&kp);
}

Test(toolapi, optimize_now_obeys_the_knob)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_opt, .pre_handler = count_pre };

	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert_not(is_optimized(&kp), "optimized with the knob off");
	cr_assert_eq(tool_opt(1), 2);
	cr_assert_eq(hits, 1);
	unregister_kprobe(&kp);
	kprobes_set_optimization(true);
}

Test(toolapi, optimize_now_with_nothing_registered)
{
	cr_assert_eq(kprobes_optimize_now(), 0);
}

/* ---- kprobes_library_thread ---- */

Test(toolapi, library_thread_is_the_optimizer_only)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_opt, .pre_handler = count_pre };
	pid_t opt = 0;

	cr_assert_not(kprobes_library_thread(0));
	cr_assert_not(kprobes_library_thread(-1));
	cr_assert_not(kprobes_library_thread((pid_t)syscall(SYS_gettid)));
	cr_assert_eq(register_kprobe(&kp), 0);
	/* The optimizer thread starts for the queued probe. */
	for (int i = 0; i < 2000 && !(opt = optimizer_thread()); i++)
		sleep_ms(1);
	cr_assert_neq(opt, 0, "no optimizer thread after a registration");
	for (int i = 0; i < 2000 && !kprobes_library_thread(opt); i++)
		sleep_ms(1);
	cr_assert(kprobes_library_thread(opt), "the optimizer thread %d is not the library's", opt);
	cr_assert_not(kprobes_library_thread(getpid()));
	unregister_kprobe(&kp);
}

/* ---- kprobes_quiet_begin, kprobes_quiet_end ---- */

static void quiet_in_signal(int sig)
{
	(void)sig;
	if (kprobes_quiet_begin() == 0) {
		KEEP(tool_opt(2));
		kprobes_quiet_end();
	}
	KEEP(tool_opt(3));
}

/* Hits in a quiet stretch run no handler and count as missed: on the
 * breakpoint and on the jump (the light handler's fast path), nested, in
 * a signal handler; an end without a begin does nothing. */
Test(toolapi, quiet_stretches_run_no_handler)
{
	for (int opt = 0; opt <= 1; opt++) {
		struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_opt, .pre_handler = count_pre };

		kprobes_set_optimization(opt);
		hits = 0;
		cr_assert_eq(register_kprobe(&kp), 0);
		cr_assert_eq(kprobes_optimize_now(), 0);
		cr_assert_eq(is_optimized(&kp), opt);
		KEEP(tool_opt(1));
		cr_assert_eq(kprobes_quiet_begin(), 0);
		KEEP(tool_opt(1));
		cr_assert_eq(kprobes_quiet_begin(), 0);
		KEEP(tool_opt(1));
		kprobes_quiet_end();
		KEEP(tool_opt(1));
		kprobes_quiet_end();
		cr_expect_eq(hits, 1, "optimized: %d", opt);
		cr_expect_eq(kp.nmissed, 3);
		kprobes_quiet_end();
		KEEP(tool_opt(1));
		cr_expect_eq(hits, 2, "an end without a begin quiets nothing");
		signal(SIGUSR1, quiet_in_signal);
		raise(SIGUSR1);
		cr_expect_eq(hits, 3, "the signal handler's own call after its quiet stretch");
		cr_expect_eq(kp.nmissed, 4);
		signal(SIGUSR1, SIG_DFL);
		unregister_kprobe(&kp);
	}
}

/* ---- kprobes_insn_boundary ---- */

Test(toolapi, insn_boundary)
{
	unsigned long f = (unsigned long)tool_movabs;

	cr_assert_eq(kprobes_insn_boundary(f, 11, f), 0);
	for (unsigned long off = 1; off < 10; off++)
		cr_assert_eq(kprobes_insn_boundary(f, 11, f + off), -EILSEQ, "+%lu", off);
	cr_assert_eq(kprobes_insn_boundary(f, 11, f + 10), 0);
	/* Decoding must reach addr without leaving the range. */
	cr_assert_eq(kprobes_insn_boundary(f + 1, 10, f + 10), -EILSEQ);
	/* A range ending at the first byte of an instruction it cannot hold
	 * (tool_opt's lea, 4 bytes at +4): where decoding gets to is still a
	 * boundary (kprobe watch asks so of the instruction after an access) */
	f = (unsigned long)tool_opt;
	cr_assert_eq(kprobes_insn_boundary(f, 5, f + 4), 0);
	cr_assert_eq(kprobes_insn_boundary(f, 5, f + 3), -EILSEQ);
	cr_assert_eq(kprobes_insn_boundary(f, 5, f + 1), 0);
}

Test(toolapi, insn_boundary_reads_through_probes)
{
	unsigned long f = (unsigned long)tool_movabs;
	struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_movabs, .pre_handler = count_pre };

	kprobes_set_optimization(false);
	cr_assert_eq(register_kprobe(&kp), 0);
	cr_assert_eq(*(volatile unsigned char *)f, 0xcc, "no breakpoint to read through");
	cr_assert_eq(kprobes_insn_boundary(f, 11, f + 10), 0);
	cr_assert_eq(kprobes_insn_boundary(f, 11, f + 1), -EILSEQ);
	unregister_kprobe(&kp);
}

Test(toolapi, insn_boundary_errors)
{
	unsigned long f = (unsigned long)tool_movabs;
	long pg = sysconf(_SC_PAGESIZE);
	void *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_eq(kprobes_insn_boundary(f, 0, f), -EINVAL, "len 0");
	cr_assert_eq(kprobes_insn_boundary(f + 1, 11, f), -EINVAL, "addr before start");
	cr_assert_eq(kprobes_insn_boundary(f, 10, f + 10), -EINVAL, "addr at the end");
	cr_assert_eq(kprobes_insn_boundary(f, 11, f + 11), -EINVAL, "addr past the end");
	cr_assert_neq(none, MAP_FAILED);
	cr_assert_eq(kprobes_insn_boundary((unsigned long)none, 16, (unsigned long)none + 4), -EFAULT);
	munmap(none, (size_t)pg);
}

/* ---- kprobes_probe_refusal ---- */

Test(toolapi, probe_refusal)
{
	unsigned long f = (unsigned long)tool_opt;
	const char *why;

	cr_assert_null(kprobes_probe_refusal(f, false));
	cr_assert_null(kprobes_probe_refusal(f, true));
	cr_assert_null(kprobes_probe_refusal(f + 1, false));
	why = kprobes_probe_refusal(f + 1, true);
	cr_assert_not_null(why, "a return probe inside a function is refused");
	cr_assert(strstr(why, "entry"), "\"%s\"", why);
	why = kprobes_probe_refusal((unsigned long)dlsym(RTLD_DEFAULT, "abort"), true);
	cr_assert_not_null(why, "a return probe on abort() is refused");
	cr_assert(strstr(why, "return"), "\"%s\"", why);
	/* And register_kretprobe says -EINVAL for both. */
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)(f + 1) };
	cr_assert_eq(register_kretprobe(&rp), -EINVAL);
}

/* ---- kprobes_release_resources ---- */

/* Whether a descriptor of this process refers to its /proc/PID/mem. */
static bool mem_fd_open(void)
{
	char want[64], path[64], target[PATH_MAX];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	bool found = false;

	snprintf(want, sizeof(want), "/proc/%d/mem", (int)getpid());
	while (d && (de = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%.32s", de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found |= !strcmp(target, want);
		}
	}
	if (d)
		closedir(d);
	return found;
}

Test(toolapi, release_resources_then_carry_on)
{
	struct kprobe a = { .addr = (kprobe_opcode_t *)tool_opt, .pre_handler = count_pre };
	struct kprobe b = { .addr = (kprobe_opcode_t *)tool_movabs, .pre_handler = count_pre };
	int i;

	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	for (i = 0; i < 2000 && !optimizer_thread(); i++)
		sleep_ms(1);
	cr_assert_neq(optimizer_thread(), 0);
	cr_assert(mem_fd_open(), "no descriptor of /proc/self/mem to release");

	kprobes_release_resources();
	for (i = 0; i < 3000 && optimizer_thread(); i++)
		sleep_ms(1);
	cr_assert_eq(optimizer_thread(), 0, "the optimizer thread still runs");
	cr_assert_not(mem_fd_open(), "/proc/self/mem is still open");

	/* Probes keep working, and new ones are armed and optimized. */
	cr_assert_eq(tool_opt(1), 2);
	cr_assert_eq(hits, 1);
	cr_assert_eq(register_kprobe(&b), 0);
	cr_assert_eq(tool_movabs(), 0x1122334455667788L);
	cr_assert_eq(hits, 2);
	unregister_kprobe(&a);
	a.addr = (kprobe_opcode_t *)tool_opt;
	a.flags = 0;
	cr_assert_eq(register_kprobe(&a), 0);
	cr_assert_eq(kprobes_optimize_now(), 0);
	cr_assert(is_optimized(&a));
	cr_assert_eq(tool_opt(2), 3);
	cr_assert_eq(hits, 3);
	unregister_kprobe(&a);
	unregister_kprobe(&b);
}

/* ---- <kprobes/symbols.h> ---- */

static const char *exe_basename(void)
{
	static char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	const char *slash;

	cr_assert_gt(n, 0);
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

Test(toolapi, sym_lookup_name)
{
	struct kprobes_sym s = { .sz = sizeof(s) };

	cr_assert_eq(kprobes_sym_lookup_name("tool_movabs", &s), 0);
	cr_assert_eq(s.addr, (unsigned long)tool_movabs);
	cr_assert_eq(s.size, 11);
	cr_assert_str_eq(s.name, "tool_movabs");
	cr_assert(s.is_main);
	cr_assert_str_eq(s.basename, exe_basename());
	cr_assert_eq(s.sz, sizeof(s));

	memset(&s, 0, sizeof(s));
	s.sz = sizeof(s);
	cr_assert_eq(kprobes_sym_lookup_name("libc.so.6:getpid", &s), 0);
	cr_assert_eq(s.addr, (unsigned long)dlsym(RTLD_DEFAULT, "getpid"));
	cr_assert_str_eq(s.basename, "libc.so.6");
	cr_assert_not(s.is_main);
	cr_assert_str_eq(s.name, "getpid");
}

Test(toolapi, sym_lookup_name_errors)
{
	struct kprobes_sym s = { .sz = sizeof(s) };
	struct kprobes_sym small = { .sz = KPROBES_SYM_SZ_V1 - 1 };

	cr_assert_eq(kprobes_sym_lookup_name("no_such_function_here", &s), -ENOENT);
	cr_assert_eq(kprobes_sym_lookup_name("libnosuch.so.9:getpid", &s), -ENOENT);
	cr_assert_eq(kprobes_sym_lookup_name(NULL, &s), -EINVAL);
	cr_assert_eq(kprobes_sym_lookup_name("", &s), -EINVAL);
	cr_assert_eq(kprobes_sym_lookup_name("tool_movabs", NULL), -EINVAL);
	cr_assert_eq(kprobes_sym_lookup_name("tool_movabs", &small), -EINVAL);
	cr_assert_eq(small.addr, 0, "written despite the error");
}

/* A caller built against a later, larger struct: what the library does
 * not know reads as zero, and sz says how much it filled. */
Test(toolapi, sym_struct_can_grow)
{
	struct {
		struct kprobes_sym s;
		unsigned long later_field;
	} big;
	struct kprobes_sym v1;

	memset(&big, 0xa5, sizeof(big));
	big.s.sz = sizeof(big);
	cr_assert_eq(kprobes_sym_lookup_name("tool_opt", &big.s), 0);
	cr_assert_eq(big.s.addr, (unsigned long)tool_opt);
	cr_assert_eq(big.later_field, 0);
	cr_assert_eq(big.s.sz, sizeof(struct kprobes_sym));

	/* The first version's size is enough. */
	memset(&v1, 0, sizeof(v1));
	v1.sz = KPROBES_SYM_SZ_V1;
	cr_assert_eq(kprobes_sym_lookup_name("tool_opt", &v1), 0);
	cr_assert_eq(v1.addr, (unsigned long)tool_opt);
}

Test(toolapi, sym_lookup_addr)
{
	struct kprobes_sym s = { .sz = sizeof(s) };
	int on_stack;

	cr_assert_eq(kprobes_sym_lookup_addr((unsigned long)tool_movabs + 10, &s), 0);
	cr_assert_eq(s.addr, (unsigned long)tool_movabs);
	cr_assert_str_eq(s.name, "tool_movabs");
	cr_assert(s.is_main);
	cr_assert_eq(kprobes_sym_lookup_addr(0x10, &s), -ENOENT);
	cr_assert_eq(kprobes_sym_lookup_addr((unsigned long)&on_stack, &s), -ENOENT);
	cr_assert_eq(kprobes_sym_lookup_addr((unsigned long)tool_movabs, NULL), -EINVAL);
	s.sz = 4;
	cr_assert_eq(kprobes_sym_lookup_addr((unsigned long)tool_movabs, &s), -EINVAL);
}

Test(toolapi, sym_object_of)
{
	struct kprobes_sym s = { .sz = sizeof(s) };
	int on_stack;

	cr_assert_eq(kprobes_sym_object_of((unsigned long)tool_opt, &s), 0);
	cr_assert(s.is_main);
	cr_assert_null(s.name);
	cr_assert_str_eq(s.basename, exe_basename());
	cr_assert(s.addr <= (unsigned long)tool_opt && (unsigned long)tool_opt < s.addr + s.size,
		  "segment [%lx, +%zx) misses %p", s.addr, s.size, (void *)tool_opt);

	cr_assert_eq(kprobes_sym_object_of((unsigned long)dlsym(RTLD_DEFAULT, "getpid"), &s), 0);
	cr_assert_str_eq(s.basename, "libc.so.6");
	cr_assert_not(s.is_main);
	cr_assert_neq(s.load_bias, 0);

	cr_assert_eq(kprobes_sym_object_of((unsigned long)&on_stack, &s), -ENOENT);
	cr_assert_eq(kprobes_sym_object_of((unsigned long)tool_opt, NULL), -EINVAL);
}

struct seen {
	int n;
	int opt, movabs;
	bool bad_sz;
	int stop_after;
};

static int see(const struct kprobes_sym *sym, void *arg)
{
	struct seen *s = arg;

	s->n++;
	s->bad_sz |= sym->sz != sizeof(*sym);
	if (sym->name && !strcmp(sym->name, "tool_opt"))
		s->opt++;
	if (sym->name && !strcmp(sym->name, "tool_movabs"))
		s->movabs++;
	return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

Test(toolapi, sym_foreach)
{
	struct seen s = { 0 };

	cr_assert_eq(kprobes_sym_foreach(NULL, "tool_*", see, &s), 0);
	cr_assert_eq(s.opt, 1);
	cr_assert_eq(s.movabs, 1);
	cr_assert_not(s.bad_sz);

	memset(&s, 0, sizeof(s));
	cr_assert_eq(kprobes_sym_foreach(exe_basename(), "tool_opt", see, &s), 0);
	cr_assert_eq(s.n, 1);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(kprobes_sym_foreach("libc.so.6", "tool_opt", see, &s), 0);
	cr_assert_eq(s.n, 0, "tool_opt is not libc's");

	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	cr_assert_eq(kprobes_sym_foreach(NULL, NULL, see, &s), 7);
	cr_assert_eq(s.n, 1, "did not stop at the first non-zero return");

	cr_assert_eq(kprobes_sym_foreach(NULL, "*", NULL, NULL), -EINVAL);
}

Test(toolapi, sym_check_offset)
{
	unsigned long f = (unsigned long)tool_movabs, u = (unsigned long)tool_unsized;

	/* A sized function: the offset must stay inside (registration then
	 * checks the instruction boundary). */
	cr_assert_eq(kprobes_sym_check_offset(f, 11, 0), 0);
	cr_assert_eq(kprobes_sym_check_offset(f, 11, 10), 0);
	cr_assert_eq(kprobes_sym_check_offset(f, 11, 11), -EINVAL);
	cr_assert_eq(kprobes_sym_check_offset(f, 11, 4096), -EINVAL);
	/* A symbol of size 0: its code runs to the next symbol, and is
	 * decoded from the symbol. */
	cr_assert_eq(kprobes_sym_check_offset(u, 0, 10), 0);
	cr_assert_eq(kprobes_sym_check_offset(u, 0, 1), -EILSEQ);
	cr_assert_eq(kprobes_sym_check_offset(u, 0, 9), -EILSEQ);
	cr_assert_eq(kprobes_sym_check_offset(u, 0, 11), -EINVAL);
	cr_assert_eq(kprobes_sym_check_offset(0, 11, 1), -EINVAL);
}

struct objs {
	int n, first_main;
	bool libc;
	int stop_at;
};

static int see_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objs *o = arg;
	const char *slash = strrchr(info->dlpi_name, '/');

	if (!o->n)
		o->first_main = !info->dlpi_name[0];
	o->n++;
	if (slash && !strcmp(slash + 1, "libc.so.6"))
		o->libc = true;
	return o->stop_at && o->n == o->stop_at ? -3 : 0;
}

Test(toolapi, objects_foreach)
{
	struct objs o = { 0 };

	cr_assert_eq(kprobes_objects_foreach(see_object, &o), 0);
	cr_assert_geq(o.n, 3);
	cr_assert(o.first_main, "the main executable does not come first");
	cr_assert(o.libc);

	memset(&o, 0, sizeof(o));
	o.stop_at = 2;
	cr_assert_eq(kprobes_objects_foreach(see_object, &o), -3);
	cr_assert_eq(o.n, 2);
	cr_assert_eq(kprobes_objects_foreach(NULL, NULL), -EINVAL);
}

/* ---- kprobes_objects_changed ---- */

/* expat calls an element handler from deep inside XML_Parse(): a probe
 * there sees a stack through a library loaded after the last
 * registration, which only its call-frame information unwinds (Debian
 * builds it without frame pointers). */
static volatile int found_caller;
static unsigned long caller_lo, caller_hi;

static int stack_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long ips[32];
	int n = kprobes_stack(regs, ips, 32);

	for (int i = 0; i < n; i++)
		if (ips[i] >= caller_lo && ips[i] < caller_hi)
			found_caller = 1;
	return 0;
}

void tool_xml_start(void *data, const char *name, const char **atts);
TEST_FN void tool_xml_start(void *data, const char *name, const char **atts)
{
	KEEP(name);
}

void tool_xml_end(void *data, const char *name);
TEST_FN void tool_xml_end(void *data, const char *name)
{
	KEEP(name);
}

int tool_xml_caller(void *lib);
TEST_FN int tool_xml_caller(void *lib)
{
	void *(*create)(const char *) = (void *(*)(const char *))dlsym(lib, "XML_ParserCreate");
	void (*handlers)(void *, void *, void *) =
		(void (*)(void *, void *, void *))dlsym(lib, "XML_SetElementHandler");
	int (*parse)(void *, const char *, int, int) =
		(int (*)(void *, const char *, int, int))dlsym(lib, "XML_Parse");
	void (*release)(void *) = (void (*)(void *))dlsym(lib, "XML_ParserFree");
	void *parser;
	int rc;

	cr_assert(create && handlers && parse && release);
	parser = create(NULL);
	cr_assert_not_null(parser);
	handlers(parser, (void *)tool_xml_start, (void *)tool_xml_end);
	rc = parse(parser, "<a><b/></a>", 11, 1);
	release(parser);
	return rc;
}

/* Whether the probe on the handler saw its caller through expat. */
static bool stack_through_new_library(bool tell_library)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)tool_xml_start, .pre_handler = stack_pre };
	struct kprobes_sym s = { .sz = sizeof(s) };
	void *lib;

	if (dlopen("libexpat.so.1", RTLD_NOW | RTLD_NOLOAD))
		cr_skip_test("libexpat.so.1 is loaded already");
	cr_assert_eq(kprobes_sym_lookup_name("tool_xml_caller", &s), 0);
	caller_lo = s.addr;
	caller_hi = s.addr + s.size;
	/* The tables are built now, without expat. */
	cr_assert_eq(register_kprobe(&kp), 0);
	lib = dlopen("libexpat.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		unregister_kprobe(&kp);
		cr_skip_test("libexpat.so.1 cannot be loaded: %s", dlerror());
	}
	if (tell_library)
		kprobes_objects_changed();
	found_caller = 0;
	cr_assert_eq(tool_xml_caller(lib), 1, "XML_Parse failed");
	unregister_kprobe(&kp);
	return found_caller;
}

Test(toolapi, objects_changed_unwinds_a_new_library)
{
	cr_assert(stack_through_new_library(true), "no frame of the caller in the stack through expat");
}

/* ---- kprobes_read_chain_nofault ---- */

struct chain_node {
	uint8_t b;
	uint16_t h;
	uint32_t w;
	struct chain_node *next;
	uint64_t q;
};

Test(toolapi, read_chain_follows_pointers)
{
	struct chain_node last = { 0xf1, 0xf2f3, 0xf4f5f6f7, NULL, 0x1122334455667788 };
	struct chain_node first = { 1, 2, 3, &last, 4 };
	struct chain_node *root = &first;
	const int32_t next_off[] = { 0, offsetof(struct chain_node, next) };
	const uint8_t ptr_size[] = { 8, 8 };
	int32_t off[3];
	uint8_t size[3];
	uint64_t v = 0;

	/* &root -> first; first.next -> &last */
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&root, next_off, ptr_size, 2, &v), 0);
	cr_assert_eq(v, (uint64_t)(uintptr_t)&last);
	/* Then each size, zero-extended. */
	off[0] = 0;
	off[1] = offsetof(struct chain_node, next);
	size[0] = size[1] = 8;
	struct { int32_t field; uint8_t size; uint64_t want; } f[] = {
		{ offsetof(struct chain_node, b), 1, 0xf1 },
		{ offsetof(struct chain_node, h), 2, 0xf2f3 },
		{ offsetof(struct chain_node, w), 4, 0xf4f5f6f7 },
		{ offsetof(struct chain_node, q), 8, 0x1122334455667788 },
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		off[2] = f[i].field;
		size[2] = f[i].size;
		v = ~0ull;
		cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&root, off, size, 3, &v), 0);
		cr_assert_eq(v, f[i].want, "size %u: %#lx", f[i].size, (unsigned long)v);
	}
	/* No hop: the base itself. */
	cr_assert_eq(kprobes_read_chain_nofault(1234, NULL, NULL, 0, &v), 0);
	cr_assert_eq(v, 1234);
}

Test(toolapi, read_chain_faults)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct chain_node last = { 0 };
	struct chain_node *root = &last;	/* last.next is NULL */
	const int32_t off[] = { 0, offsetof(struct chain_node, next), offsetof(struct chain_node, q) };
	const uint8_t size[] = { 8, 8, 8 };
	uint64_t v = 77;

	cr_assert_neq(none, MAP_FAILED);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)none, off, size, 1, &v), -EFAULT);
	/* A NULL pointer's field lies in the first page. */
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&root, off, size, 3, &v), -EFAULT);
	cr_assert_eq(v, 77, "written despite the fault");
	cr_assert_eq(kprobes_read_chain_nofault(0x7ffffffffff0ull << 4, off, size, 1, &v), -EFAULT);
	munmap(none, (size_t)pg);
}

/* Where the fault signals are blocked a caught load would kill the
 * process: the chain reads through the kernel instead. */
Test(toolapi, read_chain_with_fault_signals_blocked)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t word = 0xabcdef, v = 0;
	const int32_t off[] = { 0 };
	const uint8_t size[] = { 8 };
	sigset_t segv;

	cr_assert_neq(none, MAP_FAILED);
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	sigaddset(&segv, SIGBUS);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &segv, NULL), 0);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size, 1, &v), 0);
	cr_assert_eq(v, 0xabcdef);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)none, off, size, 1, &v), -EFAULT);
	pthread_sigmask(SIG_UNBLOCK, &segv, NULL);
	munmap(none, (size_t)pg);
}

Test(toolapi, read_chain_errors)
{
	const int32_t off[KPROBES_CHAIN_MAX + 1] = { 0 };
	uint8_t size[KPROBES_CHAIN_MAX + 1];
	uint64_t word = 5, v;

	memset(size, 8, sizeof(size));
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size, -1, &v), -EINVAL);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size,
						KPROBES_CHAIN_MAX + 1, &v), -EINVAL);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, NULL, size, 1, &v), -EINVAL);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, NULL, 1, &v), -EINVAL);
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size, 1, NULL), -EINVAL);
	size[0] = 3;
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size, 1, &v), -EINVAL);
	size[0] = 0;
	cr_assert_eq(kprobes_read_chain_nofault((unsigned long)&word, off, size, 1, &v), -EINVAL);
}

/* ---- <kprobes/nofault_inline.h> ---- */

Test(toolapi, load_nofault_inline)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t word = 0x8877665544332211ull, v, probe;
	sigset_t segv;

	cr_assert_neq(none, MAP_FAILED);
	cr_assert_eq(KPROBES_NOFAULT_INLINE_VERSION, 1);
	/* The thread's mask read once, the inline load may be used. */
	cr_assert_eq(kprobes_read_nofault(&probe, &word, sizeof(probe)), 0);
	cr_assert(kprobes_nofault_inline_ok());
	cr_assert_eq(kprobes_load_nofault_inline((unsigned long)&word, 8, &v), 0);
	cr_assert_eq(v, 0x8877665544332211ull);
	cr_assert_eq(kprobes_load_nofault_inline((unsigned long)&word, 4, &v), 0);
	cr_assert_eq(v, 0x44332211ull);
	cr_assert_eq(kprobes_load_nofault_inline((unsigned long)&word, 2, &v), 0);
	cr_assert_eq(v, 0x2211ull);
	cr_assert_eq(kprobes_load_nofault_inline((unsigned long)&word + 7, 1, &v), 0);
	cr_assert_eq(v, 0x88ull);
	/* Faults come back as -EFAULT, the value untouched. */
	v = 99;
	for (unsigned int size = 1; size <= 8; size *= 2)
		cr_assert_eq(kprobes_load_nofault_inline((unsigned long)none, size, &v), -EFAULT,
			     "size %u", size);
	cr_assert_eq(kprobes_load_nofault_inline(8, 8, &v), -EFAULT);
	cr_assert_eq(kprobes_load_nofault_inline((unsigned long)&word, 3, &v), -EFAULT);
	cr_assert_eq(v, 99);
	/* A thread that blocks the fault signals must not use it. */
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &segv, NULL), 0);
	cr_assert_not(kprobes_nofault_inline_ok());
	cr_assert_eq(pthread_sigmask(SIG_UNBLOCK, &segv, NULL), 0);
	cr_assert(kprobes_nofault_inline_ok());
	munmap(none, (size_t)pg);
}
