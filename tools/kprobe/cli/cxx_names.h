/* C++ function names in PROBEs: demangled and qualified
 * ('ns::Widget::resize'), with a glob ('ns::Widget::*') or the full
 * signature ('ns::Widget::resize(int)') to pick among overloads. */
#ifndef KPROBE_CXX_NAMES_H
#define KPROBE_CXX_NAMES_H

#include <stdbool.h>

struct cli_opts;

/* Replaces each probe whose SYMBOL reads as a C++ name (it has "::" or a
 * parameter list) by one probe per matching mangled symbol of its object
 * (the main executable when none is named), shown by its demangled name.
 * Spaces in the demangled signature are ignored when matching.  A name
 * that matches nothing is left for the agent, which says so. */
void cxx_names_resolve(struct cli_opts *o);

/* Whether a function name reads as a C++ one: "::" or a parameter list. */
bool cxx_looks_cxx(const char *sym);

/* The functions of s's object (the main executable when it names none)
 * that the C++ name or glob s->symbol matches, as specs like s named by
 * their mangled symbols, into out (at most max): how many; -1 when there
 * are more than max (or more than the matcher keeps). */
struct probe_spec;
int cxx_names_expand(const struct cli_opts *o, const struct probe_spec *s, struct probe_spec *out,
		     int max);

/* name demangled by the C++ runtime (malloc'd, the caller frees it), or
 * NULL when it is not a mangled C++ name. */
char *cxx_demangle(const char *name);

#endif
