/* What the test shared objects export (they are dlopen()ed: the tests
 * look these names up with dlsym). */
#ifndef JL_PLUGIN_H
#define JL_PLUGIN_H

#include <kprobes/jump_label.h>

/* libjlplugin.so */
typedef struct static_key_false *(*jl_plugin_key_fn)(void);
typedef int (*jl_plugin_branch_fn)(void);
typedef void (*jl_plugin_fire_fn)(int n);
typedef void (*jl_plugin_table_fn)(const void **lo, const void **hi);

/* libjlo0.so: the four kinds of site, at -O0 */
struct jl_o0_keys {
	struct static_key_true *t;
	struct static_key_false *f;
};
typedef void (*jl_o0_keys_fn)(struct jl_o0_keys *out);
/* bit 0: likely(&t), 1: unlikely(&t), 2: likely(&f), 3: unlikely(&f) */
typedef int (*jl_o0_branches_fn)(void);
typedef void (*jl_o0_fire_fn)(long a, const char *b);

#endif
