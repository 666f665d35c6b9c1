/* Program variables by name: the tool reads the object's DWARF (where the
 * file is on disk), finds the probe points, and compiles each variable
 * access into a fetch plan (spec.h) for the agent, which runs it on the hit
 * path with no DWARF work there (docs/design.md, "Variables by name").
 *
 * A point is a function's entry (after its prologue, where the parameters
 * have their homes, as perf probe and gdb place it), FUNC+OFFSET,
 * FILE:LINE (the lowest address of the line in each function), or a
 * %return probe (the parameters as they were at the entry).  At each point
 * the variables are those of the scopes around it, innermost first; their
 * locations come from the location lists at that address. */
#include "dwarf_vars.h"
#include "kp_arch.h"

#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cxx_names.h"
#include "debug_file.h"
#include "elf_file.h"
#include "ldcache.h"
#include "usdt.h"
#include "util.h"

#define MAX_POINTS 64
#define MAX_SCOPE_VARS 128

/* The object a probe's variables are looked up in. */
struct dbg {
	char path[PATH_MAX];		/* the object (the probe names it so) */
	char name[256];			/* as the agent knows it: its file name */
	int fd, dfd;			/* the object, its separate debug file */
	Elf *elf, *delf;
	Dwarf *dw;
	Dwarf_CFI *cfi;			/* .eh_frame of the object */
};

struct point {
	Dwarf_Addr pc;
	Dwarf_Die cu;
	char inlined_of[SPEC_NAME_MAX * 2];	/* an inlined copy of this function */
	Dwarf_Die inl;			/* its DW_TAG_inlined_subroutine */
	bool has_inl;
};

/* A variable visible at a point. */
struct var {
	const char *name;
	Dwarf_Die die;
	Dwarf_Die fn;			/* its function (for DW_AT_frame_base) */
};

/* An access being compiled: the plan so far yields either the value
 * itself or the address where it is in memory. */
struct access {
	struct spec_arg *a;
	bool in_memory;
	bool unavailable;		/* optimized out here */
	Dwarf_Die type;			/* no type: void */
	bool has_type;
	bool bitfield;			/* a bit-field's value: nothing may follow */
	char why[160];			/* unavailable because */
	/* A composite location (DW_OP_piece): planned once a field picks
	 * the piece that holds it. */
	int npieces;
	struct piece {
		Dwarf_Word start, size;	/* bytes of the variable */
		Dwarf_Op *ops;		/* empty: optimized out */
		size_t n;
	} pieces[8];
	struct dbg *d;
	Dwarf_Addr pc;
	Dwarf_Die fn;
	Dwarf_Attribute attr;
	/* Compiling a caller's call-site value: its registers are
	 * recovered from the probed function's frame at that pc. */
	const struct caller_frame *caller;
	bool soft_limit;		/* a full plan: unavailable, not an error */
};

/* The caller's frame as of its call of the probed function, seen from the
 * probe point pc in that function: its stack pointer is the function's
 * CFA, its preserved registers are where the function's call frame
 * information says, the others are lost. */
struct caller_frame {
	struct dbg *d;
	Dwarf_Addr callee_pc;
	Dwarf_Attribute *attr;
};

static __attribute__((noreturn, format(printf, 1, 2))) void bad(const char *fmt, ...)
{
	char msg[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_die(EXIT_BAD, "%s", msg);
}

/* ---- the object ---- */

bool cli_exe_on_path(const char *cmd, char *out, size_t outlen)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	char *save = NULL;

	if (strchr(cmd, '/')) {
		snprintf(out, outlen, "%s", cmd);
		return access(out, R_OK) == 0;
	}
	snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, outlen, "%s/%s", *d ? d : ".", cmd);
		if (access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/* The path pid maps the object want from: want itself, or its file name;
 * with short, a library whose file name is want's short name ("libc":
 * libc.so.6). */
static bool mapped_object(pid_t pid, const char *want, bool short_name, char *out, size_t outlen)
{
	char maps[64], line[PATH_MAX + 128];
	bool found = false;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		const char *base;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		base = strrchr(path, '/') + 1;
		if (short_name ? short_library_matches(base, want)
			       : !strcmp(path, want) || !strcmp(base, want)) {
			snprintf(out, outlen, "%s", path);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* A loaded object of process pid whose path or file name is want. */
static bool object_of_pid(pid_t pid, const char *want, char *out, size_t outlen)
{
	return mapped_object(pid, want, false, out, outlen);
}

bool cli_short_library_of_pid(pid_t pid, const char *name, char *out, size_t outlen)
{
	return !strchr(name, '/') && mapped_object(pid, name, true, out, outlen);
}

/* Where a library named only by its file name would be found. */
bool cli_library_on_disk(const char *name, char *out, size_t outlen)
{
	static const char *const dirs[] = {
		"/lib/" KP_MULTIARCH, "/usr/lib/" KP_MULTIARCH, "/lib64", "/usr/lib64",
		"/lib", "/usr/lib", "/usr/local/lib",
	};
	const char *ld = getenv("LD_LIBRARY_PATH");

	if (ld) {
		char buf[4096], *save = NULL;

		snprintf(buf, sizeof(buf), "%s", ld);
		for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
			snprintf(out, outlen, "%s/%s", d, name);
			if (access(out, R_OK) == 0)
				return true;
		}
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(out, outlen, "%s/%s", dirs[i], name);
		if (access(out, R_OK) == 0)
			return true;
	}
	return false;
}

int cli_short_library(const char *name, char *out, size_t outlen)
{
	char path[PATH_MAX];

	if (!name[0] || strchr(name, '/') || strpbrk(name, "*?[") ||
	    cli_library_on_disk(name, path, sizeof(path)) ||
	    ldcache_find_or_scan(name, out, outlen))
		return -ENOENT;
	return 0;
}

/* The file on disk of the object a probe names (or the main executable):
 * 0, or -ENOENT with a one-line reason in err. */
int cli_object_path(const struct cli_opts *o, const struct probe_spec *s, char *out,
		    size_t outlen, char *err, size_t errlen)
{
	char exe[PATH_MAX];
	const char *want = s->object;

	if (o->pid) {
		snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)o->pid);
		if (!want[0] || (!strchr(want, '/') && !object_of_pid(o->pid, want, out, outlen) &&
				 !cli_short_library_of_pid(o->pid, want, out, outlen))) {
			ssize_t n = readlink(exe, out, outlen - 1);

			if (n <= 0) {
				snprintf(err, errlen, "cannot read %s: %s", exe, strerror(errno));
				return -ENOENT;
			}
			out[n] = '\0';
			if (want[0] && strcmp(strrchr(out, '/') + 1, want)) {
				snprintf(err, errlen, "no object '%s' is loaded in process %d", want,
					 (int)o->pid);
				return -ENOENT;
			}
		} else if (strchr(want, '/')) {
			snprintf(out, outlen, "%s", want);
		}
		return 0;
	}
	if (o->command && !cli_exe_on_path(o->command[0], exe, sizeof(exe))) {
		snprintf(err, errlen, "cannot find the command '%s'", o->command[0]);
		return -ENOENT;
	}
	if (!want[0]) {
		if (!o->command) {
			snprintf(err, errlen, "give the object whose variables to read");
			return -ENOENT;
		}
		snprintf(out, outlen, "%s", exe);
	} else if (strchr(want, '/')) {
		snprintf(out, outlen, "%s", want);
	} else if (o->command && !strcmp(strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe, want)) {
		snprintf(out, outlen, "%s", exe);
	} else if (!cli_library_on_disk(want, out, outlen) &&
		   cli_short_library(want, out, outlen)) {
		snprintf(err, errlen, "cannot find the object '%s' on disk to read its debug "
			 "information", want);
		return -ENOENT;
	}
	return 0;
}

void cli_spec_object(char *out, size_t outlen, const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	/* "usdt:..." and "tp:..." would read back as those kinds of probe;
	 * and an object the program may dlopen() later from anywhere is
	 * found by the agent only by its path. */
	if (path[0] == '/' && strlen(path) < outlen)
		base = path;
	snprintf(out, outlen, "%s", base);
}

static void object_path(const struct cli_opts *o, const struct probe_spec *s, char *out,
			size_t outlen)
{
	char err[PATH_MAX + 128];

	if (cli_object_path(o, s, out, outlen, err, sizeof(err)))
		bad("%s", err);
}

static void dbg_close(struct dbg *d)
{
	if (d->dw)
		dwarf_end(d->dw);
	if (d->delf)
		elf_end(d->delf);
	if (d->elf)
		elf_end(d->elf);
	if (d->dfd >= 0)
		close(d->dfd);
	if (d->fd >= 0)
		close(d->fd);
	memset(d, 0, sizeof(*d));
	d->fd = d->dfd = -1;
}

/* Opens the object and its DWARF: 0, -ENOENT (no such file or not ELF)
 * or -ENODATA (no debug information anywhere). */
static int dbg_try_open(struct dbg *d, const char *path)
{
	char dpath[PATH_MAX];
	const char *base;

	memset(d, 0, sizeof(*d));
	d->fd = d->dfd = -1;
	snprintf(d->path, sizeof(d->path), "%s", path);
	base = strrchr(path, '/');
	snprintf(d->name, sizeof(d->name), "%s", base ? base + 1 : path);
	elf_version(EV_CURRENT);
	d->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0)
		return -ENOENT;
	d->elf = elf_begin(d->fd, ELF_C_READ_MMAP, NULL);
	if (!d->elf || elf_kind(d->elf) != ELF_K_ELF)
		return -ENOENT;
	d->dw = dwarf_begin_elf(d->elf, DWARF_C_READ, NULL);
	if (!d->dw && debug_file_find(d->elf, path, dpath, sizeof(dpath)) == 0) {
		d->dfd = open(dpath, O_RDONLY | O_CLOEXEC);
		if (d->dfd >= 0)
			d->delf = elf_begin(d->dfd, ELF_C_READ_MMAP, NULL);
		if (d->delf)
			d->dw = dwarf_begin_elf(d->delf, DWARF_C_READ, NULL);
	}
	if (!d->dw)
		return -ENODATA;
	d->cfi = dwarf_getcfi_elf(d->elf);
	return 0;
}

static void dbg_open(struct dbg *d, const char *path)
{
	int rc = dbg_try_open(d, path);

	if (rc == -ENOENT)
		bad("cannot read %s as an ELF object", path);
	if (rc)
		bad("%s has no debug information (none in the file, under /usr/lib/debug/.build-id "
		    "or through .gnu_debuglink): variables cannot be named", path);
}

/* ---- probe points ---- */

/* The address after a function's prologue: the first line-table row of
 * the function flagged prologue_end, else the second line's address, else
 * the entry itself. */
static Dwarf_Addr after_prologue(Dwarf_Die *cu, Dwarf_Addr entry, Dwarf_Addr end)
{
	Dwarf_Lines *lines;
	size_t n;
	Dwarf_Addr second = 0;
	int first_line = -1;

	if (dwarf_getsrclines(cu, &lines, &n))
		return entry;
	for (size_t i = 0; i < n; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr a;
		bool pe = false;
		int ln;

		if (!l || dwarf_lineaddr(l, &a) || a < entry || a >= end)
			continue;
		dwarf_lineprologueend(l, &pe);
		if (pe && a > entry)
			return a;
		dwarf_lineno(l, &ln);
		if (a == entry && first_line < 0)
			first_line = ln;
		else if (a > entry && ln != first_line && first_line >= 0 && (!second || a < second))
			second = a;
	}
	return second ? second : entry;
}

static struct point *add_point(struct point *pts, int *n, Dwarf_Addr pc, Dwarf_Die *cu)
{
	for (int i = 0; i < *n; i++)
		if (pts[i].pc == pc)
			return NULL;
	if (*n == MAX_POINTS)
		bad("more than %d points for one probe with variables", MAX_POINTS);
	memset(&pts[*n], 0, sizeof(pts[*n]));
	pts[*n].pc = pc;
	pts[*n].cu = *cu;
	return &pts[(*n)++];
}

/* ---- inlined copies ---- */

/* A function's mangled name (C++), through its declaration; NULL. */
static const char *linkage_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;

	if (!dwarf_attr_integrate(die, DW_AT_linkage_name, &a) &&
	    !dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		return NULL;
	return dwarf_formstring(&a);
}

/* Whether a function DIE is the one a probe's SYMBOL names: its name,
 * or for C++ its mangled name (the tool turned a demangled name into
 * that, cxx_names.c). */
static bool function_named(Dwarf_Die *fn, const char *glob)
{
	const char *name = dwarf_diename(fn), *ln = linkage_name(fn);

	return (name && !fnmatch(glob, name, 0)) || (ln && !fnmatch(glob, ln, 0));
}


/* The address where an inlined copy starts: DW_AT_entry_pc, else its
 * lowest address. */
static bool inline_entry(Dwarf_Die *die, Dwarf_Addr *pc)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off;

	if (!dwarf_entrypc(die, pc))
		return true;
	off = dwarf_ranges(die, 0, &base, &start, &end);
	if (off <= 0)
		return false;
	*pc = start;
	for (; off > 0; off = dwarf_ranges(die, off, &base, &start, &end))
		if (start < *pc)
			*pc = start;
	return true;
}

struct inl_walk {
	const char *const *globs;	/* one list of points per glob */
	int nglobs;
	Dwarf_Die *cu;
	struct point (*pts)[MAX_POINTS];
	int *n;
	Dwarf_Die caller;		/* the out-of-line function walked */
	bool has_caller;
};

/* One line-table row as copies are told apart by: where in the source. */
struct row_key {
	Dwarf_Addr addr;
	const char *file;
	int line, col;
};

static bool same_key(const struct row_key *a, const struct row_key *b)
{
	return a->line == b->line && a->col == b->col &&
	       (a->file == b->file || (a->file && b->file && !strcmp(a->file, b->file)));
}

#define MAX_COPY_ROWS 512

/* The rows of the CU's line table that start inside [lo, hi), in address
 * order, one per address (the last, as a debugger stops at) and one per
 * run of the same source position. */
static int rows_in(Dwarf_Die *cu, Dwarf_Addr lo, Dwarf_Addr hi, struct row_key *out, int n,
		   int max)
{
	Dwarf_Lines *lines;
	size_t nl, k, first = 0, last;

	if (dwarf_getsrclines(cu, &lines, &nl))
		return n;
	/* libdw keeps the rows sorted by address: the first at lo or
	 * above by bisection (a unit can have a great many rows). */
	last = nl;
	while (first < last) {
		size_t mid = first + (last - first) / 2;
		Dwarf_Addr a = 0;

		dwarf_lineaddr(dwarf_onesrcline(lines, mid), &a);
		if (a < lo)
			first = mid + 1;
		else
			last = mid;
	}
	for (k = first; k < nl; k++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, k);
		struct row_key r = { 0 };
		bool end = false;

		if (!l || dwarf_lineaddr(l, &r.addr))
			continue;
		if (r.addr >= hi)
			break;
		if (r.addr < lo || dwarf_lineendsequence(l, &end) || end)
			continue;
		dwarf_lineno(l, &r.line);
		dwarf_linecol(l, &r.col);
		r.file = dwarf_linesrc(l, NULL, NULL);
		if (n && out[n - 1].addr == r.addr) {
			out[n - 1] = r;
			continue;
		}
		if (n && same_key(&out[n - 1], &r))
			continue;
		if (n == max)
			return -1;
		out[n++] = r;
	}
	return n;
}

static int cmp_row_addr(const void *a, const void *b)
{
	const struct row_key *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Whether rows [a, a+n) and [b, b+n) name the same source positions. */
static bool same_rows(const struct row_key *a, const struct row_key *b, int n)
{
	for (int k = 0; k < n; k++)
		if (!same_key(&a[k], &b[k]))
			return false;
	return true;
}

/* The copies of an inlined instance's code that one DIE stands for.  A
 * loop unroller or vectorizer clones the instructions with their source
 * positions, so LLVM's unrolled copies of an inlined call share the
 * call's one DW_TAG_inlined_subroutine (its ranges hold them all; its
 * entry runs once per pass through the loop, not once per call).  In
 * address order its line rows then come back to the first row's source
 * position (file, line, column) at each copy.  When every such segment
 * repeats the first one exactly (at least two positions each: one
 * statement's instructions interleaved by the scheduler do not), they are
 * copies: their starts go to starts[] and their number is returned.
 * (gcc's copies of a path, tail duplication, show the same: each copy
 * runs once per call that takes its path, where the entry alone missed
 * the other paths' calls.)
 * When the first position comes back at least twice over at least three
 * separate ranges but the segments differ (a vector body beside scalar
 * copies, one instruction standing for several calls), the copies cannot
 * be told apart: minus their number.  (Twice in one or two ranges is what
 * a scheduler makes of two expressions of one line, as gcc does with a
 * call nested in another's arguments.)  0: one copy. */
static int inline_copies(Dwarf_Die *cu, Dwarf_Die *inl, Dwarf_Addr *starts, int max)
{
	struct row_key rows[MAX_COPY_ROWS];
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	int n = 0, nseg = 0, len = -1, seg_at = 0, nranges = 0;
	bool alike = true;

	while ((off = dwarf_ranges(inl, off, &base, &lo, &hi)) > 0 && n >= 0) {
		n = rows_in(cu, lo, hi, rows, n, MAX_COPY_ROWS);
		nranges += hi > lo;
	}
	if (n < 2)
		return 0;
	qsort(rows, (size_t)n, sizeof(rows[0]), cmp_row_addr);
	for (int k = 0; k <= n; k++) {
		if (k > 0 && k < n && !same_key(&rows[k], &rows[0]))
			continue;
		if (k) {
			/* the segment [seg_at, k) ends */
			if (len < 0)
				len = k - seg_at;
			if (k - seg_at != len || len < 2 || !same_rows(&rows[seg_at], rows, len))
				alike = false;
		}
		if (k < n) {
			if (nseg < max)
				starts[nseg] = rows[k].addr;
			else
				alike = false;
			nseg++;
			seg_at = k;
		}
	}
	if (nseg < 2)
		return 0;
	if (alike)
		return nseg;
	return nseg >= 3 && nranges >= 3 ? -nseg : 0;
}

struct call_line_count {
	Dwarf_Off origin;
	Dwarf_Word file, line;
	int n;
	Dwarf_Off first;		/* the first instance found */
};

static bool same_call(Dwarf_Die *inl, Dwarf_Off origin, Dwarf_Word file, Dwarf_Word line)
{
	Dwarf_Attribute a;
	Dwarf_Die o;
	Dwarf_Word f, l;

	return dwarf_attr(inl, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &o) &&
	       dwarf_dieoffset(&o) == origin &&
	       dwarf_attr(inl, DW_AT_call_file, &a) && !dwarf_formudata(&a, &f) && f == file &&
	       dwarf_attr(inl, DW_AT_call_line, &a) && !dwarf_formudata(&a, &l) && l == line;
}

/* The instances of one function inlined at one call line under die. */
static void count_call_line(Dwarf_Die *die, struct call_line_count *c, int depth)
{
	Dwarf_Die child;

	if (depth > 64 || dwarf_child(die, &child))
		return;
	do {
		if (dwarf_tag(&child) == DW_TAG_inlined_subroutine &&
		    same_call(&child, c->origin, c->file, c->line) && !c->n++)
			c->first = dwarf_dieoffset(&child);
		if (dwarf_haschildren(&child))
			count_call_line(&child, c, depth + 1);
	} while (!dwarf_siblingof(&child, &child));
}

/* Calls no probe can count: the code of the call line of inlined copy
 * inl (in w->caller) comes in more copies (an unrolled or vectorized loop:
 * segments of the line's rows as inline_copies() tells them apart, each
 * at least two positions long) than there are inlined instances of the
 * function for that line.  The others compute the function's result with
 * no instruction of its own (folded into an induction variable, or one
 * vector instruction for several calls), so no address runs once per
 * call: said once per call line, on stderr. */
static void uncounted_calls(struct inl_walk *w, Dwarf_Die *inl, const char *name)
{
	struct call_line_count c = { 0 };
	struct row_key rows[MAX_COPY_ROWS];
	Dwarf_Files *files;
	Dwarf_Attribute a;
	Dwarf_Die o;
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	const char *file;
	int n = 0, m = 0, k, len = 0;

	if (!w->has_caller || !dwarf_attr(inl, DW_AT_abstract_origin, &a) ||
	    !dwarf_formref_die(&a, &o) || !dwarf_attr(inl, DW_AT_call_file, &a) ||
	    dwarf_formudata(&a, &c.file) || !dwarf_attr(inl, DW_AT_call_line, &a) ||
	    dwarf_formudata(&a, &c.line) || dwarf_getsrcfiles(w->cu, &files, NULL) ||
	    !(file = dwarf_filesrc(files, c.file, NULL, NULL)))
		return;
	c.origin = dwarf_dieoffset(&o);
	count_call_line(&w->caller, &c, 0);
	while ((off = dwarf_ranges(&w->caller, off, &base, &lo, &hi)) > 0 && n >= 0)
		n = rows_in(w->cu, lo, hi, rows, n, MAX_COPY_ROWS);
	if (n <= 0)
		return;
	qsort(rows, (size_t)n, sizeof(rows[0]), cmp_row_addr);
	/* The call line's rows only, then its copies: each return of the
	 * first position starts one. */
	for (k = 0; k < n; k++)
		if (rows[k].line == (int)c.line && rows[k].file && !strcmp(rows[k].file, file) &&
		    (!m || !same_key(&rows[m - 1], &rows[k])))
			rows[m++] = rows[k];
	for (k = 1, len = 1; k < m && !same_key(&rows[k], &rows[0]); k++)
		len++;
	if (len < 2 || m % len)
		return;
	for (k = len; k < m; k += len)
		if (!same_rows(&rows[k], rows, len))
			return;
	/* said by the call line's first instance only */
	if (m / len > c.n && c.first == dwarf_dieoffset(inl))
		cli_warn("%s: the call at %s:%d has %d copies of its code and %d inlined "
			 "cop%s of %s (an unrolled or vectorized loop computes the others with no "
			 "instruction of their own): their calls are not counted", name,
			 strrchr(file, '/') ? strrchr(file, '/') + 1 : file, (int)c.line, m / len,
			 c.n, c.n == 1 ? "y" : "ies", name);
}

/* An inlined copy whose code the compiler cloned into copies the tool
 * cannot tell apart (inline_copies()): probed at its entry, which runs
 * once per pass, not per call; said on stderr. */
static void unlike_copies(struct inl_walk *w, const char *name, Dwarf_Addr pc, int n)
{
	const char *caller = w->has_caller ? dwarf_diename(&w->caller) : NULL;

	cli_warn("%s: its inlined copy at 0x%llx%s%s holds copies of its code that are not "
		 "alike (its first line and column come back %d times over its ranges: code the "
		 "compiler duplicated, an unrolled or vectorized loop or a copied path): probed "
		 "at its entry, its calls there may be undercounted", name, (unsigned long long)pc,
		 caller ? " in " : "", caller ? caller : "", n);
}

/* Every DW_TAG_inlined_subroutine under die whose function matches one
 * of the globs, added to that glob's points. */
static void walk_inlines(Dwarf_Die *die, struct inl_walk *w, int depth)
{
	Dwarf_Die child;

	if (depth > 64 || dwarf_child(die, &child))
		return;
	do {
		int tag = dwarf_tag(&child);
		const char *name;
		Dwarf_Addr pc;

		if (tag == DW_TAG_inlined_subroutine && (name = dwarf_diename(&child)) &&
		    inline_entry(&child, &pc)) {
			Dwarf_Addr starts[16];
			int ncopies = -1000;	/* not looked at yet */

			for (int g = 0; g < w->nglobs; g++) {
				struct point *p;

				if (!function_named(&child, w->globs[g]) || w->n[g] == MAX_POINTS)
					continue;
				if (ncopies == -1000) {
					ncopies = inline_copies(w->cu, &child, starts, 16);
					if (ncopies < 0)
						unlike_copies(w, name, pc, -ncopies);
					else
						uncounted_calls(w, &child, name);
				}
				/* unrolled copies in one DIE: each copy's start
				 * instead of the entry, which runs once per pass */
				for (int c = 0; c < (ncopies > 0 ? ncopies : 1); c++) {
					p = add_point(w->pts[g], &w->n[g], ncopies > 0 ? starts[c] : pc,
						      w->cu);
					if (p) {
						snprintf(p->inlined_of, sizeof(p->inlined_of), "%s",
							 name);
						p->inl = child;
						p->has_inl = true;
					}
				}
			}
		}
		if (tag == DW_TAG_subprogram) {
			struct inl_walk in = *w;

			in.caller = child;
			in.has_caller = true;
			walk_inlines(&child, &in, depth + 1);
			continue;
		}
		if (tag == DW_TAG_inlined_subroutine ||
		    tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
		    tag == DW_TAG_class_type || tag == DW_TAG_structure_type)
			walk_inlines(&child, w, depth + 1);
	} while (!dwarf_siblingof(&child, &child));
}

/* The inlined copies of the functions matching each glob, added to that
 * glob's points: one walk over the object's DWARF for all of them. */
static void inline_points(struct dbg *d, const char *const *globs, int nglobs,
			  struct point (*pts)[MAX_POINTS], int *n)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	while (!dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;
		struct inl_walk w = { globs, nglobs, &cu, pts, n, { 0 }, false };

		if (dwarf_offdie(d->dw, off + hsize, &cu))
			walk_inlines(&cu, &w, 0);
		off = next;
	}
}

struct fn_query {
	const struct probe_spec *s;
	struct point *pts;
	int *n;
	Dwarf_Die *cu;
};

static int offer_function(Dwarf_Die *fn, void *arg)
{
	struct fn_query *q = arg;
	Dwarf_Addr entry, low, high;

	if (!function_named(fn, q->s->symbol) || dwarf_entrypc(fn, &entry))
		return DWARF_CB_OK;
	if (dwarf_lowpc(fn, &low) || dwarf_highpc(fn, &high))
		high = entry + 1;
	if (q->s->offset)
		add_point(q->pts, q->n, entry + q->s->offset, q->cu);
	else if (q->s->is_return)
		add_point(q->pts, q->n, entry, q->cu);
	else
		add_point(q->pts, q->n, after_prologue(q->cu, entry, high), q->cu);
	return DWARF_CB_OK;
}

/* The CU whose ranges hold pc. */
/* The unit holding pc: by .debug_aranges, else (clang emits none) by each
 * unit's own ranges. */
static bool cu_of(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *cu)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (dwarf_addrdie(d->dw, pc, cu))
		return true;
	while (!dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
		if (dwarf_offdie(d->dw, off + hsize, cu) && dwarf_haspc(cu, pc) > 0)
			return true;
		off = next;
	}
	return false;
}

/* Whether a line table's file name is the FILE a probe gives: the same
 * path, or one that ends with "/FILE". */
static bool same_source(const char *have, const char *want)
{
	size_t hl = strlen(have), wl = strlen(want);

	return !strcmp(have, want) ||
	       (hl > wl && have[hl - wl - 1] == '/' && !strcmp(have + hl - wl, want));
}

/* The function scope (out-of-line or inlined copy) holding pc, by DIE
 * offset; 0 when none. */
static Dwarf_Off function_at(Dwarf_Die *cu, Dwarf_Addr pc)
{
	Dwarf_Die *scopes = NULL;
	int ns = dwarf_getscopes(cu, pc, &scopes);
	Dwarf_Off fn = 0;

	for (int k = 0; k < ns; k++)
		if (dwarf_tag(&scopes[k]) == DW_TAG_subprogram ||
		    dwarf_tag(&scopes[k]) == DW_TAG_inlined_subroutine) {
			fn = dwarf_dieoffset(&scopes[k]);
			break;
		}
	free(scopes);
	return fn;
}

/* FILE:LINE: the lowest statement address of the line in each function
 * (or inlined copy) it is in. */
static void line_points(struct dbg *d, const struct probe_spec *s, struct point *pts, int *n)
{
	Dwarf_Addr best[MAX_POINTS];
	Dwarf_Off fns[MAX_POINTS], off = 0, next;
	Dwarf_Die cus[MAX_POINTS];
	size_t hsize;
	int nfn = 0;

	while (!dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;
		Dwarf_Lines *lines;
		size_t nl;

		if (!dwarf_offdie(d->dw, off + hsize, &cu) || dwarf_getsrclines(&cu, &lines, &nl))
			nl = 0;
		off = next;
		for (size_t i = 0; i < nl; i++) {
			Dwarf_Line *l = dwarf_onesrcline(lines, i);
			const char *file = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
			bool stmt = false, end = false;
			Dwarf_Addr a;
			Dwarf_Off fn;
			int ln = 0, k;

			if (!file || dwarf_lineno(l, &ln) || ln != (int)s->line ||
			    !same_source(file, s->symbol) || dwarf_lineaddr(l, &a))
				continue;
			dwarf_linebeginstatement(l, &stmt);
			dwarf_lineendsequence(l, &end);
			if (!stmt || end)
				continue;
			fn = function_at(&cu, a);
			for (k = 0; k < nfn && fns[k] != fn; k++)
				;
			if (k == nfn) {
				if (nfn == MAX_POINTS)
					bad("'%s': more than %d places", s->text, MAX_POINTS);
				fns[nfn] = fn;
				cus[nfn] = cu;
				best[nfn++] = a;
			} else if (a < best[k]) {
				best[k] = a;
			}
		}
	}
	for (int k = 0; k < nfn; k++)
		add_point(pts, n, best[k], &cus[k]);
}

/* The points of s in d's object, none when it has none. */
static void collect_points(struct dbg *d, const struct probe_spec *s, struct point *pts, int *n,
			   bool inlines)
{
	*n = 0;
	if (s->kind == SPEC_LINE) {
		line_points(d, s, pts, n);
	} else if (s->kind == SPEC_ADDRESS) {
		Dwarf_Die cu;

		if (cu_of(d, s->address, &cu))
			add_point(pts, n, s->address, &cu);
	} else if (s->kind == SPEC_SYMBOL) {
		Dwarf_Off off = 0, next;
		size_t hsize;

		while (!dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
			Dwarf_Die cu;
			struct fn_query q = { s, pts, n, &cu };

			if (dwarf_offdie(d->dw, off + hsize, &cu))
				dwarf_getfuncs(&cu, offer_function, &q, 0);
			off = next;
		}
		if (inlines && !s->offset && !s->is_return) {
			const char *glob = s->symbol;

			inline_points(d, &glob, 1, (struct point (*)[MAX_POINTS])pts, n);
		}
	}
}

static void find_points(struct dbg *d, const struct probe_spec *s, struct point *pts, int *n,
			bool inlines)
{
	if (s->kind != SPEC_LINE && s->kind != SPEC_ADDRESS && s->kind != SPEC_SYMBOL)
		bad("'%s': a tracepoint's arguments are arg1.. or its own names", s->text);
	collect_points(d, s, pts, n, inlines);
	if (!*n)
		bad("'%s': no such function or line in the debug information of %s", s->text, d->path);
}

/* The object of s opened in d and its points: the object s names; with
 * none, as the agent looks for a symbol, the main executable first, then
 * the libraries it needs (-- COMMAND) or the objects mapped (-p PID), the
 * first whose debug information has the function or line.  Exits with one
 * line, about the main executable, when none has it. */
static void open_points(const struct cli_opts *o, const struct probe_spec *s, struct dbg *d,
			struct point *pts, int *n, bool inlines)
{
	char path[PATH_MAX];
	char (*objs)[PATH_MAX];
	int nobjs;

	object_path(o, s, path, sizeof(path));
	if (!s->object[0] && (s->kind == SPEC_SYMBOL || s->kind == SPEC_LINE) &&
	    (o->command || o->pid)) {
		objs = calloc(MAX_CANDIDATE_OBJECTS, sizeof(*objs));
		if (!objs)
			bad("out of memory");
		nobjs = usdt_candidate_objects(o, s, objs, MAX_CANDIDATE_OBJECTS);
		for (int k = 0; k < nobjs; k++) {
			if (dbg_try_open(d, objs[k])) {
				dbg_close(d);
				continue;
			}
			collect_points(d, s, pts, n, inlines);
			if (*n) {
				free(objs);
				return;
			}
			dbg_close(d);
		}
		free(objs);
	}
	dbg_open(d, path);
	find_points(d, s, pts, n, inlines);
}

/* ---- variables at a point ---- */

static bool is_var_tag(int tag)
{
	return tag == DW_TAG_formal_parameter || tag == DW_TAG_variable;
}

/* The variables visible at pc, innermost scope first (a name shadowed by
 * an inner one is left out).  Returns how many; *scopes_out to free. */
static int vars_at(struct point *p, struct var *out, int max, Dwarf_Die **scopes_out,
		   bool params_only)
{
	Dwarf_Die *scopes = NULL;
	int ns = dwarf_getscopes(&p->cu, p->pc, &scopes), n = 0;
	int fn_scope = -1;

	for (int k = 0; k < ns; k++) {
		int tag = dwarf_tag(&scopes[k]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
			fn_scope = k;
			break;
		}
	}
	/* An inlined copy the compiler left no instruction of its own (an
	 * empty range at its entry) is not among the scopes of its entry
	 * address: its own variables are the point's, not the caller's. */
	if (p->has_inl && (fn_scope < 0 ||
			   dwarf_dieoffset(&scopes[fn_scope]) != dwarf_dieoffset(&p->inl))) {
		Dwarf_Die *own = realloc(scopes, sizeof(*own));

		if (!own)
			bad("out of memory");
		scopes = own;
		scopes[0] = p->inl;
		fn_scope = 0;
	}
	*scopes_out = scopes;
	if (fn_scope < 0)
		return 0;
	for (int k = params_only ? fn_scope : 0; k <= fn_scope; k++) {
		Dwarf_Die child;

		if (dwarf_child(&scopes[k], &child))
			continue;
		do {
			const char *name = dwarf_diename(&child);
			bool dup = false;

			if (!is_var_tag(dwarf_tag(&child)) || !name)
				continue;
			if (params_only && dwarf_tag(&child) != DW_TAG_formal_parameter)
				continue;
			for (int i = 0; i < n && !dup; i++)
				dup = !strcmp(out[i].name, name);
			if (dup || n == max)
				continue;
			out[n].name = name;
			out[n].die = child;
			out[n].fn = scopes[fn_scope];
			n++;
		} while (!dwarf_siblingof(&child, &child));
	}
	/* Parameters first, in declaration order, as gdb lists them. */
	return n;
}

/* ---- types ---- */

static bool type_of(Dwarf_Die *die, Dwarf_Die *type)
{
	Dwarf_Attribute attr;

	return dwarf_attr_integrate(die, DW_AT_type, &attr) && dwarf_formref_die(&attr, type);
}

/* Past typedefs and qualifiers; false for void. */
static bool strip(Dwarf_Die *t, Dwarf_Die *out)
{
	Dwarf_Die cur = *t;

	for (int guard = 0; guard < 32; guard++) {
		int tag = dwarf_tag(&cur);

		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type &&
		    tag != DW_TAG_volatile_type && tag != DW_TAG_restrict_type &&
		    tag != DW_TAG_atomic_type) {
			*out = cur;
			return true;
		}
		if (!type_of(&cur, &cur))
			return false;
	}
	return false;
}

static void type_name(Dwarf_Die *t, bool has, char *buf, size_t len)
{
	char inner[160];
	Dwarf_Die sub;
	const char *name = has ? dwarf_diename(t) : NULL;
	int tag = has ? dwarf_tag(t) : 0;
	Dwarf_Word count;

	if (!has) {
		snprintf(buf, len, "void");
		return;
	}
	switch (tag) {
	case DW_TAG_pointer_type:
	case DW_TAG_reference_type:
	case DW_TAG_const_type:
	case DW_TAG_volatile_type:
	case DW_TAG_array_type: {
		bool hs = type_of(t, &sub);

		type_name(&sub, hs, inner, sizeof(inner));
		if (tag == DW_TAG_pointer_type) {
			snprintf(buf, len, "%s *", inner);
		} else if (tag == DW_TAG_reference_type) {
			snprintf(buf, len, "%s &", inner);
		} else if (tag == DW_TAG_const_type || tag == DW_TAG_volatile_type) {
			const char *q = tag == DW_TAG_const_type ? "const" : "volatile";

			/* A qualified pointer (C++'s this: "Widget *const")
			 * reads after the star, anything else before. */
			if (hs && dwarf_tag(&sub) == DW_TAG_pointer_type)
				snprintf(buf, len, "%s %s", inner, q);
			else
				snprintf(buf, len, "%s %s", q, inner);
		} else {
			Dwarf_Die r;
			Dwarf_Attribute a;

			count = 0;
			if (!dwarf_child(t, &r) && dwarf_tag(&r) == DW_TAG_subrange_type) {
				if (dwarf_attr_integrate(&r, DW_AT_count, &a))
					dwarf_formudata(&a, &count);
				else if (dwarf_attr_integrate(&r, DW_AT_upper_bound, &a) &&
					 !dwarf_formudata(&a, &count))
					count++;
			}
			snprintf(buf, len, "%.140s[%llu]", inner, (unsigned long long)count);
		}
		return;
	}
	case DW_TAG_structure_type:
		snprintf(buf, len, "struct %s", name ? name : "<anonymous>");
		return;
	case DW_TAG_union_type:
		snprintf(buf, len, "union %s", name ? name : "<anonymous>");
		return;
	case DW_TAG_enumeration_type:
		snprintf(buf, len, "enum %s", name ? name : "<anonymous>");
		return;
	case DW_TAG_class_type:
		snprintf(buf, len, "class %s", name ? name : "<anonymous>");
		return;
	default:
		snprintf(buf, len, "%s", name ? name : "?");
	}
}

static Dwarf_Word type_size(Dwarf_Die *t)
{
	Dwarf_Word sz;

	return dwarf_aggregate_size(t, &sz) ? 0 : sz;
}

/* Whether the stripped type is a character (for char * and char[]). */
static bool is_char_type(Dwarf_Die *t)
{
	Dwarf_Attribute a;
	Dwarf_Word enc;

	if (dwarf_tag(t) != DW_TAG_base_type || type_size(t) != 1 ||
	    !dwarf_attr_integrate(t, DW_AT_encoding, &a) || dwarf_formudata(&a, &enc))
		return false;
	return enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char;
}

static enum arg_type int_type(Dwarf_Word size, bool sign)
{
	switch (size) {
	case 1: return sign ? ARG_S8 : ARG_U8;
	case 2: return sign ? ARG_S16 : ARG_U16;
	case 4: return sign ? ARG_S32 : ARG_U32;
	default: return sign ? ARG_S64 : ARG_U64;
	}
}

/* ---- fetch plans ---- */

static void put_op(struct access *x, enum fetch_kind kind, uint8_t reg, int64_t k, uint8_t size)
{
	struct fetch_op *op;

	if (x->a->nops == SPEC_MAX_OPS && x->soft_limit) {
		x->unavailable = true;
		return;
	}
	if (x->a->nops == SPEC_MAX_OPS)
		bad("'%s' needs more than %d steps to fetch", x->a->name, SPEC_MAX_OPS);
	/* Fold additions. */
	if (kind == FETCH_ADD && x->a->nops &&
	    (x->a->ops[x->a->nops - 1].kind == FETCH_ADD ||
	     x->a->ops[x->a->nops - 1].kind == FETCH_CONST)) {
		x->a->ops[x->a->nops - 1].k += k;
		return;
	}
	if (kind == FETCH_ADD && !k)
		return;
	op = &x->a->ops[x->a->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)kind;
	op->reg = reg;
	op->k = k;
	op->size = size;
}

static void unavailable(struct access *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void unavailable(struct access *x, const char *fmt, ...)
{
	va_list ap;

	x->unavailable = true;
	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
}

static bool op_caller_reg(struct access *x, unsigned int reg);

/* A general register's value (DWARF 0..KP_DWARF_PC, kp_arch.h); false for
 * vector registers.  In a caller's frame, the caller's register. */
static bool op_reg(struct access *x, unsigned int reg)
{
	if (x->caller)
		return op_caller_reg(x, reg);
	if (reg > KP_DWARF_PC) {
		unavailable(x, "in a vector register (DWARF register %u) here", reg);
		return false;
	}
	put_op(x, FETCH_REG, (uint8_t)reg, 0, 0);
	return true;
}

/* A value wholly in register reg: a general register, or the low bytes of
 * vector register 0..15 (x86-64: xmm0..xmm15, DWARF 17..32; arm64:
 * v0..v15, DWARF 64..79, kp_arch.h), where the compiler keeps float and
 * double locals; the agent reads those with kprobes_vector_reg(). */
#define DWARF_XMM0 KP_DWARF_VREG0
#define DWARF_XMM15 (KP_DWARF_VREG0 + 15)

static bool op_value_reg(struct access *x, unsigned int reg)
{
	if (reg >= DWARF_XMM0 && reg <= DWARF_XMM15) {
		put_op(x, FETCH_VREG, (uint8_t)(reg - DWARF_XMM0), 0, 0);
		return true;
	}
	return op_reg(x, reg);
}

/* The CFA at pc from the object's call frame information. */
static bool plan_cfa(struct dbg *d, Dwarf_Addr pc, struct access *x)
{
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops;
	size_t nops;
	bool ok = false;

	if (!d->cfi || dwarf_cfi_addrframe(d->cfi, pc, &frame) ||
	    dwarf_frame_cfa(frame, &ops, &nops)) {
		unavailable(x, "no call frame information at 0x%llx", (unsigned long long)pc);
		free(frame);
		return false;
	}
	if (nops == 1 && ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		ok = op_reg(x, ops[0].atom - DW_OP_breg0);
		put_op(x, FETCH_ADD, 0, (int64_t)ops[0].number, 0);
	} else if (nops == 1 && ops[0].atom == DW_OP_bregx) {
		ok = op_reg(x, (unsigned int)ops[0].number);
		put_op(x, FETCH_ADD, 0, (int64_t)ops[0].number2, 0);
	} else {
		unavailable(x, "a frame address the tool cannot compute");
	}
	free(frame);
	return ok;
}

static bool plan_expr(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *fn, Dwarf_Attribute *attr,
		      Dwarf_Op *ops, size_t n, struct access *x, int depth);

/* DW_OP_fbreg: the function's frame base, itself a location. */
static bool function_of(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *fn);

static bool plan_frame_base(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *fn, struct access *x,
			    int depth)
{
	Dwarf_Attribute attr;
	Dwarf_Op *ops;
	size_t n;
	struct access base = *x;
	Dwarf_Die outer;

	/* An inlined copy's DW_OP_fbreg is relative to the frame of the
	 * function it was inlined into: the out-of-line one holding pc. */
	if (dwarf_tag(fn) == DW_TAG_inlined_subroutine && function_of(d, pc, &outer))
		fn = &outer;
	if (depth > 2 || !dwarf_attr_integrate(fn, DW_AT_frame_base, &attr) ||
	    dwarf_getlocation_addr(&attr, pc, &ops, &n, 1) != 1) {
		unavailable(x, "no frame base here");
		return false;
	}
	base.in_memory = false;
	if (!plan_expr(d, pc, fn, &attr, ops, n, &base, depth + 1)) {
		*x = base;
		return false;
	}
	/* DW_OP_reg6 as a frame base means the register's value. */
	*x = base;
	x->in_memory = false;
	return true;
}

/* DWARF's binary operators that a plan has. */
static int binop_of(unsigned int atom)
{
	switch (atom) {
	case DW_OP_plus: return BINOP_ADD;
	case DW_OP_minus: return BINOP_SUB;
	case DW_OP_mul: return BINOP_MUL;
	case DW_OP_and: return BINOP_AND;
	case DW_OP_or: return BINOP_OR;
	case DW_OP_xor: return BINOP_XOR;
	case DW_OP_shl: return BINOP_SHL;
	case DW_OP_shr: return BINOP_SHR;
	case DW_OP_shra: return BINOP_SAR;
	default: return -1;
	}
}

static bool is_const_op(unsigned int atom)
{
	return atom == DW_OP_const1u || atom == DW_OP_const2u || atom == DW_OP_const4u ||
	       atom == DW_OP_const8u || atom == DW_OP_constu || atom == DW_OP_const1s ||
	       atom == DW_OP_const2s || atom == DW_OP_const4s || atom == DW_OP_const8s ||
	       atom == DW_OP_consts;
}

/* Whether pc is the first instruction of the out-of-line function that
 * holds it (where every register still has its value at the entry). */
static bool function_entry_at(struct dbg *d, Dwarf_Addr pc)
{
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Addr entry;
	bool at = false;
	int ns;

	if (!cu_of(d, pc, &cu))
		return false;
	ns = dwarf_getscopes(&cu, pc, &scopes);
	for (int k = 0; k < ns; k++)
		if (dwarf_tag(&scopes[k]) == DW_TAG_subprogram) {
			at = !dwarf_entrypc(&scopes[k], &entry) && entry == pc;
			break;
		}
	free(scopes);
	return at;
}

/* rbx, rbp, r12-r15 (DWARF numbers): what a function must give back. */
static bool callee_saved(unsigned int reg)
{
	return reg == 3 || reg == 6 || (reg >= 12 && reg <= 15);
}

/* The value register reg of the function's caller had, seen from pc in
 * the function, pushed: for a register the function must preserve (and
 * the return address column), the register itself while its rule is
 * "same value", else the load from its save slot (CFA + offset).  The
 * return address is read with the R step: a return probe on the function
 * has put its stub in that slot, and the plan must see the caller's
 * address it stands for. */
static bool plan_preserved_reg(struct dbg *d, Dwarf_Addr pc, Dwarf_Attribute *attr,
			       unsigned int reg, struct access *x)
{
	Dwarf_Op mem[3], *rops;
	Dwarf_Frame *frame = NULL;
	Dwarf_Addr start, end;
	bool signalp;
	size_t nr;
	bool ok = false;

	if (d->cfi && !dwarf_cfi_addrframe(d->cfi, pc, &frame) &&
	    !dwarf_frame_register(frame, (int)reg, mem, &rops, &nr)) {
		/* Same value: not changed yet.  A register the ABI says a
		 * function preserves is that too when the CFI has no rule
		 * for it (libdw says "undefined" then, unless its
		 * architecture backend supplied the ABI's initial rules):
		 * compilers write a rule only once they save it. */
		if (!nr && (!rops || (rops == mem && callee_saved(reg)))) {
			ok = op_reg(x, reg);
		} else if (nr && rops[nr - 1].atom != DW_OP_stack_value) {
			/* saved at an address: the CFA plus an offset */
			struct access at = *x;
			bool ret = dwarf_frame_info(frame, &start, &end, &signalp) == (int)reg;

			if (plan_expr(d, pc, NULL, attr, rops, nr, &at, 3) && at.in_memory) {
				*x = at;
				if (ret)
					put_op(x, FETCH_RET_ADDR, 0, 0, 0);
				else
					put_op(x, FETCH_LOAD, 0, 0, 8);
				ok = !x->unavailable;
			}
		}
	}
	free(frame);
	return ok;
}

/* A register of the caller's frame (x->caller): its stack pointer is the
 * CFA at the probe point, a preserved register is recovered as above, the
 * pc stays the probe's (static addresses are relative to it); the others
 * are the callee's to clobber, so lost. */
static bool op_caller_reg(struct access *x, unsigned int reg)
{
	const struct caller_frame *cf = x->caller;
	bool ok;

	x->caller = NULL;
	if (reg == KP_DWARF_SP) {
		ok = plan_cfa(cf->d, cf->callee_pc, x);
	} else if (reg == KP_DWARF_PC) {
		ok = op_reg(x, reg);
	} else if (callee_saved(reg)) {
		ok = plan_preserved_reg(cf->d, cf->callee_pc, cf->attr, reg, x);
		if (!ok)
			unavailable(x, "the caller's register %u is not known here", reg);
	} else {
		unavailable(x, "the caller's register %u is not known here", reg);
		ok = false;
	}
	x->caller = cf;
	return ok;
}

/* A call of the probed function found in the object's DWARF. */
struct call_site {
	Dwarf_Addr return_pc;
	Dwarf_Die caller;		/* the DW_TAG_subprogram making the call */
	Dwarf_Die site;
};

#define MAX_CALL_SITES 64
/* Plan steps left free after the cases of an entry value. */
#define CASE_RESERVE 8

/* What a call site's callee must be to be a call of the function: its
 * DIE, the DIEs it completes (abstract origin, specification), and its
 * name for a declaration in another unit. */
struct callee_match {
	Dwarf_Off offs[3];
	int noffs;
	const char *name;		/* linkage name, else name; NULL: none */
	struct call_site *sites;
	int nsites;
	bool truncated;
};

static bool is_call_site(int tag)
{
	return tag == DW_TAG_call_site || tag == DW_TAG_GNU_call_site;
}

static bool callee_is(Dwarf_Die *site, const struct callee_match *m)
{
	Dwarf_Attribute attr;
	Dwarf_Die origin, more;
	const char *name;

	if (!dwarf_attr(site, DW_AT_call_origin, &attr) &&
	    !dwarf_attr(site, DW_AT_abstract_origin, &attr))
		return false;	/* an indirect call: its target is not known here */
	if (!dwarf_formref_die(&attr, &origin))
		return false;
	for (int k = 0; k < m->noffs; k++)
		if (dwarf_dieoffset(&origin) == m->offs[k])
			return true;
	if ((dwarf_attr(&origin, DW_AT_abstract_origin, &attr) ||
	     dwarf_attr(&origin, DW_AT_specification, &attr)) &&
	    dwarf_formref_die(&attr, &more))
		for (int k = 0; k < m->noffs; k++)
			if (dwarf_dieoffset(&more) == m->offs[k])
				return true;
	/* A declaration in the caller's unit of a function defined in
	 * another: the same external name. */
	name = linkage_name(&origin);
	return m->name && dwarf_hasattr(&origin, DW_AT_declaration) && name &&
	       !strcmp(name, m->name);
}

static void collect_call_sites(Dwarf_Die *die, Dwarf_Die *caller, struct callee_match *m,
			       int depth)
{
	Dwarf_Die child;

	if (depth > 64 || dwarf_child(die, &child))
		return;
	do {
		int tag = dwarf_tag(&child);
		Dwarf_Attribute attr;
		Dwarf_Addr ret;
		bool tail;

		if (tag == DW_TAG_subprogram) {
			collect_call_sites(&child, &child, m, depth + 1);
			continue;
		}
		if (!is_call_site(tag)) {
			if (dwarf_haschildren(&child))
				collect_call_sites(&child, caller, m, depth + 1);
			continue;
		}
		/* A tail call returns to its caller's caller: the return
		 * address does not name it. */
		tail = dwarf_hasattr(&child, DW_AT_call_tail_call) ||
		       dwarf_hasattr(&child, DW_AT_GNU_tail_call);
		if (tail || !caller || !callee_is(&child, m))
			continue;
		if (dwarf_attr(&child, DW_AT_call_return_pc, &attr)) {
			if (dwarf_formaddr(&attr, &ret))
				continue;
		} else if (dwarf_lowpc(&child, &ret)) {
			continue;	/* DW_TAG_GNU_call_site: low_pc is the return */
		}
		if (m->nsites == MAX_CALL_SITES) {
			m->truncated = true;
			return;
		}
		m->sites[m->nsites].return_pc = ret;
		m->sites[m->nsites].caller = *caller;
		m->sites[m->nsites++].site = child;
	} while (!dwarf_siblingof(&child, &child));
}

/* The out-of-line function holding pc (scopes are innermost first). */
/* The DW_TAG_subprogram with code at pc under die (a unit, a namespace,
 * a class). */
static bool subprogram_at(Dwarf_Die *die, Dwarf_Addr pc, Dwarf_Die *fn, int depth)
{
	Dwarf_Die child;

	if (depth > 16 || dwarf_child(die, &child))
		return false;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_subprogram && dwarf_haspc(&child, pc) > 0) {
			*fn = child;
			return true;
		}
		if ((tag == DW_TAG_namespace || tag == DW_TAG_structure_type ||
		     tag == DW_TAG_class_type) && subprogram_at(&child, pc, fn, depth + 1))
			return true;
	} while (!dwarf_siblingof(&child, &child));
	return false;
}

static bool function_of(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *fn)
{
	Dwarf_Die cu, *scopes = NULL;
	bool found = false;
	int ns;

	if (!cu_of(d, pc, &cu))
		return false;
	ns = dwarf_getscopes(&cu, pc, &scopes);
	for (int k = ns - 1; k >= 0 && !found; k--)
		if (dwarf_tag(&scopes[k]) == DW_TAG_subprogram) {
			*fn = scopes[k];
			found = true;
		}
	free(scopes);
	/* Inside an inlined copy the scopes go on with those of its
	 * abstract definition, not of the function it was inlined into. */
	return found || subprogram_at(&cu, pc, fn, 0);
}

/* The direct, non-tail calls of the function holding pc, over every unit
 * of the object. */
static int call_sites_of(struct dbg *d, Dwarf_Addr pc, struct call_site *sites)
{
	struct callee_match m = { .sites = sites };
	Dwarf_Attribute attr;
	Dwarf_Die fn, more;
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (!function_of(d, pc, &fn))
		return 0;
	m.offs[m.noffs++] = dwarf_dieoffset(&fn);
	if (dwarf_attr(&fn, DW_AT_abstract_origin, &attr) && dwarf_formref_die(&attr, &more))
		m.offs[m.noffs++] = dwarf_dieoffset(&more);
	if (dwarf_attr(&fn, DW_AT_specification, &attr) && dwarf_formref_die(&attr, &more))
		m.offs[m.noffs++] = dwarf_dieoffset(&more);
	if (dwarf_hasattr_integrate(&fn, DW_AT_external))
		m.name = linkage_name(&fn);
	while (!dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(d->dw, off + hsize, &cu))
			collect_call_sites(&cu, NULL, &m, 0);
		off = next;
	}
	return m.truncated ? -1 : m.nsites;
}

/* The value a call site passes in register reg (its
 * DW_TAG_call_site_parameter), compiled in the caller's frame onto x as
 * one case: false, with x unchanged, when it passes none or the tool
 * cannot compute it there. */
static bool plan_call_site_value(struct dbg *d, Dwarf_Addr pc, Dwarf_Attribute *attr,
				 const struct call_site *cs, unsigned int reg, struct access *x)
{
	struct caller_frame cf = { .d = d, .callee_pc = pc, .attr = attr };
	Dwarf_Die param;
	uint8_t nops = x->a->nops;

	if (dwarf_child((Dwarf_Die *)&cs->site, &param))
		return false;
	do {
		Dwarf_Attribute la, va;
		Dwarf_Op *lops, *vops;
		size_t nl, nv;
		unsigned int preg;
		struct access alt;

		if (dwarf_tag(&param) != DW_TAG_call_site_parameter &&
		    dwarf_tag(&param) != DW_TAG_GNU_call_site_parameter)
			continue;
		if (!dwarf_attr(&param, DW_AT_location, &la) ||
		    dwarf_getlocation(&la, &lops, &nl) || nl != 1)
			continue;
		if (lops[0].atom >= DW_OP_reg0 && lops[0].atom <= DW_OP_reg31)
			preg = lops[0].atom - DW_OP_reg0;
		else if (lops[0].atom == DW_OP_regx)
			preg = (unsigned int)lops[0].number;
		else
			continue;
		if (preg != reg)
			continue;
		if ((!dwarf_attr(&param, DW_AT_call_value, &va) &&
		     !dwarf_attr(&param, DW_AT_GNU_call_site_value, &va)) ||
		    dwarf_getlocation(&va, &vops, &nv) || !nv)
			return false;
		/* The key: the return address, relative to the probe's ip
		 * like a static address (the load bias cancels out). */
		put_op(x, FETCH_CASE, 0, (int64_t)(cs->return_pc - pc - 1), 0);
		alt = *x;
		alt.caller = &cf;
		alt.unavailable = false;
		/* In the caller, at its call instruction (the return address
		 * may already be another line's or range's). */
		if (plan_expr(d, cs->return_pc - 1, (Dwarf_Die *)&cs->caller, &va, vops, nv, &alt,
			      0) && !alt.unavailable) {
			x->a->nops = alt.a->nops;
			return true;
		}
		break;
	} while (!dwarf_siblingof(&param, &param));
	x->a->nops = nops;
	return false;
}

/* DW_OP_entry_value(DW_OP_regN) where the function has reused register N
 * (an argument register), as gdb does it: the caller's call site for the
 * return address found at the hit gives the value it passed, computed in
 * the caller's frame.  The plan computes the return address and picks
 * among the object's call sites of the function (cases); at a call from
 * elsewhere (another object, an indirect or a tail call), or one whose
 * value the tool cannot compute, it is unavailable, as gdb says. */
static bool plan_entry_from_callers(struct dbg *d, Dwarf_Addr pc, Dwarf_Attribute *attr,
				    unsigned int reg, struct access *x)
{
	struct call_site sites[MAX_CALL_SITES];
	Dwarf_Frame *frame = NULL;
	Dwarf_Addr start, end;
	bool signalp;
	int ra, n, found = 0;
	uint8_t nops = x->a->nops;
	bool soft = x->soft_limit;

	n = call_sites_of(d, pc, sites);
	if (n <= 0 || !d->cfi || dwarf_cfi_addrframe(d->cfi, pc, &frame))
		goto none;
	ra = dwarf_frame_info(frame, &start, &end, &signalp);
	free(frame);
	frame = NULL;
	x->soft_limit = true;
	if (ra < 0 || !plan_preserved_reg(d, pc, attr, (unsigned int)ra, x) || x->unavailable)
		goto none;
	put_op(x, FETCH_REG, KP_DWARF_PC, 0, 0);
	put_op(x, FETCH_BINOP, 0, BINOP_SUB, 0);
	/* Room kept for what follows the cases (the rest of the location,
	 * fields, indexes, a final load): call sites that do not fit are
	 * left out, their calls then print as optimized out. */
	for (int k = 0; k < n && !x->unavailable; k++) {
		uint8_t before = x->a->nops;

		if (!plan_call_site_value(d, pc, attr, &sites[k], reg, x))
			continue;
		if (x->a->nops + 1 > SPEC_MAX_OPS - CASE_RESERVE) {
			x->a->nops = before;
			break;
		}
		found++;
	}
	if (found && !x->unavailable && x->a->nops < SPEC_MAX_OPS) {
		put_op(x, FETCH_JOIN, 0, 0, 0);
		x->soft_limit = soft;
		return true;
	}
none:
	x->a->nops = nops;
	x->unavailable = false;
	x->soft_limit = soft;
	return false;
}

/* DW_OP_entry_value(DW_OP_regN): the value register N had when the
 * function was entered, pushed.  At the function's first instruction it is
 * the register.  Elsewhere the call frame information knows it for a
 * register the function must preserve: the caller's value, still in the
 * register ("same value") or saved in the frame.  An argument register
 * the function has reused is found in the caller's call-site information
 * (plan_entry_from_callers()), when it is the first step of the
 * location. */
static bool plan_entry_value(struct dbg *d, Dwarf_Addr pc, Dwarf_Attribute *attr, Dwarf_Op *op,
			     struct access *x, bool first)
{
	Dwarf_Attribute ea;
	Dwarf_Op *sub;
	size_t ns;
	unsigned int reg;
	bool ok = false;

	if (x->caller) {
		unavailable(x, "the caller's own value at its entry");
		return false;
	}
	if (dwarf_getlocation_attr(attr, op, &ea) || dwarf_getlocation(&ea, &sub, &ns) != 0 ||
	    ns != 1 || !((sub[0].atom >= DW_OP_reg0 && sub[0].atom <= DW_OP_reg31) ||
			 sub[0].atom == DW_OP_regx)) {
		unavailable(x, "only its value at the function's entry is known here");
		return false;
	}
	reg = sub[0].atom == DW_OP_regx ? (unsigned int)sub[0].number :
					  (unsigned int)(sub[0].atom - DW_OP_reg0);
	if (function_entry_at(d, pc))
		return op_reg(x, reg);
	if (callee_saved(reg))
		ok = plan_preserved_reg(d, pc, attr, reg, x);
	if (!ok && first)
		ok = plan_entry_from_callers(d, pc, attr, reg, x);
	if (!ok)
		unavailable(x, "only its value at the function's entry is known here (DWARF "
			    "register %u, reused since, and no call site of the function gives it)",
			    reg);
	x->in_memory = true;
	return ok;
}

/* Compiles a location expression into plan steps: DWARF's stack machine
 * maps onto the plan's (registers, constants, the frame base and CFA,
 * arithmetic, loads, DW_OP_stack_value); a value wholly in one register is
 * that register.  What has no equivalent (values known only at the entry,
 * static storage, several pieces) makes the value unavailable, saying why. */
static bool plan_expr(struct dbg *d, Dwarf_Addr pc, Dwarf_Die *fn, Dwarf_Attribute *attr,
		      Dwarf_Op *ops, size_t n, struct access *x, int depth)
{
	int sp = 0;

	x->in_memory = true;
	if (n && ((ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31) ||
		  ops[0].atom == DW_OP_regx)) {
		if (n > 1 && !(n == 2 && ops[1].atom == DW_OP_piece))
			goto unsupported;
		x->in_memory = false;
		return op_value_reg(x, ops[0].atom == DW_OP_regx ? (unsigned int)ops[0].number :
								   (unsigned int)(ops[0].atom - DW_OP_reg0));
	}
	for (size_t i = 0; i < n; i++) {
		unsigned int atom = ops[i].atom;
		int bop = binop_of(atom);

		if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31) {
			if (!op_reg(x, atom - DW_OP_breg0))
				return false;
			put_op(x, FETCH_ADD, 0, (int64_t)ops[i].number, 0);
			sp++;
		} else if (atom == DW_OP_bregx) {
			if (!op_reg(x, (unsigned int)ops[i].number))
				return false;
			put_op(x, FETCH_ADD, 0, (int64_t)ops[i].number2, 0);
			sp++;
		} else if (atom == DW_OP_fbreg) {
			if (!plan_frame_base(d, pc, fn, x, depth))
				return false;
			x->in_memory = true;
			put_op(x, FETCH_ADD, 0, (int64_t)ops[i].number, 0);
			sp++;
		} else if (atom == DW_OP_call_frame_cfa) {
			if (!plan_cfa(d, pc, x))
				return false;
			sp++;
		} else if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31) {
			put_op(x, FETCH_CONST, 0, atom - DW_OP_lit0, 0);
			sp++;
		} else if (is_const_op(atom)) {
			put_op(x, FETCH_CONST, 0, (int64_t)ops[i].number, 0);
			sp++;
		} else if (atom == DW_OP_plus_uconst && sp >= 1) {
			put_op(x, FETCH_ADD, 0, (int64_t)ops[i].number, 0);
		} else if ((atom == DW_OP_neg || atom == DW_OP_not) && sp >= 1) {
			put_op(x, FETCH_CONST, 0, -1, 0);
			put_op(x, FETCH_BINOP, 0, atom == DW_OP_neg ? BINOP_MUL : BINOP_XOR, 0);
			if (sp + 1 > SPEC_PLAN_DEPTH)
				goto unsupported;
		} else if (bop >= 0 && sp >= 2) {
			put_op(x, FETCH_BINOP, 0, bop, 0);
			sp--;
		} else if (atom == DW_OP_deref && sp >= 1) {
			put_op(x, FETCH_LOAD, 0, 0, 8);
		} else if (atom == DW_OP_deref_size && sp >= 1 &&
			   (ops[i].number == 1 || ops[i].number == 2 || ops[i].number == 4 ||
			    ops[i].number == 8)) {
			put_op(x, FETCH_LOAD, 0, 0, (uint8_t)ops[i].number);
		} else if (atom == DW_OP_stack_value && sp == 1 && i + 1 == n) {
			x->in_memory = false;
			return true;
		} else if (atom == DW_OP_piece && i + 1 == n && sp == 1) {
			break;
		} else if (atom == DW_OP_entry_value || atom == DW_OP_GNU_entry_value) {
			if (!plan_entry_value(d, pc, attr, &ops[i], x, sp == 0 && depth == 0))
				return false;
			sp++;
		} else if (atom == DW_OP_addr || atom == DW_OP_addrx || atom == DW_OP_GNU_addr_index) {
			/* Static storage, at a link-time address (DWARF 5: an
			 * index into .debug_addr): relative to the probe's own
			 * (a pre_handler's ip is the probe's address + 1), so
			 * the load bias cancels out. */
			Dwarf_Attribute aa;
			Dwarf_Addr addr = ops[i].number;

			if (atom != DW_OP_addr &&
			    (dwarf_getlocation_attr(attr, &ops[i], &aa) || dwarf_formaddr(&aa, &addr))) {
				unavailable(x, "an address the tool cannot read");
				return false;
			}
			/* (in a caller's frame, relative to the callee's
			 * probe all the same) */
			if (!op_reg(x, KP_DWARF_PC))
				return false;
			put_op(x, FETCH_ADD, 0,
			       (int64_t)(addr - (x->caller ? x->caller->callee_pc : pc) - 1), 0);
			sp++;
		} else {
			unavailable(x, "a location the tool cannot compute (DW_OP 0x%x)", atom);
			return false;
		}
		if (sp > SPEC_PLAN_DEPTH)
			goto unsupported;
	}
	if (sp != 1)
		goto unsupported;
	return true;
unsupported:
	unavailable(x, "a location the tool cannot compute");
	return false;
}

/* A composite location (DW_OP_piece after each part) into x's pieces;
 * false when the location is not one (or has bit pieces). */
static bool split_pieces(struct access *x, Dwarf_Op *ops, size_t n)
{
	size_t from = 0;
	Dwarf_Word at = 0;
	bool any = false;

	for (size_t i = 0; i < n; i++)
		any |= ops[i].atom == DW_OP_piece;
	if (!any)
		return false;
	x->npieces = 0;
	for (size_t i = 0; i < n; i++) {
		struct piece *pc;

		if (ops[i].atom == DW_OP_bit_piece)
			goto odd;
		if (ops[i].atom != DW_OP_piece)
			continue;
		if (x->npieces == (int)(sizeof(x->pieces) / sizeof(x->pieces[0])))
			goto odd;
		pc = &x->pieces[x->npieces++];
		pc->start = at;
		pc->size = ops[i].number;
		pc->ops = ops + from;
		pc->n = i - from;
		at += ops[i].number;
		from = i + 1;
	}
	if (from == n)
		return true;
odd:
	x->npieces = 0;
	unavailable(x, "a composite location the tool cannot compute");
	return true;
}

/* The variable's location at pc into x (register value or address). */
static void plan_var(struct dbg *d, struct point *p, struct var *v, struct access *x)
{
	Dwarf_Attribute attr;
	Dwarf_Op *ops;
	size_t n;
	int rc;

	x->has_type = type_of(&v->die, &x->type);
	if (dwarf_attr_integrate(&v->die, DW_AT_const_value, &attr)) {
		Dwarf_Sword sv;

		if (dwarf_formsdata(&attr, &sv)) {
			unavailable(x, "a constant the tool cannot read");
			return;
		}
		put_op(x, FETCH_CONST, 0, (int64_t)sv, 0);
		x->in_memory = false;
		return;
	}
	if (!dwarf_attr_integrate(&v->die, DW_AT_location, &attr)) {
		unavailable(x, "optimized out");
		return;
	}
	rc = dwarf_getlocation_addr(&attr, p->pc, &ops, &n, 1);
	if (rc <= 0) {
		unavailable(x, "optimized out at this point");
		return;
	}
	if (split_pieces(x, ops, n)) {
		x->d = d;
		x->pc = p->pc;
		x->fn = v->fn;
		x->attr = attr;
		return;
	}
	plan_expr(d, p->pc, &v->fn, &attr, ops, n, x, 0);
}

/* Plans the piece of a composite location that holds bytes [off,
 * off+size) of the variable: the value there (a register's, shifted down
 * to them) or its address.  False, with the reason, when no one piece
 * holds them all or that piece is optimized out. */
static bool plan_piece(struct access *x, Dwarf_Word off, Dwarf_Word size)
{
	const struct piece *pc = NULL;

	for (int i = 0; i < x->npieces && !pc; i++)
		if (off >= x->pieces[i].start && off + size <= x->pieces[i].start + x->pieces[i].size)
			pc = &x->pieces[i];
	x->npieces = 0;
	if (!pc) {
		unavailable(x, "spread over several pieces (registers or slots) here");
		return false;
	}
	if (!pc->n) {
		unavailable(x, "optimized out at this point (part of a composite)");
		return false;
	}
	if (!plan_expr(x->d, x->pc, &x->fn, &x->attr, pc->ops, pc->n, x, 0))
		return false;
	if (x->in_memory) {
		put_op(x, FETCH_ADD, 0, (int64_t)(off - pc->start), 0);
	} else if (off > pc->start) {
		put_op(x, FETCH_CONST, 0, (int64_t)(off - pc->start) * 8, 0);
		put_op(x, FETCH_BINOP, 0, BINOP_SHR, 0);
	}
	return true;
}

/* A composite location used as a whole (a scalar, a pointer followed,
 * an array indexed): the piece that holds all of it. */
static void whole_piece(struct access *x)
{
	Dwarf_Die t;
	Dwarf_Word size;

	if (!x->npieces)
		return;
	if (!x->has_type || !strip(&x->type, &t) || !(size = type_size(&t))) {
		x->npieces = 0;
		unavailable(x, "a composite location the tool cannot compute");
		return;
	}
	plan_piece(x, 0, size);
}

/* Turns an address plan into the value plan of the pointer there. */
static void materialize(struct access *x, uint8_t size)
{
	if (x->in_memory)
		put_op(x, FETCH_LOAD, 0, 0, size);
	x->in_memory = false;
}

static bool find_member(Dwarf_Die *st, const char *name, size_t len, Dwarf_Die *m)
{
	if (dwarf_child(st, m))
		return false;
	do {
		const char *mn = dwarf_diename(m);

		if (dwarf_tag(m) == DW_TAG_member && mn && strlen(mn) == len &&
		    !strncmp(mn, name, len))
			return true;
	} while (!dwarf_siblingof(m, m));
	return false;
}

/* The bit offset of a bit-field from the start of its struct: DWARF 4's
 * DW_AT_data_bit_offset, or DWARF 2's DW_AT_bit_offset, counted from the
 * most significant bit of a DW_AT_byte_size unit at the member's
 * location (x86-64 is little-endian). */
static bool bitfield_offset(Dwarf_Die *m, Dwarf_Word bit_size, Dwarf_Word loc, Dwarf_Word *bits)
{
	Dwarf_Attribute a;
	Dwarf_Word v, unit;

	if (dwarf_attr_integrate(m, DW_AT_data_bit_offset, &a))
		return !dwarf_formudata(&a, bits);
	if (!dwarf_attr_integrate(m, DW_AT_bit_offset, &a) || dwarf_formudata(&a, &v))
		return false;
	if (!dwarf_attr_integrate(m, DW_AT_byte_size, &a) || dwarf_formudata(&a, &unit)) {
		Dwarf_Die t, st;

		if (!type_of(m, &t) || !strip(&t, &st) || !(unit = type_size(&st)))
			return false;
	}
	if (v + bit_size > unit * 8)
		return false;
	*bits = loc * 8 + unit * 8 - v - bit_size;
	return true;
}

/* A bit-field: the plan holds the struct's address + the member's byte
 * location (DW_AT_data_member_location, 0 with DW_AT_data_bit_offset);
 * it becomes the smallest load that holds the field's bits, shifted up
 * to bit 63 and back down, arithmetically for a signed field. */
static void step_bitfield(struct access *x, const char *expr, Dwarf_Die *m, Dwarf_Word loc,
			  const char *f, size_t len)
{
	Dwarf_Attribute a;
	Dwarf_Word bsize, bits, first, shift;
	Dwarf_Die t;
	bool sign = false;
	uint8_t size;

	if (dwarf_formudata(dwarf_attr_integrate(m, DW_AT_bit_size, &a), &bsize) || !bsize ||
	    bsize > 57 || !bitfield_offset(m, bsize, loc, &bits))
		bad("'%s': bit-field '%.*s' has a layout the tool cannot read", expr, (int)len, f);
	/* The plan is at the member's byte location: start at the byte
	 * that holds the field's first bit. */
	first = bits / 8;
	shift = bits % 8;
	size = shift + bsize <= 8 ? 1 : shift + bsize <= 16 ? 2 : shift + bsize <= 32 ? 4 : 8;
	if (x->has_type && strip(&x->type, &t)) {
		Dwarf_Attribute ea;
		Dwarf_Word enc = 0;

		if (dwarf_tag(&t) == DW_TAG_base_type &&
		    dwarf_attr_integrate(&t, DW_AT_encoding, &ea) && !dwarf_formudata(&ea, &enc))
			sign = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
	}
	put_op(x, FETCH_ADD, 0, (int64_t)first - (int64_t)loc, 0);
	put_op(x, FETCH_LOAD, 0, 0, size);
	put_op(x, FETCH_CONST, 0, (int64_t)(64 - shift - bsize), 0);
	put_op(x, FETCH_BINOP, 0, BINOP_SHL, 0);
	put_op(x, FETCH_CONST, 0, (int64_t)(64 - bsize), 0);
	put_op(x, FETCH_BINOP, 0, sign ? BINOP_SAR : BINOP_SHR, 0);
	x->in_memory = false;
	x->bitfield = true;
}

static void step_field(struct access *x, const char *expr, const char *f, size_t len, bool arrow)
{
	Dwarf_Die t, m;
	Dwarf_Attribute a;
	Dwarf_Word off = 0;
	char tn[256];

	if (!x->has_type || !strip(&x->type, &t))
		bad("'%s': %.*s is not a struct (type void)", expr, (int)(f - expr) - (arrow ? 2 : 1),
		    expr);
	if (arrow) {
		whole_piece(x);
		if (x->unavailable)
			return;
		type_name(&x->type, true, tn, sizeof(tn));
		if (dwarf_tag(&t) != DW_TAG_pointer_type)
			bad("'%s': '->%.*s' needs a pointer to a struct, not %s", expr, (int)len, f, tn);
		materialize(x, 8);
		x->in_memory = true;
		x->has_type = type_of(&t, &x->type);
		if (!x->has_type || !strip(&x->type, &t))
			bad("'%s': '->%.*s' needs a pointer to a struct, not %s", expr, (int)len, f,
			    tn);
	}
	type_name(&t, true, tn, sizeof(tn));
	if (dwarf_tag(&t) != DW_TAG_structure_type && dwarf_tag(&t) != DW_TAG_union_type &&
	    dwarf_tag(&t) != DW_TAG_class_type)
		bad("'%s': '%s%.*s': not a struct or union (type %s)", expr, arrow ? "->" : ".",
		    (int)len, f, tn);
	if (!find_member(&t, f, len, &m))
		bad("'%s': %s has no field '%.*s'", expr, tn, (int)len, f);
	if (dwarf_attr_integrate(&m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &off))
		bad("'%s': field '%.*s' has a computed location (not supported)", expr, (int)len, f);
	if (x->npieces && !arrow) {
		/* A struct in pieces: the field's piece. */
		Dwarf_Die mt, ms;
		Dwarf_Word msize = type_of(&m, &mt) && strip(&mt, &ms) ? type_size(&ms) : 0;

		if (dwarf_attr_integrate(&m, DW_AT_bit_size, &a) || !msize) {
			x->npieces = 0;
			unavailable(x, "a field of a struct held in pieces the tool cannot read");
			return;
		}
		x->has_type = type_of(&m, &x->type);
		plan_piece(x, off, msize);
		return;
	}
	if (!x->in_memory)
		bad("'%s': the struct is held in registers here: its fields cannot be read", expr);
	put_op(x, FETCH_ADD, 0, (int64_t)off, 0);
	x->has_type = type_of(&m, &x->type);
	if (dwarf_attr_integrate(&m, DW_AT_bit_size, &a))
		step_bitfield(x, expr, &m, off, f, len);
}

static void step_index(struct access *x, const char *expr, unsigned long idx)
{
	Dwarf_Die t, elem;
	char tn[256];
	Dwarf_Word esz;

	whole_piece(x);
	if (x->unavailable)
		return;
	type_name(&x->type, x->has_type, tn, sizeof(tn));
	if (!x->has_type || !strip(&x->type, &t) ||
	    (dwarf_tag(&t) != DW_TAG_array_type && dwarf_tag(&t) != DW_TAG_pointer_type))
		bad("'%s': [%lu] needs an array or a pointer, not %s", expr, idx, tn);
	if (!type_of(&t, &elem) || !(esz = type_size(&elem)))
		bad("'%s': cannot index %s (element size unknown)", expr, tn);
	if (dwarf_tag(&t) == DW_TAG_pointer_type)
		materialize(x, 8);
	else if (!x->in_memory)
		bad("'%s': the array is held in registers here", expr);
	put_op(x, FETCH_ADD, 0, (int64_t)(idx * esz), 0);
	x->in_memory = true;
	x->type = elem;
}

static void step_deref(struct access *x, const char *expr)
{
	Dwarf_Die t;
	char tn[256];

	whole_piece(x);
	if (x->unavailable)
		return;
	type_name(&x->type, x->has_type, tn, sizeof(tn));
	if (!x->has_type || !strip(&x->type, &t) || dwarf_tag(&t) != DW_TAG_pointer_type)
		bad("'%s': * needs a pointer, not %s", expr, tn);
	materialize(x, 8);
	x->in_memory = true;
	x->has_type = type_of(&t, &x->type);
	if (!x->has_type)
		bad("'%s': cannot read through a void *: give a field or a cast type", expr);
}

static bool has_negative_enumerator(Dwarf_Die *t)
{
	Dwarf_Die e;
	Dwarf_Attribute a;
	Dwarf_Sword v;

	if (dwarf_child(t, &e))
		return false;
	do {
		if (dwarf_tag(&e) == DW_TAG_enumerator &&
		    dwarf_attr_integrate(&e, DW_AT_const_value, &a) &&
		    a.form != DW_FORM_udata && !dwarf_formsdata(&a, &v) && v < 0)
			return true;
	} while (!dwarf_siblingof(&e, &e));
	return false;
}

/* The enumerators of an enum type, for printing values by name: kept
 * for the whole session (the output reads them), NULL without any. */
static const struct spec_enum *enum_names(Dwarf_Die *t)
{
	struct spec_enum *en;
	int64_t *values;
	const char **names;
	Dwarf_Die e;
	int n = 0, cap = 0;

	if (dwarf_child(t, &e))
		return NULL;
	do
		cap += dwarf_tag(&e) == DW_TAG_enumerator;
	while (!dwarf_siblingof(&e, &e));
	en = calloc(1, sizeof(*en));
	values = calloc((size_t)cap + 1, sizeof(*values));
	names = calloc((size_t)cap + 1, sizeof(*names));
	if (!en || !values || !names || dwarf_child(t, &e))
		cli_die(EXIT_FAIL, "out of memory");
	do {
		Dwarf_Attribute a;
		Dwarf_Sword v;
		const char *name = dwarf_diename(&e);

		if (dwarf_tag(&e) != DW_TAG_enumerator || !name || n == cap ||
		    !dwarf_attr_integrate(&e, DW_AT_const_value, &a) || dwarf_formsdata(&a, &v))
			continue;
		values[n] = (int64_t)v;
		names[n] = strdup(name);
		if (!names[n++])
			cli_die(EXIT_FAIL, "out of memory");
	} while (!dwarf_siblingof(&e, &e));
	en->n = n;
	en->values = values;
	en->names = names;
	return en;
}

/* The value's final load and its type, from DWARF unless given. */
static void finish(struct access *x, const char *expr, bool report)
{
	struct spec_arg *a = x->a;
	Dwarf_Die t;
	Dwarf_Attribute at;
	Dwarf_Word enc = 0, size;
	enum arg_type type = ARG_X64;
	char tn[256];
	int tag;

	if (!x->has_type || !strip(&x->type, &t))
		bad("'%s' has no type (void)", expr);
	tag = dwarf_tag(&t);
	if (x->npieces && (tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
			   tag == DW_TAG_class_type || tag == DW_TAG_array_type)) {
		x->npieces = 0;
		if (!report)
			unavailable(x, "held in several pieces (registers or slots) here");
	}
	whole_piece(x);
	size = type_size(&t);
	type_name(&x->type, true, tn, sizeof(tn));
	if (tag == DW_TAG_array_type) {
		Dwarf_Die elem, se;

		if (!x->in_memory)
			bad("'%s': the array is held in registers here", expr);
		if (type_of(&t, &elem) && strip(&elem, &se) && is_char_type(&se))
			type = ARG_STRING;
		else if (report)
			bad("'%s' is an array (%s): name an element with [N]", expr, tn);
		else
			type = ARG_X64;	/* $vars: the array's address */
		x->in_memory = false;
	} else if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
		   tag == DW_TAG_class_type) {
		if (report)
			bad("'%s' is a %s: name a field with . or ->", expr, tn);
		if (!x->in_memory)
			unavailable(x, "a %s held in registers", tn);
		x->in_memory = false;	/* $vars: the struct's address */
	} else {
		if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type) {
			Dwarf_Die pt, ps;

			size = 8;
			if (tag == DW_TAG_pointer_type && type_of(&t, &pt) && strip(&pt, &ps) &&
			    is_char_type(&ps))
				type = ARG_STRING;
		} else if (tag == DW_TAG_base_type) {
			if (dwarf_attr_integrate(&t, DW_AT_encoding, &at))
				dwarf_formudata(&at, &enc);
			if (enc == DW_ATE_float)
				type = size == 4 ? ARG_F32 : ARG_F64;
			else
				type = int_type(size, enc == DW_ATE_signed ||
						      enc == DW_ATE_signed_char);
			if (size > 8 || (enc == DW_ATE_float && size != 4 && size != 8))
				unavailable(x, "a %s (%llu bytes) is not supported", tn,
					    (unsigned long long)size);
		} else if (tag == DW_TAG_enumeration_type) {
			Dwarf_Die ut, us;

			enc = DW_ATE_unsigned;
			if (type_of(&t, &ut) && strip(&ut, &us) &&
			    dwarf_attr_integrate(&us, DW_AT_encoding, &at))
				dwarf_formudata(&at, &enc);
			else if (has_negative_enumerator(&t))
				enc = DW_ATE_signed;
			type = int_type(size, enc == DW_ATE_signed);
			if (!a->typed)
				a->enums = enum_names(&t);
		}
		if (x->in_memory && !x->unavailable) {
			if (size != 1 && size != 2 && size != 4 && size != 8)
				unavailable(x, "%llu-byte values are not supported",
					    (unsigned long long)size);
			else
				put_op(x, FETCH_LOAD, 0, 0, (uint8_t)size);
		}
		x->in_memory = false;
	}
	if (!a->typed)
		a->type = (uint8_t)type;
	if (x->unavailable) {
		a->src = ARG_SRC_UNAVAIL;
		a->nops = 0;
	} else {
		a->src = ARG_SRC_PLAN;
	}
}

/* Whether a variable DIE is called name[0..len): its name, or for C++
 * its qualified name (ns::var, Class::member: its mangled name
 * demangled). */
static bool variable_called(Dwarf_Die *die, const char *name, size_t len)
{
	const char *n = dwarf_diename(die), *ln;
	char *dm;
	bool same;

	if (n && strlen(n) == len && !strncmp(n, name, len))
		return true;
	if (!memchr(name, ':', len) || !(ln = linkage_name(die)) || !(dm = cxx_demangle(ln)))
		return false;
	same = strlen(dm) == len && !strncmp(dm, name, len);
	free(dm);
	return same;
}

/* A variable with static storage of the CU (file-scope static, global,
 * one in a namespace, a class's static member) called name[0..len), into
 * v: a definition, not a declaration without a location. */
static bool scope_variable(Dwarf_Die *scope, Dwarf_Die *cu, const char *name, size_t len,
			   struct var *v, int depth)
{
	Dwarf_Die child;

	if (depth > 8 || dwarf_child(scope, &child))
		return false;
	do {
		int tag = dwarf_tag(&child);
		Dwarf_Attribute a;

		if (tag == DW_TAG_namespace && memchr(name, ':', len)) {
			if (scope_variable(&child, cu, name, len, v, depth + 1))
				return true;
			continue;
		}
		if (tag != DW_TAG_variable || !variable_called(&child, name, len))
			continue;
		/* A declaration: the definition (with the location) comes
		 * later in the CU, or in another. */
		if (dwarf_attr_integrate(&child, DW_AT_declaration, &a) &&
		    !dwarf_attr(&child, DW_AT_location, &a))
			continue;
		v->name = dwarf_diename(&child);
		v->die = child;
		v->fn = *cu;
		return true;
	} while (!dwarf_siblingof(&child, &child));
	return false;
}

static bool cu_variable(struct point *p, const char *name, size_t len, struct var *v)
{
	return scope_variable(&p->cu, &p->cu, name, len, v, 0);
}

/* In a C++ member function, a member named alone: this->name. */
static bool this_member(struct var *vars, int nvars, const char *name, size_t len)
{
	Dwarf_Die t, st, m;

	for (int i = 0; i < nvars; i++) {
		if (strcmp(vars[i].name, "this"))
			continue;
		return type_of(&vars[i].die, &t) && strip(&t, &t) &&
		       dwarf_tag(&t) == DW_TAG_pointer_type && type_of(&t, &st) &&
		       strip(&st, &st) && find_member(&st, name, len, &m);
	}
	return false;
}

/* Compiles one expression (NAME, ->F, .F, [N], leading *) into a. */
static void compile_expr(struct dbg *d, struct point *p, struct var *vars, int nvars,
			 struct spec_arg *a, const char *where)
{
	const char *expr = a->expr, *c = expr;
	struct access x = { .a = a };
	int stars = 0, vi;
	size_t len;

	while (*c == '*') {
		stars++;
		c++;
	}
	len = strcspn(c, ".-[");
	for (vi = 0; vi < nvars; vi++)
		if (strlen(vars[vi].name) == len && !strncmp(vars[vi].name, c, len))
			break;
	/* A member of *this named alone, as in the member function's code. */
	if (vi == nvars && !memchr(c, ':', len) && this_member(vars, nvars, c, len)) {
		for (vi = 0; strcmp(vars[vi].name, "this"); vi++)
			;
		a->nops = 0;
		plan_var(d, p, &vars[vi], &x);
		if (!x.unavailable)
			step_field(&x, expr, c, len, true);
		c += len;
		goto steps;
	}
	/* Else a static or global variable of the CU, in the spare slot. */
	if (vi == nvars && (nvars == MAX_SCOPE_VARS || !cu_variable(p, c, len, &vars[nvars]))) {
		char avail[1024] = "";
		size_t o = 0;

		for (int i = 0; i < nvars && o < sizeof(avail) - 1; i++)
			o += (size_t)snprintf(avail + o, sizeof(avail) - o, "%s%s", i ? ", " : "",
					      vars[i].name);
		bad("no variable '%.*s' at %s (available: %s)", (int)len, c, where,
		    nvars ? avail : "none");
	}
	a->nops = 0;
	plan_var(d, p, &vars[vi], &x);
	c += len;
steps:
	while (*c && !x.unavailable) {
		if (x.bitfield)
			bad("'%s': a bit-field has no fields or elements", expr);
		if (*c == '.' || *c == '-') {
			bool arrow = *c == '-';
			const char *f = c + (arrow ? 2 : 1);
			size_t fl = strcspn(f, ".-[");

			step_field(&x, expr, f, fl, arrow);
			c = f + fl;
		} else {
			char *end;
			unsigned long idx = strtoul(c + 1, &end, 10);

			step_index(&x, expr, idx);
			c = end + 1;
		}
	}
	while (stars-- && !x.unavailable)
		step_deref(&x, expr);
	if (x.unavailable && !x.has_type)
		x.has_type = type_of(&vars[vi].die, &x.type);
	finish(&x, expr, true);
}

/* $params / $vars: one argument per variable, as many as fit. */
static int expand_all(struct dbg *d, struct point *p, struct var *vars, int nvars,
		      struct spec_arg *out, int room, bool quiet)
{
	int n = 0;

	for (int i = 0; i < nvars && n < room; i++) {
		struct spec_arg *a = &out[n];
		struct access x = { .a = a };

		memset(a, 0, sizeof(*a));
		snprintf(a->name, sizeof(a->name), "%s", vars[i].name);
		snprintf(a->expr, sizeof(a->expr), "%s", vars[i].name);
		plan_var(d, p, &vars[i], &x);
		if (x.unavailable && !x.has_type)
			x.has_type = type_of(&vars[i].die, &x.type);
		if (!x.has_type)
			continue;
		finish(&x, a->expr, false);
		n++;
	}
	(void)quiet;
	return n;
}

struct pc_query {
	Dwarf_Addr pc;
	Dwarf_Die fn;
	bool found;
};

static int offer_containing(Dwarf_Die *fn, void *arg)
{
	struct pc_query *q = arg;

	if (dwarf_haspc(fn, q->pc) == 1 && dwarf_diename(fn)) {
		q->fn = *fn;
		q->found = true;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

/* The name of a point for messages: FUNC+0xOFF, FUNC the out-of-line
 * function whose code holds it (the caller, for an inlined copy). */
static bool point_name(struct point *p, char *buf, size_t len, char *sym, size_t symlen)
{
	struct pc_query q = { .pc = p->pc };
	Dwarf_Addr entry;
	const char *ln;
	char *dm = NULL;
	bool cxx;

	snprintf(buf, len, "0x%llx", (unsigned long long)p->pc);
	if (sym)
		sym[0] = '\0';
	dwarf_getfuncs(&p->cu, offer_containing, &q, 0);
	if (!q.found || dwarf_entrypc(&q.fn, &entry))
		return false;
	/* C++: the qualified, demangled name; the symbol is the mangled one */
	ln = linkage_name(&q.fn);
	if (ln)
		dm = cxx_demangle(ln);
	cxx = dm != NULL;
	snprintf(buf, len, "%s+0x%llx", dm ? dm : dwarf_diename(&q.fn),
		 (unsigned long long)(p->pc - entry));
	if (sym)
		snprintf(sym, symlen, "%s", ln ? ln : dwarf_diename(&q.fn));
	free(dm);
	return cxx;
}

/* The probe s at point p, with its variables compiled, into out. */
static void resolve_at(struct dbg *d, const struct probe_spec *s, struct point *p,
		       struct probe_spec *out)
{
	struct var vars[MAX_SCOPE_VARS];
	struct spec_arg args[SPEC_MAX_ARGS];
	Dwarf_Die *scopes = NULL;
	char where[300], err[600];
	int nvars, nargs = 0;
	char fsym[256];
	bool cxx = point_name(p, where, sizeof(where), fsym, sizeof(fsym));

	nvars = vars_at(p, vars, MAX_SCOPE_VARS, &scopes, false);
	for (int i = 0; i < s->nargs; i++) {
		const struct spec_arg *in = &s->args[i];
		bool all = in->src == ARG_SRC_VAR &&
			   (!strcmp(in->expr, "$params") || !strcmp(in->expr, "$vars"));

		if (all) {
			struct var pv[MAX_SCOPE_VARS];
			Dwarf_Die *ps = NULL;
			bool params = !strcmp(in->expr, "$params");
			int np = params ? vars_at(p, pv, MAX_SCOPE_VARS, &ps, true) : nvars;

			nargs += expand_all(d, p, params ? pv : vars, np, &args[nargs],
					    SPEC_MAX_ARGS - nargs, false);
			free(ps);
			continue;
		}
		if (nargs == SPEC_MAX_ARGS)
			bad("'%s': more than %d arguments", s->text, SPEC_MAX_ARGS);
		args[nargs] = *in;
		if (in->src == ARG_SRC_VAR) {
			compile_expr(d, p, vars, nvars, &args[nargs], where);
		} else if (in->type == ARG_F64 && in->src < ARG_SRC_RETVAL) {
			bad("'%s': argN:f64 cannot be combined with variables by name", s->text);
		}
		nargs++;
	}
	free(scopes);
	*out = *s;
	out->kind = SPEC_ADDRESS;
	out->address = p->pc;
	out->offset = 0;
	out->line = 0;
	cli_spec_object(out->object, sizeof(out->object), d->path);
	out->symbol[0] = '\0';
	out->nargs = nargs;
	memcpy(out->args, args, sizeof(args));
	snprintf(out->inlined_of, sizeof(out->inlined_of), "%s", p->inlined_of);
	/* A C++ point is shown by its demangled name, not the agent's
	 * mangled symbol (a function's own probe keeps its name). */
	if (cxx && !out->label[0] && !p->inlined_of[0])
		snprintf(out->label, sizeof(out->label), "%.119s", where);
	if (s->is_return) {
		/* Read at the entry: the return probe's entry handler. */
		out->kind = SPEC_SYMBOL;
		snprintf(out->symbol, sizeof(out->symbol), "%s", fsym);
		out->address = 0;
	}
	if (spec_format(out) && spec_too_long(out, err, sizeof(err)))
		bad("%s", err);
}

void dwarf_vars_resolve(struct cli_opts *o)
{
	int nspecs = o->nspecs;

	for (int i = 0; i < nspecs; i++) {
		struct probe_spec orig = o->specs[i];
		struct point pts[MAX_POINTS];
		struct dbg d;
		int n;

		if (!spec_has_vars(&orig))
			continue;
		open_points(o, &orig, &d, pts, &n, !o->no_inlines);
		if (orig.is_return && n > 1)
			n = 1;
		for (int k = 0; k < n; k++) {
			struct probe_spec *out = k ? &o->specs[o->nspecs] : &o->specs[i];

			if (k && o->nspecs == KPROBE_MAX_SPECS)
				bad("too many probe points (at most %d)", KPROBE_MAX_SPECS);
			resolve_at(&d, &orig, &pts[k], out);
			if (k)
				o->nspecs++;
		}
		dbg_close(&d);
	}
}

/* How retval reads a function's return value by its DWARF type: a
 * floating-point one (f64, f32: xmm0), an integer signed or unsigned of
 * its size, a char pointer as a string; -1 otherwise (other pointers stay
 * hex, structs, long double, void). */
static int return_type(Dwarf_Die *fn)
{
	Dwarf_Attribute a;
	Dwarf_Word enc, size;
	Dwarf_Die t, pt;

	if (!type_of(fn, &t) || !strip(&t, &t))
		return -1;
	if (dwarf_tag(&t) == DW_TAG_pointer_type)
		return type_of(&t, &pt) && strip(&pt, &pt) && is_char_type(&pt) ? ARG_STRING : -1;
	if (dwarf_tag(&t) != DW_TAG_base_type || !dwarf_attr_integrate(&t, DW_AT_encoding, &a) ||
	    dwarf_formudata(&a, &enc))
		return -1;
	size = type_size(&t);
	if (enc == DW_ATE_float) {
		switch (size) {
		case 8: return ARG_F64;
		case 4: return ARG_F32;
		default: return -1;	/* long double: on the x87 stack */
		}
	}
	if (enc != DW_ATE_signed && enc != DW_ATE_signed_char && enc != DW_ATE_unsigned &&
	    enc != DW_ATE_unsigned_char && enc != DW_ATE_boolean)
		return -1;
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return -1;	/* __int128: in two registers */
	return int_type(size, enc == DW_ATE_signed || enc == DW_ATE_signed_char);
}

struct named_fn {
	const char *name;
	Dwarf_Die fn;
	bool found;
};

static int offer_named(Dwarf_Die *fn, void *arg)
{
	struct named_fn *q = arg;
	const char *name = linkage_name(fn);
	Dwarf_Addr entry;

	if (dwarf_entrypc(fn, &entry) ||
	    !((name && !strcmp(name, q->name)) ||
	      (dwarf_diename(fn) && !strcmp(dwarf_diename(fn), q->name))))
		return DWARF_CB_OK;
	q->fn = *fn;
	q->found = true;
	return DWARF_CB_ABORT;
}

/* The out-of-line function a %return probe names: by its symbol, or (a
 * probe the tool resolved to OBJECT:0xVADDR) by the address. */
static bool return_probe_function(struct dbg *d, const struct probe_spec *s, Dwarf_Die *fn)
{
	struct named_fn q = { s->symbol, { 0 }, false };
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (s->kind == SPEC_ADDRESS)
		return function_of(d, s->address, fn);
	while (!q.found && !dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(d->dw, off + hsize, &cu))
			dwarf_getfuncs(&cu, offer_named, &q, 0);
		off = next;
	}
	*fn = q.fn;
	return q.found;
}

static void set_retval_type(struct probe_spec *s, int type)
{
	for (int k = 0; k < s->nargs; k++)
		if (s->args[k].src == ARG_SRC_RETVAL && !s->args[k].typed)
			s->args[k].type = (uint8_t)type;
}

void dwarf_retval_types(struct cli_opts *o)
{
	for (int i = 0; i < o->nspecs; i++) {
		struct probe_spec *s = &o->specs[i];
		char path[PATH_MAX], err[PATH_MAX + 128];
		bool untyped = false;
		struct dbg d;
		Dwarf_Die fn;
		int type;

		for (int k = 0; k < s->nargs; k++)
			untyped |= s->args[k].src == ARG_SRC_RETVAL && !s->args[k].typed;
		if (!s->is_return || !untyped || spec_is_glob(s) ||
		    (s->kind != SPEC_SYMBOL && s->kind != SPEC_ADDRESS) || s->offset ||
		    cli_object_path(o, s, path, sizeof(path), err, sizeof(err)))
			continue;
		if (!dbg_try_open(&d, path) && return_probe_function(&d, s, &fn) &&
		    (type = return_type(&fn)) >= 0) {
			set_retval_type(s, type);
			/* the text the agent receives says it too; "string"
			 * is longer than "x64": a text at its limit keeps it */
			if (spec_format(s)) {
				set_retval_type(s, ARG_X64);
				if (spec_format(s))
					bad("%s: the probe's text is too long", s->text);
			}
		}
		dbg_close(&d);
	}
}

/* ---- inlined copies of probes without variables ---- */

struct glob_count {
	const char *glob;
	int n;
};

static int count_match(const char *name, void *arg)
{
	struct glob_count *g = arg;

	g->n += !fnmatch(g->glob, name, 0);
	return 0;
}

/* Probe i's inlined copies (n points) in the object at path as
 * OBJECT:0xADDRESS probes.  *slot_free: no object has an out-of-line copy
 * for the probe's own symbol to resolve to, and no inlined copy has taken
 * its slot yet: the first one found does. */
static void add_inline_probes(struct cli_opts *o, int i, const char *path, struct point *pts,
			      int n, bool *slot_free)
{
	struct probe_spec orig = o->specs[i];

	if (n && orig.nargs) {
		cli_warn("'%s': its %d inlined cop%s in %s not probed: arguments there are read "
			 "by variable name, not argN", orig.text, n, n == 1 ? "y is" : "ies are",
			 path);
		return;
	}
	if (!n)
		return;
	/* A wide glob can have more copies than a session has probes: the
	 * probe still works, on its out-of-line copies, and says so. */
	if (!*slot_free && (o->nspecs + n > KPROBE_MAX_SPECS || n == MAX_POINTS)) {
		cli_warn("'%s': its inlined copies in %s are not probed: %s%d of them (at most %d "
			 "probes; --no-inlines says not to look)", orig.text, path,
			 n == MAX_POINTS ? "at least " : "", n, KPROBE_MAX_SPECS);
		return;
	}
	for (int k = 0; k < n; k++) {
		struct probe_spec *out = *slot_free ? &o->specs[i] : &o->specs[o->nspecs];
		char serr[600];

		if (out != &o->specs[i] && o->nspecs == KPROBE_MAX_SPECS)
			bad("too many probe points with inlined copies (at most %d): "
			    "--no-inlines leaves them out", KPROBE_MAX_SPECS);
		*out = orig;
		out->kind = SPEC_ADDRESS;
		out->address = pts[k].pc;
		out->symbol[0] = '\0';
		cli_spec_object(out->object, sizeof(out->object), path);
		snprintf(out->inlined_of, sizeof(out->inlined_of), "%s", pts[k].inlined_of);
		if (spec_format(out) && spec_too_long(out, serr, sizeof(serr)))
			bad("%s", serr);
		if (out != &o->specs[i])
			o->nspecs++;
		*slot_free = false;
	}
}

static bool wants_inlines(const struct probe_spec *s)
{
	return s->kind == SPEC_SYMBOL && !s->offset && !s->is_return && !spec_has_vars(s);
}

/* Where the probes' inlined copies are looked for: per probe, the object
 * it names, or with none (and a process to probe) every object the agent
 * resolves its symbol in: the main executable, then the libraries it
 * needs (-- COMMAND) or the objects mapped (-p PID). */
struct inl_plan {
	int nspecs, nobjs;
	char (*objs)[PATH_MAX];	/* every object looked at, each once */
	int *own;		/* per probe: its object in objs, -1 none */
	bool *every;		/* per probe: every object */
	bool *slot_free;	/* per probe: see add_inline_probes() */
};

static int plan_object(struct inl_plan *pl, const char *path, int max)
{
	for (int k = 0; k < pl->nobjs; k++)
		if (!strcmp(pl->objs[k], path))
			return k;
	if (pl->nobjs == max)
		return -1;
	snprintf(pl->objs[pl->nobjs], PATH_MAX, "%s", path);
	return pl->nobjs++;
}

static bool plan_covers(const struct inl_plan *pl, int i, int k)
{
	return pl->own[i] == k || (pl->every[i] && pl->own[i] >= 0);
}

/* Whether a probe's own symbol resolves to an out-of-line copy in one of
 * its objects. */
static bool outline_copy(const struct inl_plan *pl, const struct probe_spec *s, int i)
{
	for (int k = 0; k < pl->nobjs; k++) {
		struct glob_count g = { s->symbol, 0 };

		if (!plan_covers(pl, i, k))
			continue;
		elf_file_foreach_function(pl->objs[k], count_match, &g);
		if (g.n)
			return true;
	}
	return false;
}

static void plan_make(const struct cli_opts *o, struct inl_plan *pl)
{
	int max = MAX_CANDIDATE_OBJECTS + o->nspecs, every = -1;

	pl->nspecs = o->nspecs;
	pl->nobjs = 0;
	pl->objs = calloc((size_t)max, PATH_MAX);
	pl->own = calloc((size_t)o->nspecs + 1, sizeof(*pl->own));
	pl->every = calloc((size_t)o->nspecs + 1, sizeof(*pl->every));
	pl->slot_free = calloc((size_t)o->nspecs + 1, sizeof(*pl->slot_free));
	if (!pl->objs || !pl->own || !pl->every || !pl->slot_free)
		cli_die(EXIT_FAIL, "out of memory");
	for (int i = 0; i < o->nspecs; i++) {
		const struct probe_spec *s = &o->specs[i];
		char path[PATH_MAX], err[PATH_MAX + 128];

		pl->own[i] = -1;
		if (!wants_inlines(s) || cli_object_path(o, s, path, sizeof(path), err, sizeof(err)))
			continue;
		pl->own[i] = plan_object(pl, path, max);
		pl->every[i] = !s->object[0] && (o->command || o->pid);
		if (pl->every[i] && every < 0)
			every = i;
	}
	if (every >= 0) {
		char (*libs)[PATH_MAX] = calloc(MAX_CANDIDATE_OBJECTS, PATH_MAX);
		int n;

		if (!libs)
			cli_die(EXIT_FAIL, "out of memory");
		n = usdt_candidate_objects(o, &o->specs[every], libs, MAX_CANDIDATE_OBJECTS);
		for (int k = 1; k < n; k++)
			plan_object(pl, libs[k], max);
		free(libs);
	}
	for (int i = 0; i < o->nspecs; i++)
		pl->slot_free[i] = pl->own[i] >= 0 && !outline_copy(pl, &o->specs[i], i);
}

static void plan_free(struct inl_plan *pl)
{
	free(pl->objs);
	free(pl->own);
	free(pl->every);
	free(pl->slot_free);
}

/* A function probe also probes the inlined copies DWARF records: each
 * becomes OBJECT:0xADDRESS with the function's name as inlined_of.  argN
 * means nothing in an inlined copy (no calling convention there): such
 * probes keep the out-of-line copy only.  The probes on one object share
 * one walk over its DWARF. */
void dwarf_inlines_resolve(struct cli_opts *o)
{
	struct inl_plan pl;

	if (o->no_inlines)
		return;
	plan_make(o, &pl);
	for (int k = 0; k < pl.nobjs; k++) {
		const char *globs[KPROBE_MAX_SPECS];
		int idx[KPROBE_MAX_SPECS], ng = 0, *n;
		struct point (*pts)[MAX_POINTS];
		struct dbg d;

		for (int i = 0; i < pl.nspecs; i++)
			if (plan_covers(&pl, i, k)) {
				idx[ng] = i;
				globs[ng++] = o->specs[i].symbol;
			}
		if (!ng || dbg_try_open(&d, pl.objs[k])) {
			if (ng)
				dbg_close(&d);
			continue;
		}
		/* no string that could be the name: no walk over every DIE */
		if (!dwarf_may_name(d.dw, globs, ng)) {
			dbg_close(&d);
			continue;
		}
		pts = calloc((size_t)ng, sizeof(*pts));
		n = calloc((size_t)ng, sizeof(*n));
		if (!pts || !n)
			cli_die(EXIT_FAIL, "out of memory");
		inline_points(&d, globs, ng, pts, n);
		for (int g = 0; g < ng; g++)
			add_inline_probes(o, idx[g], pl.objs[k], pts[g], n[g], &pl.slot_free[idx[g]]);
		free(pts);
		free(n);
		dbg_close(&d);
	}
	plan_free(&pl);
}

/* ---- kprobe vars ---- */

static void list_point(struct dbg *d, struct point *p, FILE *f)
{
	struct var vars[MAX_SCOPE_VARS];
	Dwarf_Die *scopes = NULL;
	char where[300];
	int nvars;
	Dwarf_Line *line = dwarf_getsrc_die(&p->cu, p->pc);

	point_name(p, where, sizeof(where), NULL, 0);
	fprintf(f, "%s", where);
	if (line) {
		const char *file = dwarf_linesrc(line, NULL, NULL);
		int ln = 0;

		dwarf_lineno(line, &ln);
		if (file)
			fprintf(f, " (%s:%d)", strrchr(file, '/') ? strrchr(file, '/') + 1 : file, ln);
	}
	fprintf(f, " [%s]", d->name);
	if (p->inlined_of[0])
		fprintf(f, " inlined copy of %s", p->inlined_of);
	fputc('\n', f);
	nvars = vars_at(p, vars, MAX_SCOPE_VARS, &scopes, false);
	for (int i = 0; i < nvars; i++) {
		struct spec_arg a = { 0 };
		struct access x = { .a = &a };
		char tn[256];

		plan_var(d, p, &vars[i], &x);
		type_name(&x.type, type_of(&vars[i].die, &x.type), tn, sizeof(tn));
		fprintf(f, "\t%-24s %s%s%s%s\n", tn, vars[i].name,
			dwarf_tag(&vars[i].die) == DW_TAG_formal_parameter ? " (parameter)" : "",
			x.unavailable ? ": " : "", x.unavailable ? x.why : "");
	}
	free(scopes);
}

int dwarf_vars_list(struct cli_opts *o)
{
	/* The OBJECT of `kprobe vars PROBE OBJECT` is each probe's that
	 * names none; C++ names are then matched in it as count and trace
	 * match them. */
	for (int i = 0; o->list_object && i < o->nspecs; i++)
		if (!o->specs[i].object[0])
			snprintf(o->specs[i].object, sizeof(o->specs[i].object), "%s",
				 o->list_object);
	cxx_names_resolve(o);
	for (int i = 0; i < o->nspecs; i++) {
		struct probe_spec *s = &o->specs[i];
		struct point pts[MAX_POINTS];
		struct dbg d;
		int n;

		if (s->kind == SPEC_USDT) {
			usdt_vars(o, s);
			continue;
		}
		open_points(o, s, &d, pts, &n, !o->no_inlines);
		for (int k = 0; k < n; k++)
			list_point(&d, &pts[k], stdout);
		dbg_close(&d);
	}
	return 0;
}

/* ---- parameters by position, for args->NAME in programs ---- */

struct param_query {
	const char *func;
	Dwarf_Die fn;
	bool found;
};

static int offer_defined(Dwarf_Die *fn, void *arg)
{
	struct param_query *q = arg;
	const char *name = dwarf_diename(fn);
	Dwarf_Addr entry;

	if (!name || strcmp(name, q->func) || dwarf_entrypc(fn, &entry))
		return DWARF_CB_OK;
	q->fn = *fn;
	q->found = true;
	return DWARF_CB_ABORT;
}

/* How the SysV ABI passes a parameter, as far as args->NAME cares. */
enum param_class {
	PARAM_INT,	/* in the next integer register: size and sign set */
	PARAM_FLOAT,	/* in a vector register: takes no integer one */
	PARAM_OTHER,	/* a struct or union by value, a wide integer... */
};

/* The class of a parameter and, for PARAM_INT, its size and sign
 * (pointers, references, enums and bools are integers). */
static enum param_class param_type(Dwarf_Die *param, int *size, bool *is_signed)
{
	Dwarf_Die t;
	Dwarf_Attribute a;
	Dwarf_Word enc = 0;
	int tag;

	if (!type_of(param, &t) || !strip(&t, &t))
		return PARAM_OTHER;
	tag = dwarf_tag(&t);
	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
	    tag == DW_TAG_rvalue_reference_type) {
		*size = 8;
		*is_signed = false;
		return PARAM_INT;
	}
	if (tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type)
		return PARAM_OTHER;
	*size = (int)type_size(&t);
	if (tag == DW_TAG_base_type &&
	    (!dwarf_attr_integrate(&t, DW_AT_encoding, &a) || dwarf_formudata(&a, &enc)))
		return PARAM_OTHER;
	if (tag == DW_TAG_base_type && (enc == DW_ATE_float || enc == DW_ATE_complex_float))
		return *size <= 8 ? PARAM_FLOAT : PARAM_OTHER;
	*is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
	return *size == 1 || *size == 2 || *size == 4 || *size == 8 ? PARAM_INT : PARAM_OTHER;
}

int dwarf_param(const char *path, const char *func, const char *name, int *index, int *size,
		bool *is_signed, char *why, size_t whylen)
{
	struct param_query q = { func, { 0 }, false };
	char have[160] = "";
	Dwarf_Off off = 0, next;
	size_t hsize, used = 0;
	Dwarf_Die child;
	const char *blocked = NULL;
	struct dbg d;
	int k = 0, nint = 0, rc = -1;

	if (dbg_try_open(&d, path)) {
		snprintf(why, whylen, "%s has no debug information: args cannot be named", path);
		dbg_close(&d);
		return -1;
	}
	while (!q.found && !dwarf_nextcu(d.dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(d.dw, off + hsize, &cu))
			dwarf_getfuncs(&cu, offer_defined, &q, 0);
		off = next;
	}
	if (!q.found) {
		snprintf(why, whylen, "no function %s in the debug information of %s", func, path);
		goto out;
	}
	if (!dwarf_child(&q.fn, &child)) {
		do {
			const char *pn = dwarf_diename(&child);

			enum param_class cls;

			if (dwarf_tag(&child) != DW_TAG_formal_parameter)
				continue;
			cls = param_type(&child, size, is_signed);
			if (pn && !strcmp(pn, name)) {
				*index = nint;
				if (cls != PARAM_INT)
					snprintf(why, whylen, "args->%s: only integer, enum and pointer "
						 "parameters are supported", name);
				else if (blocked)
					snprintf(why, whylen, "args->%s: %s, before it, is passed by "
						 "value as a struct or union: its register is not known",
						 name, blocked);
				else
					rc = 0;
				goto out;
			}
			/* the integer registers the earlier ones take */
			if (cls == PARAM_INT)
				nint++;
			else if (cls == PARAM_OTHER && !blocked)
				blocked = pn ? pn : "a parameter";
			if (used < sizeof(have))
				used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%s",
							 k ? ", " : "", pn ? pn : "?");
			k++;
		} while (!dwarf_siblingof(&child, &child));
	}
	snprintf(why, whylen, "%s has no parameter %s (it has: %s)", func, name,
		 have[0] ? have : "none");
out:
	dbg_close(&d);
	return rc;
}

int dwarf_param_struct(const char *path, const char *func, const char *name, char *sname,
		       size_t len)
{
	struct param_query q = { func, { 0 }, false };
	Dwarf_Off off = 0, next;
	size_t hsize;
	Dwarf_Die child, t, st;
	struct dbg d;
	int rc = -1;

	if (dbg_try_open(&d, path))
		goto out;
	while (!q.found && !dwarf_nextcu(d.dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(d.dw, off + hsize, &cu))
			dwarf_getfuncs(&cu, offer_defined, &q, 0);
		off = next;
	}
	if (!q.found || dwarf_child(&q.fn, &child))
		goto out;
	do {
		const char *pn = dwarf_diename(&child), *sn;
		int tag;

		if (dwarf_tag(&child) != DW_TAG_formal_parameter || !pn || strcmp(pn, name))
			continue;
		if (!type_of(&child, &t) || !strip(&t, &t) || dwarf_tag(&t) != DW_TAG_pointer_type ||
		    !type_of(&t, &st) || !strip(&st, &st))
			break;
		tag = dwarf_tag(&st);
		if ((tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
		     tag == DW_TAG_class_type) && (sn = dwarf_diename(&st))) {
			snprintf(sname, len, "%s", sn);
			rc = 0;
		}
		break;
	} while (!dwarf_siblingof(&child, &child));
out:
	dbg_close(&d);
	return rc;
}

/* ---- struct types for casts in programs ---- */

struct struct_query {
	const char *name;
	Dwarf_Die found;
	bool ok;
};

/* The first complete struct, union or class called q->name under die. */
static bool find_struct(Dwarf_Die *die, struct struct_query *q, int depth)
{
	Dwarf_Die child;

	if (depth > 8 || dwarf_child(die, &child))
		return false;
	do {
		int tag = dwarf_tag(&child);
		const char *n;
		Dwarf_Attribute a;

		if ((tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
		     tag == DW_TAG_class_type) && (n = dwarf_diename(&child)) &&
		    !strcmp(n, q->name) && !dwarf_attr(&child, DW_AT_declaration, &a)) {
			q->found = child;
			return q->ok = true;
		}
		if (tag == DW_TAG_namespace && find_struct(&child, q, depth + 1))
			return true;
	} while (!dwarf_siblingof(&child, &child));
	return false;
}

int dwarf_struct_field(const char *path, const char *sname, const char *field,
		       unsigned int *offset, int *kind, int *size, bool *is_signed, char *inner,
		       size_t innerlen, char *why, size_t whylen)
{
	struct struct_query q = { sname, { 0 }, false };
	Dwarf_Off off = 0, next;
	size_t hsize;
	Dwarf_Die m, t, st;
	Dwarf_Attribute a;
	Dwarf_Word loc = 0, enc = 0;
	struct dbg d;
	int rc = -1, tag;

	if (dbg_try_open(&d, path)) {
		snprintf(why, whylen, "%s has no debug information: struct %s is not known", path,
			 sname);
		goto out;
	}
	while (!q.ok && !dwarf_nextcu(d.dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu;

		if (dwarf_offdie(d.dw, off + hsize, &cu))
			find_struct(&cu, &q, 0);
		off = next;
	}
	if (!q.ok) {
		snprintf(why, whylen, "struct %s is not in the debug information of %s", sname, path);
		goto out;
	}
	if (!field) {
		rc = 0;
		goto out;
	}
	if (!find_member(&q.found, field, strlen(field), &m)) {
		char have[160] = "";
		size_t used = 0;

		if (!dwarf_child(&q.found, &m))
			do {
				const char *mn = dwarf_diename(&m);

				if (dwarf_tag(&m) == DW_TAG_member && mn && used < sizeof(have))
					used += (size_t)snprintf(have + used, sizeof(have) - used,
								 "%s%s", used ? ", " : "", mn);
			} while (!dwarf_siblingof(&m, &m));
		snprintf(why, whylen, "struct %s has no field '%s' (it has: %s)", sname, field,
			 have[0] ? have : "none");
		goto out;
	}
	if (dwarf_attr_integrate(&m, DW_AT_bit_size, &a)) {
		snprintf(why, whylen, "%s.%s is a bit-field: not supported in casts", sname, field);
		goto out;
	}
	if (dwarf_attr_integrate(&m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &loc)) {
		snprintf(why, whylen, "%s.%s has a computed location", sname, field);
		goto out;
	}
	*offset = (unsigned int)loc;
	if (!type_of(&m, &t) || !strip(&t, &st)) {
		snprintf(why, whylen, "%s.%s has no type", sname, field);
		goto out;
	}
	tag = dwarf_tag(&st);
	if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_class_type) {
		const char *n = dwarf_diename(&st);

		if (!n) {
			snprintf(why, whylen, "%s.%s is an unnamed struct: not supported", sname, field);
			goto out;
		}
		*kind = 2;
		snprintf(inner, innerlen, "%s", n);
		rc = 0;
		goto out;
	}
	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type) {
		Dwarf_Die pt, ps;
		const char *n;

		*kind = 0;
		*size = 8;
		*is_signed = false;
		if (type_of(&st, &pt) && strip(&pt, &ps) &&
		    (dwarf_tag(&ps) == DW_TAG_structure_type || dwarf_tag(&ps) == DW_TAG_union_type ||
		     dwarf_tag(&ps) == DW_TAG_class_type) && (n = dwarf_diename(&ps))) {
			*kind = 1;
			snprintf(inner, innerlen, "%s", n);
		}
		rc = 0;
		goto out;
	}
	if (tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type) {
		snprintf(why, whylen, "%s.%s is not an integer, pointer or struct (arrays are not "
			 "supported)", sname, field);
		goto out;
	}
	*size = (int)type_size(&st);
	if (tag == DW_TAG_base_type && dwarf_attr_integrate(&st, DW_AT_encoding, &a))
		dwarf_formudata(&a, &enc);
	if (enc == DW_ATE_float || (*size != 1 && *size != 2 && *size != 4 && *size != 8)) {
		snprintf(why, whylen, "%s.%s is not an integer (%d bytes)", sname, field, *size);
		goto out;
	}
	*kind = 0;
	*is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
	rc = 0;
out:
	dbg_close(&d);
	return rc;
}
