/*
 * Differential out-of-line fuzzer: random x86-64 instruction sequences run
 * unprobed and with probes on every instruction boundary, compared state
 * for state.  See docs/fuzzing.md.
 */
#ifndef KP_FUZZ_H
#define KP_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <Zydis/Zydis.h>

#define FZ_SANDBOX_SIZE	16384		/* the code's function */
#define FZ_PREAMBLE	5		/* fixed nop at the entry, unprobed */
#define FZ_DATA_SIZE	4096		/* scratch data, base register in the middle */
#define FZ_DATA_HALF	2048
#define FZ_STACK_SIZE	16384		/* private stack */
#define FZ_STACK_TOP	8192		/* rsp before the call, from the buffer start */
#define FZ_RED		128		/* compared below the return address */
#define FZ_ABOVE	256		/* compared above it (the caller's frame) */
#define FZ_STACK_CMP	(FZ_RED + 8 + FZ_ABOVE)
#define FZ_MAX_INSN	512
#define FZ_MAX_HITS	2048

/* Vector state that exists on this CPU. */
enum fz_level { FZ_SSE, FZ_AVX, FZ_AVX512 };

/* The whole user-visible register state; the layout is shared with the
 * harness in sandbox.S (offsets in comments). */
struct fz_state {
	uint64_t gpr[16];	/*    0: rax rbx rcx rdx rsi rdi rbp r8..r15 rsp */
	uint64_t flags;		/*  128 */
	uint64_t level;		/*  136: enum fz_level */
	uint8_t fx[512];	/*  144: fxsave64 image: x87, mxcsr, xmm */
	uint8_t ymm[16][32];	/*  656 */
	uint8_t zmm[32][64];	/* 1168 */
	uint64_t k[8];		/* 3216 */
} __attribute__((aligned(64)));

enum { R_RAX, R_RBX, R_RCX, R_RDX, R_RSI, R_RDI, R_RBP, R_R8, R_R9, R_R10,
       R_R11, R_R12, R_R13, R_R14, R_R15, R_RSP };

/* sandbox.S */
extern uint8_t fuzz_sandbox[FZ_SANDBOX_SIZE];
extern uint8_t fuzz_data[FZ_DATA_SIZE];
extern uint8_t fuzz_stack[FZ_STACK_SIZE];
extern char fuzz_run_done[];
void fuzz_run(const struct fz_state *in, struct fz_state *out);
void fuzz_clobber_vectors(uint64_t level);

/* One instruction of a generated sequence, kept abstract so that a
 * shortened sequence can be laid out and encoded again. */
enum fz_kind {
	FK_PLAIN,	/* req as is */
	FK_RIPDATA,	/* req's RIP-relative operand: disp = data offset */
	FK_BRANCH,	/* relative branch to insn `target` */
	FK_LEA,		/* lea target(%rip): address of insn `target` */
	FK_RAW,		/* raw bytes (dead code, refused forms) */
};

struct fz_insn {
	ZydisEncoderRequest req;
	uint8_t kind;
	uint8_t memop;		/* FK_RIPDATA: operand index */
	bool dead;		/* never executed */
	bool notarget;		/* random branches must not land here */
	bool fixed;		/* structural target, not re-chosen */
	bool rel8;		/* FK_BRANCH: rel8 only */
	int16_t depth;		/* stack bytes below the entry rsp */
	int16_t frame;		/* call frame */
	int target;		/* insn index */
	int data_off;
	int group;		/* removed together when minimising */
	uint8_t raw[15], rawlen;
	/* layout */
	uint8_t bytes[15], len;
	uint32_t off;		/* from the sandbox start */
};

struct fz_case {
	uint64_t seed;		/* initial state */
	int base_reg, index_reg;/* reserved: data pointer and a small index */
	int level;
	int n;
	struct fz_insn ins[FZ_MAX_INSN];
	bool live[FZ_MAX_INSN];	/* kept (minimisation) */
	/* encoded */
	uint8_t code[FZ_SANDBOX_SIZE];
	uint32_t code_len;
	int nb;			/* probed boundaries, live non-raw/raw all */
	uint32_t boff[FZ_MAX_INSN];	/* their offsets */
	int bins[FZ_MAX_INSN];	/* and instructions (-1: the final ret) */
	bool from_file;		/* bytes given, not requests */
};

/* gen.c */
uint64_t fz_rand(uint64_t *s);
int fz_level_detect(void);
void fz_gen_case(struct fz_case *c, uint64_t seed, int level, int len);
int fz_layout(struct fz_case *c);
void fz_form_name(const uint8_t *bytes, size_t len, char *out, size_t outsz);
void fz_make_state(const struct fz_case *c, struct fz_state *st, uint8_t *data, uint8_t *stack);

/* run.c */
enum fz_mode { M_BASE, M_STEP, M_BOOST, M_OPT, M_SPARSE, M_CLOBBER, M_NMODES };
extern const char *const fz_mode_name[M_NMODES];

struct fz_hit {
	uint16_t b;		/* boundary */
	uint64_t hash;		/* registers the handler saw */
};

struct fz_result {
	int status;		/* FS_* */
	int sig;
	uint64_t fault_rip, fault_addr;
	struct fz_state out;
	uint8_t data[FZ_DATA_SIZE];
	uint8_t stack[FZ_STACK_CMP];
	int reg_err[FZ_MAX_INSN];	/* register_kprobe per boundary, 1: not probed */
	uint8_t optimized[FZ_MAX_INSN];
	uint32_t pre[FZ_MAX_INSN], post[FZ_MAX_INSN];
	uint32_t bad_ip;
	int nhits;
	struct fz_hit hits[FZ_MAX_HITS];
};

enum { FS_NONE, FS_OK, FS_FAULT, FS_TIMEOUT, FS_CRASH, FS_SETUP };

/* Execution count of each boundary from a ptrace single-step run, and the
 * registers at each entry. */
struct fz_trace {
	bool ok;
	int nhits;
	struct fz_hit hits[FZ_MAX_HITS];
	uint32_t count[FZ_MAX_INSN];
	struct fz_state out;	/* not compared: pushf sees TF */
	uint64_t gpr[16];
};

extern bool fz_self_test;	/* a deliberately wrong handler in one mode */

int fz_install(struct fz_case *c);
void fz_run_mode(const struct fz_case *c, int mode, struct fz_result *r);
void fz_run_trace(const struct fz_case *c, struct fz_trace *t);
uint64_t fz_regs_hash(const uint64_t gpr[16], uint64_t flags);
bool fz_sparse_pick(const struct fz_case *c, int b);

#endif
