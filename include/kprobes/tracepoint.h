/*
 * kprobes/tracepoint.h - static tracepoints: named, typed instrumentation
 * points compiled into a program, off (a 5-byte NOP) until a handler is
 * attached, through the C API or with `kprobe trace 'tp:PROVIDER:NAME'`.
 *
 *	#include <kprobes/tracepoint.h>
 *
 *	KPROBES_TRACEPOINT(shop, order, (int, id), (const char *, item), (double, price));
 *
 *	void place_order(int id, const char *item, double price)
 *	{
 *		trace_shop_order(id, item, price);	// a NOP while nobody listens
 *		...
 *	}
 *
 * Each tracepoint is a static key (kprobes/jump_label.h) plus an out-of-line
 * call that packs the arguments into 64-bit slots and hands them to the
 * attached handlers.  Its descriptor (provider, name, argument names and
 * types) sits in the section __kprobes_tracepoints, where libkprobes and
 * the kprobe tool find it in the executable and in shared objects.  One to
 * six arguments of scalar type (integers, pointers, strings as char
 * pointers, float and double).
 *
 * KPROBES_TRACEPOINT defines a tracepoint for use in one source file.  For
 * several files of one ELF object: KPROBES_DECLARE_TRACEPOINT in a header,
 * KPROBES_DEFINE_TRACEPOINT with the same arguments in one source file.
 * Sites need nothing at run time: a program that only carries tracepoints
 * does not have to link libkprobes.
 */
#ifndef KPROBES_TRACEPOINT_H
#define KPROBES_TRACEPOINT_H

#include <stdint.h>

#include "kprobes/jump_label.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One argument of a tracepoint, as declared. */
struct kprobes_tp_arg {
	const char *name;
	const char *type;	/* the declared type, spelled as in the source */
	unsigned int size;	/* sizeof(type) */
};

struct kprobes_tracepoint;

/* args[i]: the i-th argument's bytes, zero-extended to 64 bits (integers
 * are not sign-extended: kprobes_tp_arg_kind() and tp->args[i].size say how to
 * read them). */
typedef void (*kprobes_tp_handler_t)(struct kprobes_tracepoint *tp, const uint64_t *args,
				     void *data);

/* The descriptor.  Fields after nargs are private to libkprobes. */
struct kprobes_tracepoint {
	const char *provider;
	const char *name;
	const struct kprobes_tp_arg *args;
	unsigned int nargs;
	unsigned int __magic;
	struct static_key_false key;	/* true while handlers are attached */
	void (*__dispatch)(struct kprobes_tracepoint *tp, const uint64_t *args);
	void *__handlers;
	unsigned long nmissed;		/* hits from inside a handler */
	unsigned long __reserved[3];
} __attribute__((aligned(64)));

#define KPROBES_TP_MAGIC 0x6b747031u

/*
 * Attaches fn(tp, args, data) to tp / detaches it.  The first handler
 * enables the tracepoint's key, the last one disables it.  After detach
 * returns, fn is not running and will not run for this attachment.
 * 0, -EINVAL (not a tracepoint, or fn NULL), -EEXIST (fn and data already
 * attached), -ENOENT (detach: not attached), -ENOMEM, or the error of
 * rewriting the sites (then nothing changed: the handler is still attached
 * after a failed detach, not attached after a failed attach).  Handlers run on the
 * thread that passes the site, possibly in a signal handler: the same
 * rules as for probe handlers apply; a tracepoint passed from inside a
 * handler does not run handlers and counts in nmissed.
 */
int kprobes_tracepoint_attach(struct kprobes_tracepoint *tp, kprobes_tp_handler_t fn, void *data);
int kprobes_tracepoint_detach(struct kprobes_tracepoint *tp, kprobes_tp_handler_t fn, void *data);

/* Calls fn for every tracepoint of every loaded object (main executable
 * first; object is the loader's name, "" for the executable) until fn
 * returns non-zero, which is then returned. */
int kprobes_tracepoint_foreach(int (*fn)(struct kprobes_tracepoint *tp, const char *object,
					 void *arg), void *arg);

/* The first loaded tracepoint provider:name, or NULL. */
struct kprobes_tracepoint *kprobes_tracepoint_find(const char *provider, const char *name);

/* What argument i means: 's' signed integer, 'u' unsigned integer, 'p'
 * pointer, 'S' string (char pointer), 'f' floating point.  From the
 * declared type; typedefs of unsigned types are known by their usual names
 * (size_t, uintN_t, pid_t is signed, ...). */
char kprobes_tp_arg_kind(const struct kprobes_tp_arg *arg);

/* ---- the macros ---- */

#define KPROBES_TP_DESC(provider, name) kprobes_tp_desc_##provider##_##name

/* (type, name) pairs, mapped in the ways the macros need. */
#define KPROBES_TP_T(type, name) type
#define KPROBES_TP_N(type, name) name
#define KPROBES_TP_PROTO1(type, name) type name
#define KPROBES_TP_META1(type, name) { #name, #type, sizeof(type) }
#define KPROBES_TP_PACK1(i, type, name)						\
	do {									\
		type kp_v_ = (name);						\
		kp_a_[i] = 0;							\
		__builtin_memcpy(&kp_a_[i], &kp_v_, sizeof(kp_v_) < 8 ? sizeof(kp_v_) : 8); \
	} while (0);

#define KPROBES_TP_PROTO_(p) KPROBES_TP_PROTO1 p
#define KPROBES_TP_META_(p) KPROBES_TP_META1 p
#define KPROBES_TP_NAME_(p) KPROBES_TP_N p
#define KPROBES_TP_PACK_(i, p) KPROBES_TP_PACK1(i, KPROBES_TP_T p, KPROBES_TP_N p)

#define KPROBES_TP_COUNT(...) KPROBES_TP_COUNT_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define KPROBES_TP_COUNT_(a, b, c, d, e, f, n, ...) n
#define KPROBES_TP_CAT(a, b) KPROBES_TP_CAT_(a, b)
#define KPROBES_TP_CAT_(a, b) a##b

/* Maps m over 1..6 pairs, separated by commas (PROTO, META, NAME) or
 * nothing (PACK, which also gets the index). */
#define KPROBES_TP_LIST(m, ...) KPROBES_TP_CAT(KPROBES_TP_L, KPROBES_TP_COUNT(__VA_ARGS__))(m, __VA_ARGS__)
#define KPROBES_TP_L1(m, a) m(a)
#define KPROBES_TP_L2(m, a, ...) m(a), KPROBES_TP_L1(m, __VA_ARGS__)
#define KPROBES_TP_L3(m, a, ...) m(a), KPROBES_TP_L2(m, __VA_ARGS__)
#define KPROBES_TP_L4(m, a, ...) m(a), KPROBES_TP_L3(m, __VA_ARGS__)
#define KPROBES_TP_L5(m, a, ...) m(a), KPROBES_TP_L4(m, __VA_ARGS__)
#define KPROBES_TP_L6(m, a, ...) m(a), KPROBES_TP_L5(m, __VA_ARGS__)
#define KPROBES_TP_PACKS(...) KPROBES_TP_CAT(KPROBES_TP_P, KPROBES_TP_COUNT(__VA_ARGS__))(0, __VA_ARGS__)
#define KPROBES_TP_P1(i, a) KPROBES_TP_PACK_(i, a)
#define KPROBES_TP_P2(i, a, ...) KPROBES_TP_PACK_(i, a) KPROBES_TP_P1(i + 1, __VA_ARGS__)
#define KPROBES_TP_P3(i, a, ...) KPROBES_TP_PACK_(i, a) KPROBES_TP_P2(i + 1, __VA_ARGS__)
#define KPROBES_TP_P4(i, a, ...) KPROBES_TP_PACK_(i, a) KPROBES_TP_P3(i + 1, __VA_ARGS__)
#define KPROBES_TP_P5(i, a, ...) KPROBES_TP_PACK_(i, a) KPROBES_TP_P4(i + 1, __VA_ARGS__)
#define KPROBES_TP_P6(i, a, ...) KPROBES_TP_PACK_(i, a) KPROBES_TP_P5(i + 1, __VA_ARGS__)

/* The descriptor's declaration and the inline trace_PROVIDER_NAME(). */
#define KPROBES_DECLARE_TRACEPOINT(provider, name, ...)				\
	extern KPROBES_KEY_VIS struct kprobes_tracepoint KPROBES_TP_DESC(provider, name); \
	static __attribute__((noinline, cold, unused)) void			\
	kprobes_tp_fire_##provider##_##name(KPROBES_TP_LIST(KPROBES_TP_PROTO_, __VA_ARGS__)) \
	{									\
		struct kprobes_tracepoint *kp_tp_ = &KPROBES_TP_DESC(provider, name); \
		uint64_t kp_a_[KPROBES_TP_COUNT(__VA_ARGS__)];			\
		void (*kp_d_)(struct kprobes_tracepoint *, const uint64_t *);	\
		KPROBES_TP_PACKS(__VA_ARGS__)					\
		kp_d_ = __atomic_load_n(&kp_tp_->__dispatch, __ATOMIC_ACQUIRE); \
		if (kp_d_)							\
			kp_d_(kp_tp_, kp_a_);					\
	}									\
	static inline __attribute__((always_inline, unused)) void		\
	trace_##provider##_##name(KPROBES_TP_LIST(KPROBES_TP_PROTO_, __VA_ARGS__)) \
	{									\
		if (static_branch_unlikely(&KPROBES_TP_DESC(provider, name).key)) \
			kprobes_tp_fire_##provider##_##name(			\
				KPROBES_TP_LIST(KPROBES_TP_NAME_, __VA_ARGS__)); \
	}

/* The descriptor itself, in the table section (one source file). */
#define KPROBES_DEFINE_TRACEPOINT(provider, name, ...)				\
	static const struct kprobes_tp_arg kprobes_tp_args_##provider##_##name[] = { \
		KPROBES_TP_LIST(KPROBES_TP_META_, __VA_ARGS__)			\
	};									\
	KPROBES_KEY_VIS __attribute__((section("__kprobes_tracepoints"), used))	\
	struct kprobes_tracepoint KPROBES_TP_DESC(provider, name) = {		\
		#provider, #name, kprobes_tp_args_##provider##_##name,		\
		KPROBES_TP_COUNT(__VA_ARGS__), KPROBES_TP_MAGIC,		\
		{ STATIC_KEY_INIT_FALSE }, 0, 0, 0, { 0, 0, 0 }			\
	}

#define KPROBES_TRACEPOINT(provider, name, ...)					\
	KPROBES_DECLARE_TRACEPOINT(provider, name, __VA_ARGS__)			\
	KPROBES_DEFINE_TRACEPOINT(provider, name, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
