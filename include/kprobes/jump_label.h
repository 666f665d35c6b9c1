/*
 * kprobes/jump_label.h - static keys: branches that cost a NOP when off.
 *
 * A static key is a boolean whose test is compiled into the code as a
 * 5-byte instruction: a NOP while the branch is not taken, a JMP to the
 * other block once it is.  Flipping the key rewrites every site in the
 * executable and in every loaded shared object (including ones dlopen()ed
 * later) with the same int3-first live patching libkprobes uses for
 * optimized probes, safely while other threads run the sites.  The fast
 * path never loads a variable.
 *
 *	DEFINE_STATIC_KEY_FALSE(trace_on);
 *
 *	void serve(struct request *r)
 *	{
 *		if (static_branch_unlikely(&trace_on))
 *			log_request(r);		// out of line, costs nothing when off
 *		...
 *	}
 *
 *	static_branch_enable(&trace_on);	// from any thread, at any time
 *
 * The code's initial state matches the key's initial value, so keys read
 * correctly before libkprobes initializes (in constructors, before main).
 * A key and the sites that test it must live in the same ELF object (the
 * sites record the key's address; in -fPIC code this needs the key's
 * hidden visibility, which DEFINE/DECLARE_STATIC_KEY_* give it).
 *
 * Sites need nothing at run time; switching keys needs -lkprobes.
 * static_branch_enable() and friends may block (they take a mutex and
 * patch code): call them from normal context, not from a signal handler or
 * a probe handler.
 *
 * C and C++ (GCC >= 8 or Clang >= 9: asm goto), x86-64 and arm64.
 */
#ifndef KPROBES_JUMP_LABEL_H
#define KPROBES_JUMP_LABEL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Private layout; use the macros and functions below.  enabled is the
 * reference count: > 0 means the key is true. */
struct static_key {
	int enabled;
	int __flags;
	void *__reserved;
};

struct static_key_true { struct static_key key; };
struct static_key_false { struct static_key key; };

#define KPROBES_KEY_VIS __attribute__((visibility("hidden")))

#define STATIC_KEY_INIT_TRUE  { 1, 0, 0 }
#define STATIC_KEY_INIT_FALSE { 0, 0, 0 }

/* A key that starts true / false.  Use at file scope; prefix "static" for a
 * key private to its file. */
#define DEFINE_STATIC_KEY_TRUE(name) \
	KPROBES_KEY_VIS struct static_key_true name = { STATIC_KEY_INIT_TRUE }
#define DEFINE_STATIC_KEY_FALSE(name) \
	KPROBES_KEY_VIS struct static_key_false name = { STATIC_KEY_INIT_FALSE }
/* For a header shared by the files of one ELF object. */
#define DECLARE_STATIC_KEY_TRUE(name) extern KPROBES_KEY_VIS struct static_key_true name
#define DECLARE_STATIC_KEY_FALSE(name) extern KPROBES_KEY_VIS struct static_key_false name

/*
 * One table entry per site, in section __kprobes_jump_table: the site, the
 * jump target, and the key's address with bit 0 set when the site is
 * "branch" (taken when the key is false).  All three are relative to the
 * entry, so the table needs no relocation at load time.  A site is a JMP
 * exactly when (key is true) != branch.
 */
#define KPROBES_JL_ENTRY(key_op, branch_op)					\
	".pushsection __kprobes_jump_table, \"a\"\n\t"				\
	".balign 8\n\t"								\
	".long 1b - ., %l[l_yes] - .\n\t"					\
	".quad " key_op " + " branch_op " - .\n\t"				\
	".popsection\n\t"

/*
 * A site that starts as a NOP (falls through: false) or as a JMP to the
 * other block (true): 5 bytes each on x86-64, one word (NOP, B) on arm64.  Statement expressions rather than inline
 * functions, so the key's address is a constant operand even at -O0.
 */
#define KPROBES_JL_SITE(insn, key, branch)					\
	({									\
		__label__ l_yes;						\
		bool kp_r_ = false;						\
		__asm__ goto(insn KPROBES_JL_ENTRY("%c0", "%c1")		\
			     : : KPROBES_JL_KEY_OP(key), "i"(branch) : : l_yes); \
		if (0) {							\
		l_yes:								\
			kp_r_ = true;						\
		}								\
		kp_r_;								\
	})
#if defined(__aarch64__)
/* arm64: one instruction word, NOP or B; the key's address is a symbolic
 * operand ("S": "i" refuses symbol addresses in position-independent
 * code there). */
#define KPROBES_JL_KEY_OP(key) "S"(key)
#define KPROBES_JL_NOP "1: nop\n\t"
#define KPROBES_JL_JMP "1: b %l[l_yes]\n\t"
#else
#define KPROBES_JL_KEY_OP(key) "i"(key)
#define KPROBES_JL_NOP "1: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
#define KPROBES_JL_JMP "1: .byte 0xe9\n\t.long %l[l_yes] - 2f\n\t2:\n\t"
#endif
#define kprobes_jl_nop(key, branch) KPROBES_JL_SITE(KPROBES_JL_NOP, key, branch)
#define kprobes_jl_jmp(key, branch) KPROBES_JL_SITE(KPROBES_JL_JMP, key, branch)

#ifdef __cplusplus
} /* extern "C" */

/* C++: pick the site's initial form from the key's type (overloads; these
 * need optimization, -O1 or more, for the key to be a constant). */
static inline __attribute__((always_inline)) bool
kprobes_jl_likely(struct static_key_true *k)
{
	return !kprobes_jl_nop(&k->key, true);
}
static inline __attribute__((always_inline)) bool
kprobes_jl_likely(struct static_key_false *k)
{
	return !kprobes_jl_jmp(&k->key, true);
}
static inline __attribute__((always_inline)) bool
kprobes_jl_unlikely(struct static_key_true *k)
{
	return kprobes_jl_jmp(&k->key, false);
}
static inline __attribute__((always_inline)) bool
kprobes_jl_unlikely(struct static_key_false *k)
{
	return kprobes_jl_nop(&k->key, false);
}
#define static_branch_likely(x) kprobes_jl_likely(x)
#define static_branch_unlikely(x) kprobes_jl_unlikely(x)
#define KPROBES_JL_KEY(x) (&(x)->key)
extern "C" {
#else
#define KPROBES_JL_IS_TRUE(x) \
	__builtin_types_compatible_p(__typeof__(*(x)), struct static_key_true)
/*
 * static_branch_likely(&key): the true block is laid out inline.
 * static_branch_unlikely(&key): the false block is inline and the true
 * block out of line.  Either way the site is a NOP in the key's initial
 * state when the expectation matches it, and a JMP otherwise.
 * __builtin_choose_expr compiles only the chosen form, also at -O0.
 */
#define static_branch_likely(x)							\
	__builtin_choose_expr(KPROBES_JL_IS_TRUE(x),				\
			      !kprobes_jl_nop(&(x)->key, true),			\
			      !kprobes_jl_jmp(&(x)->key, true))
#define static_branch_unlikely(x)						\
	__builtin_choose_expr(KPROBES_JL_IS_TRUE(x),				\
			      kprobes_jl_jmp(&(x)->key, false),			\
			      kprobes_jl_nop(&(x)->key, false))
#define KPROBES_JL_KEY(x) (&(x)->key)
#endif

/* The key's current value (a plain load; for slow paths and tests). */
static inline bool static_key_enabled(const struct static_key *key)
{
	return __atomic_load_n(&key->enabled, __ATOMIC_ACQUIRE) > 0;
}

/*
 * Switching keys.  Each returns 0 or a negative errno: -EINVAL when a site
 * of the key is not what the table says (corrupt table, or a site someone
 * else patched), -ENOMEM, or an error writing code.  On failure the key
 * keeps its old value and every site its old code.
 *
 * enable/disable set the value; inc/dec count references: the key is true
 * while the count is positive (inc on a key that is true by enable adds
 * to 1).  A dec below zero is -EINVAL.
 */
int kprobes_static_key_enable(struct static_key *key);
int kprobes_static_key_disable(struct static_key *key);
int kprobes_static_key_inc(struct static_key *key);
int kprobes_static_key_dec(struct static_key *key);

#define static_branch_enable(x) kprobes_static_key_enable(KPROBES_JL_KEY(x))
#define static_branch_disable(x) kprobes_static_key_disable(KPROBES_JL_KEY(x))
#define static_branch_inc(x) kprobes_static_key_inc(KPROBES_JL_KEY(x))
#define static_branch_dec(x) kprobes_static_key_dec(KPROBES_JL_KEY(x))
#define static_branch_value(x) static_key_enabled(KPROBES_JL_KEY(x))

#ifdef __cplusplus
}
#endif

#endif
