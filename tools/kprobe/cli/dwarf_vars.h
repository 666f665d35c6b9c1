/* Program variables by name (DWARF), resolved by the tool into fetch plans
 * the agent runs on the hit path, and `kprobe vars`. */
#ifndef KPROBE_DWARF_VARS_H
#define KPROBE_DWARF_VARS_H

#include <stddef.h>

#include <stdbool.h>
#include <sys/types.h>

#include "spec.h"

struct cli_opts;

/* The file on disk of the object a probe names (or the main executable,
 * of -p PID or of the command): 0, or -ENOENT with one line in err. */
int cli_object_path(const struct cli_opts *o, const struct probe_spec *s, char *out,
		    size_t outlen, char *err, size_t errlen);
/* How a probe the tool makes names the object at path: its file name, or
 * the path when the name would read back as something else. */
void cli_spec_object(char *out, size_t outlen, const char *path);
/* Where the loader would find a library named by its file name. */
bool cli_library_on_disk(const char *name, char *out, size_t outlen);
/* bpftrace's short library name ("libc"): a name no file of the loader's
 * directories has, which the loader's cache resolves ("libc.so.6").  0
 * and the library's path in out, or -ENOENT when name is not one. */
int cli_short_library(const char *name, char *out, size_t outlen);
/* The same in process pid: the path it maps such a library from (as
 * /proc/PID/maps shows it), or false. */
bool cli_short_library_of_pid(pid_t pid, const char *name, char *out, size_t outlen);
/* A command's executable, searched on PATH as execvp() does. */
bool cli_exe_on_path(const char *cmd, char *out, size_t outlen);

/* Replaces every probe of o whose ARGs name program variables by one probe
 * per resolved point ("OBJECT:0xVADDR" with fetch plans, appended to
 * o->specs; the original slot keeps the first).  Exits with EXIT_BAD and
 * one line for an unknown variable, a field of a non-struct and the like. */
void dwarf_vars_resolve(struct cli_opts *o);

/* Adds a probe for each inlined copy (DWARF) of the functions the
 * probes without variables name, in their object or the main executable,
 * unless --no-inlines.  Objects without DWARF add nothing. */
void dwarf_inlines_resolve(struct cli_opts *o);

/* retval without :TYPE on a %return probe of one function (not a glob)
 * typed by the function's DWARF return type: double or float (f64, f32:
 * xmm0), an integer signed or unsigned of its size, char * as a string;
 * other pointers and the rest stay x64.  Objects without DWARF, or not
 * found, change nothing. */
void dwarf_retval_types(struct cli_opts *o);

/* kprobe vars: prints the variables at each point of o's probes; returns
 * the exit status. */
int dwarf_vars_list(struct cli_opts *o);

/* args->NAME in a program: the position of parameter name of the
 * function func defined in the object at path (0 the first) and its size
 * and sign (pointers unsigned 64-bit).  0, or -1 with one line in why
 * (no debug information, no such function or parameter, with the names
 * it has, or a type that is not an integer, enum or pointer). */
int dwarf_param(const char *path, const char *func, const char *name, int *index, int *size,
		bool *is_signed, char *why, size_t whylen);

/* args->NAME->FIELD in a program: the name of the struct, union or class
 * parameter name of func points to, into sname; 0, or -1 when it is not a
 * pointer to a named one. */
int dwarf_param_struct(const char *path, const char *func, const char *name, char *sname,
		       size_t len);

/* A cast to a struct type in a program: field of the struct, union or
 * class named sname in the debug information of the object at path (with
 * field NULL: whether there is one).  *kind 0 an integer, enum or
 * pointer (*size, *is_signed), 1 a pointer to a struct (its name in
 * inner), 2 a struct inside (inner); *offset from the start.  0, or -1
 * with one line in why (no such struct, or field, with the fields it has;
 * a bit-field or array). */
int dwarf_struct_field(const char *path, const char *sname, const char *field,
		       unsigned int *offset, int *kind, int *size, bool *is_signed, char *inner,
		       size_t innerlen, char *why, size_t whylen);

/* dwarf_strings.c: whether any of dw's strings (its own, its dwz
 * alternate's, inline names) holds the literal part of one of the globs;
 * false means no DIE's name can match any of them. */
typedef struct Dwarf Dwarf;
bool dwarf_may_name(Dwarf *dw, const char *const *globs, int nglobs);

#endif
