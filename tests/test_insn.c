/*
 * Every instruction class, probed at every instruction boundary, must leave
 * the program's results exactly as an unprobed run: registers, flags,
 * vector registers and memory.  Boosted (pre handler only) and
 * single-stepped (with a post handler) paths, all probes at once and one
 * probe at a time.
 */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>

#include "arch/x86_64/insn.h"
#include "elf/symbols.h"

struct cpu_state {
	uint64_t gpr[16];	/* rax rbx rcx rdx rsi rdi rbp r8..r15 rsp */
	uint64_t flags;
	uint8_t xmm[16][16];
} __attribute__((packed));

struct run_result {
	struct cpu_state cpu;
	uint8_t mem[256];
	uint8_t data[88];
};

extern void insn_run_captured(void *fn, const struct cpu_state *in, struct cpu_state *out);
extern uint8_t insn_data[88];

static uint8_t mem[256] __attribute__((aligned(32)));
static uint8_t data_init[88];

#define MAX_BOUNDARIES 256

struct counted_probe {
	struct kprobe kp;
	unsigned long pre, post;
};

static struct counted_probe probes[MAX_BOUNDARIES];
static struct kprobe *probe_ptrs[MAX_BOUNDARIES];

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct counted_probe *c = (struct counted_probe *)p;

	cr_assert_eq(regs->ip, (unsigned long)p->addr + 1);
	__atomic_fetch_add(&c->pre, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct counted_probe *c = (struct counted_probe *)p;

	__atomic_fetch_add(&c->post, 1, __ATOMIC_RELAXED);
}

/* Instruction boundaries of a function, from its symbol. */
static int boundaries_max(const char *name, uintptr_t *out, int max);

static int boundaries(const char *name, uintptr_t *out)
{
	return boundaries_max(name, out, MAX_BOUNDARIES / 2);
}

static int boundaries_max(const char *name, uintptr_t *out, int max)
{
	struct ksym sym;
	uintptr_t pc;
	int n = 0;

	cr_assert_eq(ksym_lookup_name(name, &sym), 0, "no symbol %s", name);
	cr_assert_gt(sym.size, 0);
	for (pc = sym.addr; pc < sym.addr + sym.size && n < max;) {
		int len = insn_length((const uint8_t *)pc, sym.addr + sym.size - pc);

		cr_assert_gt(len, 0, "undecodable at %s+%lu", name, pc - sym.addr);
		out[n++] = pc;
		pc += (uintptr_t)len;
	}
	return n;
}

static uint64_t rng;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void make_input(struct cpu_state *in, unsigned int seed)
{
	rng = 0x9e3779b97f4a7c15ULL * (seed + 1);
	for (int i = 0; i < 16; i++)
		in->gpr[i] = next_random() >> (next_random() % 60);
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++)
			in->xmm[i][j] = (uint8_t)next_random();
	in->gpr[5] = (uint64_t)mem;
	in->flags = 0x202 | (next_random() & 0x8d5);
}

static void run(void *fn, const struct cpu_state *in, struct run_result *r, unsigned int seed)
{
	rng = 0x51ed270b27ULL * (seed + 7);
	for (size_t i = 0; i < sizeof(mem); i++)
		mem[i] = (uint8_t)next_random();
	memcpy(insn_data, data_init, sizeof(data_init));
	memset(r, 0, sizeof(*r));
	insn_run_captured(fn, in, &r->cpu);
	memcpy(r->mem, mem, sizeof(mem));
	memcpy(r->data, insn_data, sizeof(insn_data));
}

static const char *gpr_name[16] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10",
	"r11", "r12", "r13", "r14", "r15", "rsp",
};

static void compare(const char *fn, const char *mode, const struct run_result *a,
		    const struct run_result *b)
{
	for (int i = 0; i < 16; i++)
		cr_assert_eq(a->cpu.gpr[i], b->cpu.gpr[i], "%s [%s]: %s %#lx != %#lx", fn, mode,
			     gpr_name[i], a->cpu.gpr[i], b->cpu.gpr[i]);
	cr_assert_eq(a->cpu.flags & 0x40cd5, b->cpu.flags & 0x40cd5, "%s [%s]: flags %#lx != %#lx",
		     fn, mode, a->cpu.flags, b->cpu.flags);
	cr_assert(!memcmp(a->cpu.xmm, b->cpu.xmm, sizeof(a->cpu.xmm)), "%s [%s]: xmm differ", fn, mode);
	cr_assert(!memcmp(a->mem, b->mem, sizeof(a->mem)), "%s [%s]: memory differs", fn, mode);
	cr_assert(!memcmp(a->data, b->data, sizeof(a->data)), "%s [%s]: data differs", fn, mode);
}

static void arm(const uintptr_t *at, int n, bool post)
{
	memset(probes, 0, sizeof(probes));
	for (int i = 0; i < n; i++) {
		probes[i].kp.addr = (kprobe_opcode_t *)at[i];
		probes[i].kp.pre_handler = count_pre;
		probes[i].kp.post_handler = post ? count_post : NULL;
		probe_ptrs[i] = &probes[i].kp;
	}
	cr_assert_eq(register_kprobes(probe_ptrs, n), 0);
}

/* All boundaries of name (and of the functions it calls, `callee`) probed at
 * once, then each alone, in both modes. */
static void check_function_with(const char *name, const char *callee)
{
	uintptr_t at[MAX_BOUNDARIES];
	int n = boundaries(name, at);
	void *fn = (void *)at[0];

	if (callee)
		n += boundaries(callee, at + n);
	struct cpu_state in;
	struct run_result base, probed;

	memcpy(data_init, insn_data, sizeof(data_init));
	for (unsigned int seed = 0; seed < 6; seed++) {
		make_input(&in, seed);
		run(fn, &in, &base, seed);
		for (int post = 0; post < 2; post++) {
			const char *mode = post ? "all, post" : "all, boosted";

			arm(at, n, post);
			run(fn, &in, &probed, seed);
			cr_assert_gt(probes[0].pre, 0, "%s: entry probe not hit", name);
			for (int i = 0; post && i < n; i++)
				cr_assert_eq(probes[i].pre, probes[i].post, "%s+%lu: pre %lu post %lu",
					     name, at[i] - at[0], probes[i].pre, probes[i].post);
			unregister_kprobes(probe_ptrs, n);
			compare(name, mode, &base, &probed);
		}
		for (int i = 0; seed < 2 && i < n; i++) {
			arm(&at[i], 1, seed & 1);
			run(fn, &in, &probed, seed);
			unregister_kprobes(probe_ptrs, 1);
			compare(name, seed & 1 ? "one, post" : "one, boosted", &base, &probed);
		}
	}
}

static void check_function(const char *name)
{
	check_function_with(name, NULL);
}

Test(insn, riprel) { check_function("ic_riprel"); }
Test(insn, jumps) { check_function("ic_jumps"); }
Test(insn, loops) { check_function("ic_loops"); }
Test(insn, calls) { check_function_with("ic_calls", "ic_helper_add"); }
Test(insn, ret_imm16) { check_function_with("ic_calls", "ic_helper_ret8"); }
Test(insn, helpers) { check_function("ic_helper_add"); }
Test(insn, indirect_jumps) { check_function("ic_indjmp"); }
Test(insn, stack_and_red_zone) { check_function("ic_stack"); }
Test(insn, flags) { check_function("ic_flags"); }
Test(insn, sse) { check_function("ic_vector"); }
Test(insn, avx)
{
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		cr_skip_test("no AVX2/FMA on this CPU");
	check_function("ic_avx");
}
Test(insn, x87) { check_function("ic_x87"); }
Test(insn, syscall) { check_function("ic_syscall"); }
Test(insn, string_ops) { check_function("ic_string"); }
Test(insn, locked) { check_function("ic_lock"); }
Test(insn, misc) { check_function("ic_misc"); }
