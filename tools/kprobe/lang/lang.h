/* The probe-program language (bpftrace's user-space subset): compiler,
 * image verifier, interpreter and maps.
 *
 * Two sides of the process boundary use this header:
 *   - the tool: lang_compile() turns source text into a program image (a
 *     flat, position-independent byte string), lists its probes and maps,
 *     sizes the map region, and formats what the target sends back
 *     (lang_format_printf, the map iteration and printing helpers);
 *   - the agent, inside the target: lang_image_load() re-verifies an image
 *     that came over the control channel (it never trusts it), and
 *     lang_run() executes one probe's code on the hit path.
 *
 * The hit path (lang_run and everything it calls) takes no lock, allocates
 * nothing, makes no system call of its own and runs in bounded time: the
 * verifier has checked every operand, forward jumps are free and every
 * backward jump spends one unit of a per-run budget.  Memory of the target
 * is read only through ops->read, a fault-safe copy the caller provides
 * (the agent's is libkprobes' kprobes_read_nofault()).  All a run needs
 * lives in its own stack frame (registers and a scratch area of at most
 * LANG_MAX_STACK bytes) and in the shared map region.
 *
 * ---- The image ----
 * All integers little-endian, all references offsets (never pointers):
 *
 *   struct lang_image_hdr                 magic, version, counts, sizes
 *   struct lang_probe_desc  [nprobes]     one per probe (a block with
 *                                         several probes has one each)
 *   struct lang_map_desc    [nmaps]
 *   struct lang_fmt_desc    [nfmts]       printf/time formats and their
 *                                         argument layout
 *   struct lang_insn        [ninsns]      the code of every probe
 *   char                    pool[pool_len] strings (names, literals,
 *                                         formats), NUL-terminated
 *
 * A register-machine bytecode: 64-bit registers r0..r(nregs-1), a byte
 * scratch area of stack_size bytes where strings, tuple keys, stacks and
 * printf argument records are built, and instructions of 16 bytes.  A probe
 * owns the code range [code, code + ncode); its last instruction is RET and
 * no jump leaves the range.
 */
#ifndef KPROBE_LANG_H
#define KPROBE_LANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <kprobes.h>	/* struct pt_regs */

#define LANG_MAGIC		0x4b504c47u	/* "GLPK" */
#define LANG_VERSION		4
#define LANG_MAX_REGS		64
#define LANG_MAX_STACK		4096	/* scratch bytes per run */
#define LANG_MAX_INSNS		65536	/* in a whole image */
#define LANG_MAX_PROBES		1024
#define LANG_MAX_MAPS		128
/* Per-thread shards of each sharded map: the first LANG_SHARDS threads
 * of a process that aggregate into a keyless map each own one (written by
 * that thread only, without a locked instruction); later threads share
 * the map's slot with locked adds. */
#define LANG_SHARDS		64
#define LANG_MAX_FMTS		1024
#define LANG_MAX_FMT_ARGS	16
#define LANG_MAX_KEY_PARTS	8
#define LANG_MAX_TUPLE		16	/* values of a tuple, those of tuples inside it included */
#define LANG_MAX_POOL		(1u << 20)
#define LANG_LOOP_BUDGET	100000	/* backward jumps per run */
#define LANG_STRLEN		64	/* bpftrace's default string size */
#define LANG_COMM_LEN		16
#define LANG_USTACK_MAX		32	/* frames kept by ustack */
#define LANG_MAX_USDT_ARGS	8	/* arg0..arg7 of a usdt probe */
#define LANG_DEFAULT_MAP_KEYS	4096	/* bpftrace's default limit */
/* hist(): bpftrace 0.17's buckets: negative, 0, 1, [2,4) ... [2^30,2^31),
 * and [2^31, ...) labelled "[2G, 4G)" as bpftrace's 32-bit log2 does. */
#define LANG_HIST_BUCKETS	34

/* ---- Types (the checker's and the printers') ---- */
enum lang_type_kind {
	LANG_T_NONE = 0,
	LANG_T_INT,		/* size 1/2/4/8, is_signed */
	LANG_T_STR,		/* size bytes, NUL-padded */
	LANG_T_USTACK,		/* u64 nframes, then LANG_USTACK_MAX u64 pcs */
	LANG_T_USYM,		/* u64 address, printed as a symbol (usym, func) */
	LANG_T_PROBE,		/* u64 probe id, printed as the probe's name */
	LANG_T_TUPLE,		/* a tuple value: size bytes, its parts laid
				 * out one after the other (a map's vparts) */
	LANG_T_USTACK_PERF,	/* ustack(perf): LANG_T_USTACK's layout, perf's
				 * lines (address, symbol, object) */
	LANG_T_TIMESTAMP,	/* strftime(): u64 nsecs, u32 the index of its
				 * format (a lang_fmt_desc), u32 0: 16 bytes,
				 * formatted by the tool */
	LANG_T_BUF,		/* buf(): u64 length (at most LANG_STRLEN), then
				 * LANG_STRLEN bytes: LANG_BUF_SIZE */
};

#define LANG_BUF_SIZE		(8 + LANG_STRLEN)

struct lang_type {
	uint8_t kind;		/* enum lang_type_kind */
	uint8_t is_signed;
	uint16_t size;		/* bytes the value occupies in a record/key */
};

/* ---- Probes ---- */
enum lang_probe_kind {
	LANG_P_BEGIN = 1,
	LANG_P_END,
	LANG_P_UPROBE,
	LANG_P_URETPROBE,
	LANG_P_USDT,		/* target OBJ, provider, func NAME; the tool
				 * resolves it to the SDT sites */
	LANG_P_INTERVAL,
};

struct lang_probe_desc {
	uint8_t kind;		/* enum lang_probe_kind */
	uint8_t fast;		/* enum lang_fast: a specialised form */
	uint8_t fast_map2;	/* LANG_FAST_DELTA_HIST: the map of start values */
	uint8_t fast_src2;	/* LANG_FAST_STORE_KEY, _DELTA_HIST: the value's
				 * source (never LANG_SRC_ARG) */
	uint32_t target;	/* pool: OBJ as written ("libc", a path...), or "" */
	uint32_t func;		/* pool: FUNC, may hold glob characters; "" */
	uint32_t provider;	/* pool: usdt provider, else "" */
	uint32_t text;		/* pool: the probe as written */
	uint32_t offset;	/* +OFF of uprobe:OBJ:FUNC+OFF */
	uint64_t interval_ns;	/* interval probes */
	uint32_t code;		/* first instruction */
	uint32_t ncode;		/* number of instructions */
	/* Operands of the fast form (see enum lang_fast); the interpreter
	 * gives the same results when fast is LANG_FAST_NONE. */
	uint8_t fast_map;
	uint8_t fast_src;	/* enum lang_src: key or value */
	uint8_t fast_cmp;	/* enum lang_op compare of the filter */
	uint8_t fast_arg;	/* argument number of fast_src = LANG_SRC_ARG */
	/* A filter /pred_src CMP fast_imm/ (pred != 0): LANG_FAST_PRED_ONLY's,
	 * or one in front of a count or hist form, which then counts only
	 * the hits it lets through. */
	uint8_t pred;
	uint8_t pred_src;	/* enum lang_src */
	uint8_t pred_arg;	/* argument number of pred_src = LANG_SRC_ARG */
	int64_t fast_imm;
};

/* Forms recognised at compile time and run without the interpreter. */
enum lang_fast {
	LANG_FAST_NONE = 0,
	/* The next three may have a filter /src CMP imm/ (pred) */
	LANG_FAST_COUNT_KEYLESS,	/* @x = count() */
	LANG_FAST_COUNT_KEY,		/* @[src] = count()  (src: tid/pid/cpu/argN...) */
	LANG_FAST_HIST,			/* @x = hist(src) */
	LANG_FAST_PRED_ONLY,		/* /src CMP imm/ { ...interpreted... } (pred) */
	/* The two halves of the latency pattern, map2 an integer map keyed by
	 * src, map a keyless hist:
	 *   @map2[src] = src2
	 *   /@map2[src]/ { @map = hist(src2 - @map2[src]); delete(@map2[src]); } */
	LANG_FAST_STORE_KEY,
	LANG_FAST_DELTA_HIST,
};

/* Sources a fast form reads. */
enum lang_src {
	LANG_SRC_NONE = 0,
	LANG_SRC_PID, LANG_SRC_TID, LANG_SRC_UID, LANG_SRC_CPU,
	LANG_SRC_NSECS, LANG_SRC_ELAPSED, LANG_SRC_ARG, LANG_SRC_RETVAL,
	LANG_SRC_FUNC, LANG_SRC_PROBE,
	/* Never a fast form's source (those end at LANG_SRC_PROBE): */
	LANG_SRC_GID,		/* the process's group id */
	LANG_SRC_RAND,		/* a pseudo-random 32-bit number (per thread) */
	LANG_SRC_NUMA,		/* the NUMA node of the processor (numaid) */
	LANG_SRC_CPID,		/* the pid of the command the tool started */
};
#define LANG_SRC_LAST LANG_SRC_CPID

/* ---- Maps ---- */
enum lang_map_kind {
	LANG_M_INT = 1,		/* @x = expr (integer value) */
	LANG_M_STR,		/* @x = "..." / str() / comm */
	LANG_M_USTACK,		/* @x = ustack */
	LANG_M_USYM,		/* @x = func / usym(...) */
	LANG_M_PROBE,		/* @x = probe */
	LANG_M_TUPLE,		/* @x = (a, b, ...): vparts */
	LANG_M_TIMESTAMP,	/* @x = strftime(...) */
	LANG_M_BUF,		/* @x = buf(...) */
	LANG_M_COUNT,
	LANG_M_SUM,
	LANG_M_AVG,
	LANG_M_MIN,
	LANG_M_MAX,
	LANG_M_STATS,
	LANG_M_HIST,
	LANG_M_LHIST,
};

struct lang_map_desc {
	uint32_t name;		/* pool: "@x", "@" */
	uint8_t kind;		/* enum lang_map_kind */
	uint8_t nkeys;		/* 0: a single value, no hashing */
	uint16_t key_size;	/* bytes of a key (sum of the parts) */
	uint32_t val_size;	/* bytes of a value */
	uint32_t max_keys;	/* 1 when nkeys == 0 */
	struct lang_type keys[LANG_MAX_KEY_PARTS];
	struct lang_type val;	/* value type of INT/STR/... maps */
	/* LANG_M_TUPLE: the parts (integers, strings, usym, probe), each
	 * at its storage size, one after the other: val.size bytes.  A
	 * tuple inside the tuple is its parts in place, vnest saying where
	 * it begins and ends (LANG_NEST). */
	uint8_t nvparts;
	struct lang_type vparts[LANG_MAX_TUPLE];
	uint8_t vnest[LANG_MAX_TUPLE];
	int64_t lhist_min, lhist_max, lhist_step;
};

/* ---- printf/time formats ----
 * A printf argument record, as emitted (LANG_EV_PRINTF), is the
 * concatenation of the arguments at arg_off[i], each of type arg[i]
 * (integers as 8 bytes, strings LANG_STRLEN bytes, ...); rec_size bytes. */
struct lang_fmt_desc {
	uint32_t fmt;		/* pool: the format string as written (unescaped) */
	uint16_t nargs;
	uint16_t rec_size;
	struct lang_type arg[LANG_MAX_FMT_ARGS];
	uint16_t arg_off[LANG_MAX_FMT_ARGS];
	uint8_t nest[LANG_MAX_FMT_ARGS];	/* print(tuple): LANG_NEST of each part */
};

/* Tuples inside a tuple, laid out as their parts in place: per part, how
 * many inner tuples begin at it (high nibble) and end after it (low). */
#define LANG_NEST(opens, closes)	((uint8_t)((opens) << 4 | (closes)))
#define LANG_NEST_OPENS(n)		((n) >> 4)
#define LANG_NEST_CLOSES(n)		((n) & 15)

struct lang_image_hdr {
	uint32_t magic;		/* LANG_MAGIC */
	uint16_t version;	/* LANG_VERSION */
	uint16_t nregs;
	uint32_t stack_size;
	uint32_t nprobes, nmaps, nfmts, ninsns;
	uint32_t pool_len;
	uint32_t total_len;	/* the whole image */
};

/* ---- Instructions ---- */
struct lang_insn {
	uint8_t op;		/* enum lang_op */
	uint8_t dst, a, b;	/* registers, or b = map index for map ops */
	uint32_t aux;		/* jump target, scratch offset, size, id... */
	int64_t imm;
};

/* Every operand is checked by the verifier against the header. */
enum lang_op {
	LANG_OP_RET = 0,	/* end of the probe's run */
	LANG_OP_MOVI,		/* dst = imm */
	LANG_OP_MOV,		/* dst = a */
	/* dst = a OP b (b register) */
	LANG_OP_ADD, LANG_OP_SUB, LANG_OP_MUL,
	LANG_OP_DIV, LANG_OP_MOD,	/* unsigned; by 0 gives 0 */
	LANG_OP_SDIV, LANG_OP_SMOD,	/* signed; by 0 gives 0 */
	LANG_OP_AND, LANG_OP_OR, LANG_OP_XOR,
	LANG_OP_SHL, LANG_OP_SHR, LANG_OP_SAR,	/* count & 63 */
	LANG_OP_EQ, LANG_OP_NE,
	LANG_OP_LT, LANG_OP_LE, LANG_OP_GT, LANG_OP_GE,		/* signed */
	LANG_OP_LTU, LANG_OP_LEU, LANG_OP_GTU, LANG_OP_GEU,	/* unsigned */
	LANG_OP_NEG, LANG_OP_NOT, LANG_OP_LNOT,	/* dst = -a, ~a, !a */
	LANG_OP_SEXT,		/* dst = a sign-extended from aux bits (8/16/32) */
	LANG_OP_ZEXT,		/* dst = a truncated to aux bits (8/16/32) */
	LANG_OP_JMP,		/* to aux (forward) */
	LANG_OP_JZ, LANG_OP_JNZ,	/* if a (==0 / !=0) to aux (forward) */
	LANG_OP_LOOP,		/* to aux (backward), spends one unit of budget;
				   an exhausted budget ends the run (counted) */
	LANG_OP_CTX,		/* dst = builtin aux (enum lang_src), imm = arg no */
	LANG_OP_LOAD,		/* dst = *(aux bytes at a), imm != 0: signed; 0 on fault */
	LANG_OP_STR,		/* scratch[aux..] = string at a, at most b-reg bytes
				   when imm < 0 else imm bytes (<= LANG_STRLEN),
				   "" on fault */
	LANG_OP_STST,		/* 8 bytes scratch[aux] = a */
	LANG_OP_STLD,		/* dst = 8 bytes scratch[aux] */
	LANG_OP_STCPY,		/* scratch[aux .. +len] = scratch[src ..], imm = src | len << 32 */
	LANG_OP_STZERO,		/* scratch[aux .. aux+imm] = 0 */
	LANG_OP_STPOOL,		/* scratch[aux .. +len] = pool[src ..], imm = src | len << 32 */
	LANG_OP_STREQ,		/* dst = strings scratch[aux] and scratch[imm] equal,
				   at most b bytes (b is a length here, not a reg) */
	LANG_OP_COMM,		/* scratch[aux .. +16] = comm */
	LANG_OP_USTACK,		/* scratch[aux] = ustack of at most imm frames */
	LANG_OP_MAP_GET,	/* dst = int value of map b at key scratch[aux]; 0 absent */
	LANG_OP_MAP_GETX,	/* scratch[imm ..] = value bytes of map b at key
				   scratch[aux] (string/stack values), zeroes absent */
	LANG_OP_MAP_HAS,	/* dst = map b has key scratch[aux] */
	LANG_OP_MAP_SET,	/* map b [scratch[aux]] = a (int-valued maps) */
	LANG_OP_MAP_SETX,	/* map b [scratch[aux]] = value bytes at scratch[imm] */
	LANG_OP_MAP_AGG,	/* aggregate a into map b [scratch[aux]] by its kind;
				   count ignores a; imm: 1 + the key part that
				   is the thread's own tid, or 0 */
	LANG_OP_MAP_DEL,	/* delete map b [scratch[aux]] */
	LANG_OP_EMIT,		/* event dst-type (enum lang_event), id aux,
				   data scratch[imm & 0xffffffff], len imm >> 32 */
	LANG_OP_SIGNAL,		/* ops->signal(a) */
	LANG_OP_OVERRIDE,	/* ops->override(a) */
	LANG_OP_EXIT,		/* emit LANG_EV_EXIT, end this run, later runs do nothing */
	LANG_OP_REG,		/* dst = the word of pt_regs at byte aux (reg()); imm 1:
				   the instruction pointer, less ctx ip_bias */
	LANG_OP_BUF,		/* scratch[aux ..] = a buf() of b-reg bytes (at most
				   LANG_STRLEN) from the target's memory at a-reg
				   (imm -1; zeroes on fault) or from scratch[imm] */
	LANG_OP__COUNT
};

/* ---- Compiling (tool side) ---- */
/* A field of a struct type from DWARF, for casts in programs. */
enum lang_field_kind {
	LANG_F_INT,		/* an integer, enum or pointer: size, is_signed */
	LANG_F_STRUCT_PTR,	/* a pointer to struct sname (8 bytes) */
	LANG_F_STRUCT,		/* a struct sname inside: its address only */
};

struct lang_field {
	uint32_t offset;	/* bytes from the struct's start */
	uint8_t kind;		/* enum lang_field_kind */
	uint8_t size;		/* LANG_F_INT: 1, 2, 4 or 8 */
	uint8_t is_signed;
	char sname[64];		/* LANG_F_STRUCT_PTR, LANG_F_STRUCT */
};

struct lang_compile_opts {
	const char *filename;	/* for messages; "stdin" for -e as bpftrace */
	int nparams;		/* positional parameters $1..$nparams */
	char *const *params;
	uint32_t map_keys;	/* 0: LANG_DEFAULT_MAP_KEYS */
	/* args->NAME in a uprobe on OBJ:FUNC: the parameter's position
	 * (0..5, the argument register bpftrace reads it from) and its
	 * integer type (pointers: unsigned 64-bit), from the object's debug
	 * information; 0, or -1 with a one-line reason in why.  NULL: args
	 * is refused. */
	int (*param)(const char *obj, const char *func, const char *name, int *index,
		     struct lang_type *type, char *why, size_t whylen, void *arg);
	void *param_arg;
	/* argN in a usdt probe on OBJ:PROVIDER:NAME: how many operands its
	 * SDT notes give it (the fewest of its sites); 0, or -1 when that
	 * is not known here (the probe is resolved later).  NULL: argN is
	 * not checked against the notes.  Called with param_arg. */
	int (*usdt_nargs)(const char *obj, const char *provider, const char *name, int *nargs,
			  void *arg);
	/* ((struct S *)EXPR)->FIELD: FIELD of struct S (a struct, union or
	 * class of that name in OBJ's debug information) into *out; with
	 * field NULL, whether S exists.  0, or -1 with a one-line reason in
	 * why.  NULL: casts to struct types are refused.  Called with
	 * param_arg. */
	int (*field)(const char *obj, const char *sname, const char *field,
		     struct lang_field *out, char *why, size_t whylen, void *arg);
	/* args->NAME->FIELD: the struct, union or class parameter NAME of
	 * OBJ:FUNC points to, by name into sname; 0, or -1 when it is not a
	 * pointer to a named one.  NULL: refused.  Called with param_arg. */
	int (*param_struct)(const char *obj, const char *func, const char *name, char *sname,
			    size_t len, void *arg);
	/* Each warning bpftrace 0.17 would print for the program (integers
	 * of different signs, signed division), in its three lines, in source
	 * order; a program with warnings still compiles.  NULL: none.  Called
	 * with param_arg. */
	void (*warning)(const char *text, void *arg);
	/* Whether the file a uprobe, uretprobe or usdt probe names exists,
	 * as the tool finds it (a path; or a name on the command search path,
	 * in the loader's cache or directories, or mapped by the process).
	 * NULL: not checked.  Called with param_arg. */
	bool (*target_exists)(const char *obj, void *arg);
	/* The path to attach to for a bare target name that names a
	 * program, not a library, when that path leads to a file of another
	 * name (a symlink: python3 to python3.11), as bpftrace attaches to
	 * the file it finds; false to keep the name.  Optional. */
	bool (*target_path)(const char *obj, char *path, size_t len, void *arg);
	/* bpftrace's --unsafe: system() is allowed. */
	bool unsafe;
	/* The tool starts a command (cpid is its pid; without one cpid is
	 * refused, as bpftrace refuses it). */
	bool has_command;
};

/* An error as bpftrace prints it:
 *   FILE:LINE:COL-COL: ERROR: reason
 *   the source line
 *   ~~~~ under the offending range
 */
struct lang_error {
	int line, col, col_end;	/* 1-based; col_end exclusive */
	char msg[256];
	char text[1024];	/* the three lines, ready to print */
	/* The checker's other errors, found in the same pass (bpftrace
	 * reports every error of the pass that finds one), in the same form,
	 * one after another; "" when there are none. */
	char more[4096];
	int nmore;
};

/* Compiles src.  On success 0 and *image_out (malloc'ed, free()) of
 * *len_out bytes.  On a program error -EINVAL and err filled; -ENOMEM. */
int lang_compile(const char *src, const struct lang_compile_opts *opts,
		 void **image_out, size_t *len_out, struct lang_error *err);

/* ---- Loading (both sides) ----
 * Verifies the len bytes at image (from an untrusted source) and fills
 * img, a view that points into image (which must stay alive and not change;
 * the agent copies what it received into private memory first).
 * 0, or -EINVAL with a reason in why (may be NULL). */
struct lang_image {
	const uint8_t *base;
	size_t len;
	const struct lang_image_hdr *hdr;
	const struct lang_probe_desc *probes;
	const struct lang_map_desc *maps;
	const struct lang_fmt_desc *fmts;
	const struct lang_insn *insns;
	const char *pool;
	size_t map_off[LANG_MAX_MAPS];	/* offset of each map in the region */
	uint32_t map_cap[LANG_MAX_MAPS];	/* slots (a power of two) */
	uint32_t map_slot[LANG_MAX_MAPS];	/* bytes per slot */
	/* A sharded map (a keyless count, sum, avg, stats, hist or lhist the
	 * program never deletes): the offset of its base (what clear() and
	 * zero() took away, written by the tool only) and of its first
	 * shard, the next ones map_shard_stride bytes apart; 0 when the map
	 * is not sharded.  The shards are LANG_SHARDS blocks of shard_block
	 * bytes from shards_off, one per thread, holding that thread's shard
	 * of every sharded map.  A sharded hist's shard ends with one more
	 * word, its late sample (mapi_hist_add_late). */
	size_t map_base_off[LANG_MAX_MAPS];
	size_t map_shard_off[LANG_MAX_MAPS];
	uint32_t map_shard_stride[LANG_MAX_MAPS];
	size_t shards_off;
	uint32_t shard_block;
	/* A keyed count, sum, avg, stats, hist or lhist every writer of
	 * which puts its own thread's `tid` in the same part of the key (the
	 * fast form @m[tid] = count(), or aggregations whose MAP_AGG names
	 * that part, and nothing else updates the map): a key no two threads
	 * share, updated by the owner's add. */
	bool map_tid_owned[LANG_MAX_MAPS];
	/* A map of thread values: the start times of the latency pattern
	 * (`@m[tid] = nsecs` and its return half, fast forms both, and
	 * nothing else reading or writing @m), or the counts of
	 * `@m[tid] = count()` (the same: only that form uses @m); a key limit
	 * of LANG_SHARDS at least.  A thread with a shard keeps its own entry
	 * in it (taken over from a dead thread of the same tid), a
	 * struct lang_tval at this offset of the region in the first shard,
	 * the next ones shard_block bytes apart, written by that thread
	 * alone with plain stores; threads without one use the map's slots.
	 * 0 when the map is not one. */
	size_t map_tval_off[LANG_MAX_MAPS];
	size_t region_size;		/* bytes the map region needs */
};

int lang_image_load(struct lang_image *img, const void *image, size_t len,
		    char *why, size_t whylen);

/* A pool string of a loaded image ("" for an offset out of range). */
const char *lang_image_str(const struct lang_image *img, uint32_t off);

/* ---- The map region ----
 * Preallocated memory shared by the target (writes, lock-free) and the
 * tool (reads, clears).  lang_image_load computes region_size;
 * lang_maps_init formats size >= region_size bytes.  The tool must treat
 * the region as hostile (the target may scribble on it): the iteration
 * and decoding functions bound every index they read. */
int lang_maps_init(const struct lang_image *img, void *region, size_t size);

/* A shard for the calling thread, once per thread and region: 1 + its
 * index, or 0 when all are taken (the thread then uses the locked path).
 * A shard is never given back: a thread that exits keeps its counts in
 * it. */
uint32_t lang_maps_take_shard(void *region);
/* The same for thread tid, which takes over what its tid holds in other
 * threads' entries of the maps of thread values (a dead thread's: see
 * lang_image.map_tval_off). */
uint32_t lang_maps_take_thread_shard(const struct lang_image *img, void *region, uint64_t tid);
/* One sample into bucket idx of keyless hist m as the latency pattern's
 * return half adds it, for the thread with shard (0: none): into its
 * shard a sample late when the map is sharded (mapi_hist_add_late), else
 * at once into the map's value. */
void lang_map_hist_add_late(const struct lang_image *img, void *region, unsigned m,
			    uint32_t shard, unsigned idx);

/* A thread's entry in a map of thread values (lang_image.map_tval_off):
 * its key (the thread's tid) and value, there while live is not 0.  A
 * delete clears live alone, so a reader that found it live reads the key
 * and a value (the latest) afterwards, as from a deleted slot. */
struct lang_tval {
	uint64_t key;
	int64_t val;
	uint64_t live;
};

/* Drop counters: updates that found the map full, and runs ended by the
 * loop budget. */
uint64_t lang_maps_dropped(const struct lang_image *img, const void *region, unsigned map);
uint64_t lang_maps_aborted(const struct lang_image *img, const void *region);

/* Iterates the live entries of a map: *pos starts at 0; returns 1 with
 * key (NULL for a keyless map) and value pointing into the region, 0 at
 * the end.  A map of thread values gives its slots' entries, then the
 * threads' own. */
int lang_map_next(const struct lang_image *img, const void *region, unsigned map,
		  size_t *pos, const void **key, const void **val);

/* The value to decode of an entry lang_map_next gave: val itself, or for
 * a sharded map buf (val_size bytes, the caller's) holding the map's slot
 * plus its shards less its base. */
const void *lang_map_value(const struct lang_image *img, const void *region, unsigned map,
			   const void *val, void *buf);

/* clear(@m) and zero(@m), done by whoever handles the events in order
 * (the tool), since bpftrace runs them asynchronously after earlier
 * print() events.  Lock-free against concurrent writers.  A sharded map
 * is cleared or zeroed by moving its base up to what it holds: an update
 * racing with either lands, whole, on one side of it (taken away or
 * kept), never lost nor counted twice; the writers' memory is never
 * written. */
void lang_map_clear(const struct lang_image *img, void *region, unsigned map);
void lang_map_zero(const struct lang_image *img, void *region, unsigned map);

/* Decoded aggregate of one value (sums the parts the writer keeps). */
struct lang_agg {
	int64_t value;		/* count/sum/int/min/max; avg = sum/count */
	int64_t count, sum;	/* avg, stats */
	int has_value;		/* min/max: at least one update */
};
void lang_map_agg(const struct lang_image *img, unsigned map, const void *val,
		  struct lang_agg *out);
/* hist/lhist: the bucket counts of a value (LANG_HIST_BUCKETS or
 * lhist's (max-min)/step + 2: below min, the steps, max and above) and
 * their number. */
const uint64_t *lang_map_buckets(const struct lang_image *img, unsigned map,
				 const void *val, unsigned *nbuckets);

/* ---- Running (agent side) ---- */
enum lang_event {
	LANG_EV_PRINTF = 1,	/* id: fmt index; data: the argument record */
	LANG_EV_TIME,		/* id: fmt index (a strftime format); no data */
	LANG_EV_EXIT,		/* exit() */
	LANG_EV_PRINT_MAP,	/* id: map; data: int64 top, int64 div */
	LANG_EV_CLEAR,		/* id: map */
	LANG_EV_ZERO,		/* id: map */
	LANG_EV_PRINT_VALUE,	/* id: fmt index (one argument); data: the value */
	LANG_EV_DELETE_ALL,	/* reserved */
	LANG_EV_CAT,		/* cat(): id: fmt index; data: its argument record;
				   the tool prints the file the format names */
	LANG_EV_SYSTEM,		/* system(): the same; the tool runs the command */
	LANG_EV_JOIN,		/* join(): id: fmt index of the delimiter; data:
				   LANG_JOIN_REC bytes, a u64 count then that many
				   strings of LANG_STRLEN bytes */
};

/* join(ARRAY): at most this many strings of the array, each cut to
 * LANG_STRLEN - 1 bytes. */
#define LANG_JOIN_MAX		16
#define LANG_JOIN_REC		(8 + LANG_JOIN_MAX * LANG_STRLEN)

struct lang_ctx;

/* What the runtime user provides; every call must be async-signal-safe
 * and take no lock.  arg is lang_ctx.arg. */
struct lang_ops {
	/* Fault-safe copy from the target's memory: 0, or -EFAULT (then the
	 * VM uses zeroes, or "" for str(), as bpftrace does after a failed
	 * probe_read). */
	int (*read)(void *dst, uintptr_t src, size_t len, void *arg);
	/* pid tid uid cpu nsecs elapsed gid rand numaid cpid (enum
	 * lang_src); the others are the VM's. */
	uint64_t (*get)(int src, void *arg);
	/* The thread's name, LANG_COMM_LEN bytes NUL-padded. */
	void (*comm)(char *out, void *arg);
	/* Up to max return addresses of the probed thread, innermost first. */
	int (*ustack)(const struct pt_regs *regs, uint64_t *pcs, int max, void *arg);
	/* An output event; may drop (returns -ENOSPC) but never blocks. */
	int (*emit)(int type, uint32_t id, const void *data, size_t len, void *arg);
	int (*signal)(int sig, void *arg);
	/* override(v) at a function entry: return v at once. */
	int (*override)(struct pt_regs *regs, uint64_t v, void *arg);
};

struct lang_ctx {
	struct pt_regs *regs;
	uint64_t probe_id;	/* what `probe` prints (tool-side lookup) */
	uint64_t func_addr;	/* what `func` prints: the function's address */
	/* usdt probes: arg0.. are these values (the SDT operands the agent
	 * fetched), not the registers; NULL elsewhere. */
	const uint64_t *argv;
	unsigned int nargv;
	/* What reg() of the instruction pointer subtracts: at an entry, where
	 * the ip is past the breakpoint (kp_arch.h KP_PROBE_IP_BIAS), the
	 * probed address is what bpftrace's uprobes give. */
	unsigned int ip_bias;
	void *maps;		/* the region (lang_maps_init'ed) */
	/* 1 + the calling thread's shard (lang_maps_take_shard), written by
	 * no other thread; 0: none, the locked path. */
	uint32_t shard;
	const struct lang_ops *ops;
	void *arg;
};

/* Runs probe number probe of a loaded image.  Returns 0, LANG_RUN_EXIT
 * after exit(), or -E2BIG when the loop budget ended the run. */
#define LANG_RUN_EXIT 1
int lang_run(const struct lang_image *img, unsigned probe, struct lang_ctx *ctx);

/* Whether a fast form's filter (pred) holds for x, the value of the
 * probe's pred_src.  Inline, so that a handler of the agent can drop a hit
 * whose filter is false without calling the interpreter. */
static inline bool lang_fast_pred(const struct lang_probe_desc *d, uint64_t x)
{
	int64_t a = (int64_t)x, b = d->fast_imm;
	uint64_t ub = (uint64_t)d->fast_imm;

	switch (d->fast_cmp) {
	case LANG_OP_EQ: return x == ub;
	case LANG_OP_NE: return x != ub;
	case LANG_OP_LT: return a < b;
	case LANG_OP_LE: return a <= b;
	case LANG_OP_GT: return a > b;
	case LANG_OP_GE: return a >= b;
	case LANG_OP_LTU: return x < ub;
	case LANG_OP_LEU: return x <= ub;
	case LANG_OP_GTU: return x > ub;
	default: return x >= ub;
	}
}

/* Built with -DLANG_DIRECT_OPS, vm.c ignores ctx->ops and calls these
 * instead, which the runtime user (the agent) then defines, with the
 * contracts of struct lang_ops.  Direct calls let libkprobes' handler
 * analysis follow the whole run: built as the agent builds its hit path
 * (-mgeneral-regs-only -fno-jump-tables -minline-all-stringops), the
 * interpreter calls nothing else (no C library: its copies and compares
 * are its own), so a probe running a general program can skip saving the
 * vector state. */
int lang_ext_read(void *dst, uintptr_t src, size_t len, void *arg);
uint64_t lang_ext_get(int src, void *arg);
void lang_ext_comm(char *out, void *arg);
int lang_ext_ustack(const struct pt_regs *regs, uint64_t *pcs, int max, void *arg);
int lang_ext_emit(int type, uint32_t id, const void *data, size_t len, void *arg);
int lang_ext_signal(int sig, void *arg);
int lang_ext_override(struct pt_regs *regs, uint64_t v, void *arg);

/* ---- Formatting (tool side) ---- */
struct lang_fmt_ops {
	/* Symbol for an address: "name" (usym, func), or with with_offset
	 * "name+31" (decimal, as in bpftrace's stacks); 0, or -1 when unknown
	 * (then "0x..." is printed, as bpftrace does). */
	int (*sym)(uint64_t addr, int with_offset, char *out, size_t outlen, void *arg);
	/* The probe's name for `probe`. */
	int (*probe_name)(uint64_t id, char *out, size_t outlen, void *arg);
	void *arg;
	/* The path of the object holding an address, for ustack(perf); 0,
	 * or -1 when unknown ("[unknown]" is printed).  May be NULL. */
	int (*object)(uint64_t addr, char *out, size_t outlen, void *arg);
	/* A strftime() value: nsecs (the target's monotonic clock) as the
	 * local time in format fmt (the image's format of that index: the
	 * callee checks it, the index came from the target); the length
	 * written, or -1 (then "(?)" is printed, as bpftrace does).  May be
	 * NULL. */
	int (*strftime)(uint64_t nsecs, uint32_t fmt, char *out, size_t outlen, void *arg);
};

/* Formats a LANG_EV_PRINTF record as bpftrace's printf does; returns the
 * length written (NUL-terminated, truncated to outlen), or -EINVAL for a
 * bad fmt index or a record of the wrong size. */
ssize_t lang_format_printf(const struct lang_image *img, uint32_t fmt,
			   const void *rec, size_t len, const struct lang_fmt_ops *ops,
			   char *out, size_t outlen);

/* One value of a type as bpftrace prints it in a map key or print()
 * (strings unquoted; stacks one frame a line, as bpftrace's). */
ssize_t lang_format_value(const struct lang_type *t, const void *data,
			  const struct lang_fmt_ops *ops, char *out, size_t outlen);

/* strftime(3) of wall_ns (ns since the epoch) in local time, with
 * bpftrace's %f (the microseconds, 6 digits) too: the length written, or
 * -1 when the result is empty or does not fit. */
int lang_strftime(const char *fmt, int64_t wall_ns, char *out, size_t outlen);

/* The bucket of a value in hist() and lhist(v, min, max, step), and
 * lhist's number of buckets, as bpftrace 0.17 computes them. */
unsigned lang_hist_index(int64_t v);
unsigned lang_lhist_index(int64_t v, int64_t min, int64_t max, int64_t step);
unsigned lang_lhist_nbuckets(int64_t min, int64_t max, int64_t step);

/* bpftrace's labels of hist bucket i ("[4, 8)", "[1K, 2K)", "(..., 0)")
 * and lhist bucket i of lhist(v, min, max, step). */
void lang_hist_label(unsigned i, char *out, size_t outlen);
void lang_lhist_label(unsigned i, int64_t min, int64_t max, int64_t step,
		      char *out, size_t outlen);

#endif
