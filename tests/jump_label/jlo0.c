/* Built at -O0: the static_branch_* macros and a tracepoint without
 * optimization. */
#include <kprobes/tracepoint.h>

#include "jlplugin.h"

DEFINE_STATIC_KEY_TRUE(jl_o0_t);
DEFINE_STATIC_KEY_FALSE(jl_o0_f);

KPROBES_TRACEPOINT(jlo0, hit, (long, a), (const char *, b));

void o0_keys(struct jl_o0_keys *out);
__attribute__((visibility("default"))) void o0_keys(struct jl_o0_keys *out)
{
	out->t = &jl_o0_t;
	out->f = &jl_o0_f;
}

int o0_branches(void);
__attribute__((visibility("default"))) int o0_branches(void)
{
	int r = 0;

	if (static_branch_likely(&jl_o0_t))
		r |= 1;
	if (static_branch_unlikely(&jl_o0_t))
		r |= 2;
	if (static_branch_likely(&jl_o0_f))
		r |= 4;
	if (static_branch_unlikely(&jl_o0_f))
		r |= 8;
	return r;
}

void o0_fire(long a, const char *b);
__attribute__((visibility("default"))) void o0_fire(long a, const char *b)
{
	trace_jlo0_hit(a, b);
}
