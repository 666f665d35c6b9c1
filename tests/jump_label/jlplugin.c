/* A shared object with its own static key and tracepoint; the test
 * switches the key through the pointer plugin_key() returns. */
#include <kprobes/tracepoint.h>

#include "jlplugin.h"

DEFINE_STATIC_KEY_FALSE(jl_plugin_key);

KPROBES_TRACEPOINT(jlplugin, event, (int, n), (const char *, tag));

/* This object's own site table (hidden: not the executable's). */
extern const char __start___kprobes_jump_table[] __attribute__((visibility("hidden")));
extern const char __stop___kprobes_jump_table[] __attribute__((visibility("hidden")));

void plugin_table(const void **lo, const void **hi);
__attribute__((visibility("default"))) void plugin_table(const void **lo, const void **hi)
{
	*lo = __start___kprobes_jump_table;
	*hi = __stop___kprobes_jump_table;
}

struct static_key_false *plugin_key(void);
__attribute__((visibility("default"))) struct static_key_false *plugin_key(void)
{
	return &jl_plugin_key;
}

/* 1 while the key is on.  Two sites: unlikely and likely. */
int plugin_branch(void);
__attribute__((visibility("default"), noinline)) int plugin_branch(void)
{
	int a = static_branch_unlikely(&jl_plugin_key) ? 1 : 0;
	int b = static_branch_likely(&jl_plugin_key) ? 1 : 0;

	return a == b ? a : -1;
}

void plugin_fire(int n);
__attribute__((visibility("default"), noinline)) void plugin_fire(int n)
{
	trace_jlplugin_event(n, "plugin");
}
