/* C++ function names in PROBEs: demangled and qualified
 * ('ns::Widget::resize'), with a glob ('ns::Widget::*') or the full
 * signature ('ns::Widget::resize(int)') to pick among overloads. */
#ifndef KPROBE_CXX_NAMES_H
#define KPROBE_CXX_NAMES_H

struct cli_opts;

/* Replaces each probe whose SYMBOL reads as a C++ name (it has "::" or a
 * parameter list) by one probe per matching mangled symbol of its object
 * (the main executable when none is named), shown by its demangled name.
 * Spaces in the demangled signature are ignored when matching.  A name
 * that matches nothing is left for the agent, which says so. */
void cxx_names_resolve(struct cli_opts *o);

/* name demangled by the C++ runtime (malloc'd, the caller frees it), or
 * NULL when it is not a mangled C++ name. */
char *cxx_demangle(const char *name);

#endif
