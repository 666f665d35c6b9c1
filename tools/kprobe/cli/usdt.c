/* SystemTap SDT probes: reading the notes, compiling the operands, and
 * resolving usdt: PROBEs (see usdt.h).
 *
 * A note (owner "stapsdt", type 3) holds the probe's address, the link-time
 * address of .stapsdt.base (the difference to the section's address in the
 * file is what prelinking moved the object by), the semaphore's address,
 * then "provider\0name\0operands\0".  Each operand is SIZE@ASM: SIZE 1, 2,
 * 4, 8, negative when signed; ASM a register (%rdi, %eax, %r8d, %ah), an
 * immediate ($5), or memory DISP(%base[,%index[,scale]]), DISP a number or,
 * with %rip, a symbol plus offset.  That is x86-64 syntax; the notes of an
 * AArch64 object (its e_machine says which) use that assembler's, parsed by
 * usdt_a64_operand(). */
#include "usdt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dwarf_vars.h"
#include "elf_file.h"

#define NT_STAPSDT 3

static Elf_Scn *section_named(Elf *elf, const char *want, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh->sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}

/* One note's description into p; false when malformed. */
static bool parse_note(const unsigned char *d, size_t len, uint64_t base_now,
		       struct usdt_probe *p)
{
	const char *str = (const char *)d + 24, *end = (const char *)d + len;
	const char *prov, *name, *args;
	uint64_t base;

	if (len < 27)
		return false;
	memcpy(&p->pc, d, 8);
	memcpy(&base, d + 8, 8);
	memcpy(&p->semaphore, d + 16, 8);
	prov = str;
	name = memchr(prov, '\0', (size_t)(end - prov));
	if (!name++ || name >= end)
		return false;
	args = memchr(name, '\0', (size_t)(end - name));
	if (!args++ || args > end)
		return false;
	if (args == end || !memchr(args, '\0', (size_t)(end - args)))
		args = "";
	if (base_now && base) {
		p->pc += base_now - base;
		if (p->semaphore)
			p->semaphore += base_now - base;
	}
	snprintf(p->provider, sizeof(p->provider), "%s", prov);
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->args, sizeof(p->args), "%s", args);
	return true;
}

int usdt_foreach(const char *path, int (*fn)(const struct usdt_probe *p, void *arg), void *arg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	uint64_t base_now = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	Elf *elf;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64 ||
	    !gelf_getehdr(elf, &eh)) {
		rc = -ENOEXEC;
		goto out;
	}
	if (section_named(elf, ".stapsdt.base", &sh))
		base_now = sh.sh_addr;
	while (!rc && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		while (!rc && data &&
		       (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			struct usdt_probe p;

			if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 ||
			    memcmp((const char *)data->d_buf + name_off, "stapsdt", 8))
				continue;
			if (parse_note((const unsigned char *)data->d_buf + desc_off, nh.n_descsz,
				       base_now, &p)) {
				p.machine = eh.e_machine;
				rc = fn(&p, arg);
			}
		}
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

/* The operands of p, split at spaces outside brackets (AArch64 memory
 * operands hold one: "-4@[sp, 28]"); returns how many (at most max). */
static int split_args(const struct usdt_probe *p, char buf[256], char **v, int max)
{
	char *s = buf;
	int n = 0;

	snprintf(buf, 256, "%s", p->args);
	while (n < max) {
		int depth = 0;

		while (*s == ' ')
			s++;
		if (!*s)
			break;
		v[n++] = s;
		for (; *s && (*s != ' ' || depth > 0); s++) {
			if (*s == '[')
				depth++;
			else if (*s == ']' && depth > 0)
				depth--;
		}
		if (*s)
			*s++ = '\0';
	}
	return n;
}

int usdt_nargs(const struct usdt_probe *p)
{
	char buf[256], *v[USDT_MAX_ARGS];

	return split_args(p, buf, v, USDT_MAX_ARGS);
}

/* x86-64 register names: DWARF number (0..16) and, for %ah..%dh, the
 * byte's shift. */
static int reg_number(const char *name, size_t len, int *shift)
{
	static const char *const names[][4] = {
		{ "rax", "eax", "ax", "al" }, { "rdx", "edx", "dx", "dl" },
		{ "rcx", "ecx", "cx", "cl" }, { "rbx", "ebx", "bx", "bl" },
		{ "rsi", "esi", "si", "sil" }, { "rdi", "edi", "di", "dil" },
		{ "rbp", "ebp", "bp", "bpl" }, { "rsp", "esp", "sp", "spl" },
	};
	static const char *const high[] = { "ah", "dh", "ch", "bh" };
	char buf[8];

	*shift = 0;
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, name, len);
	buf[len] = '\0';
	for (int r = 0; r < 8; r++)
		for (int k = 0; k < 4; k++)
			if (!strcmp(buf, names[r][k]))
				return r;
	for (int r = 0; r < 4; r++)
		if (!strcmp(buf, high[r])) {
			*shift = 8;
			return r;
		}
	if (!strcmp(buf, "rip"))
		return 16;
	if (buf[0] == 'r' && isdigit((unsigned char)buf[1])) {
		char *end;
		long n = strtol(buf + 1, &end, 10);

		if (n >= 8 && n <= 15 && (!*end || !strcmp(end, "d") || !strcmp(end, "w") ||
					  !strcmp(end, "b")))
			return (int)n;
	}
	return -1;
}

static int put(struct spec_arg *a, enum fetch_kind kind, uint8_t reg, int64_t k, uint8_t size)
{
	struct fetch_op *op;

	if (a->nops == SPEC_MAX_OPS)
		return -EINVAL;
	op = &a->ops[a->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)kind;
	op->reg = reg;
	op->k = k;
	op->size = size;
	return 0;
}

/* "%reg" at s (len bytes): pushes it. */
static int push_reg(struct spec_arg *a, const char *s, size_t len)
{
	int shift, r;

	if (len < 2 || s[0] != '%')
		return -EINVAL;
	r = reg_number(s + 1, len - 1, &shift);
	if (r < 0)
		return -EINVAL;
	if (put(a, FETCH_REG, (uint8_t)r, 0, 0))
		return -EINVAL;
	if (shift && (put(a, FETCH_CONST, 0, shift, 0) || put(a, FETCH_BINOP, 0, BINOP_SHR, 0)))
		return -EINVAL;
	return 0;
}

/* DISP(%base[,%index[,scale]]) with a numeric or (for %rip) symbolic DISP. */
static int memory_operand(const char *path, const struct usdt_probe *p, const char *s,
			  struct spec_arg *a, unsigned int size)
{
	const char *open = strchr(s, '('), *close = strchr(s, ')');
	char disp[128], inner[64], *parts[3], *save = NULL;
	int64_t off = 0;
	int np = 0;

	if (!open || !close || close < open || close[1] || (size_t)(open - s) >= sizeof(disp) ||
	    (size_t)(close - open) >= sizeof(inner))
		return -EINVAL;
	snprintf(disp, sizeof(disp), "%.*s", (int)(open - s), s);
	snprintf(inner, sizeof(inner), "%.*s", (int)(close - open - 1), open + 1);
	for (char *t = strtok_r(inner, ",", &save); t && np < 3; t = strtok_r(NULL, ",", &save))
		parts[np++] = t;
	if (!np)
		return -EINVAL;
	if (disp[0] && (isdigit((unsigned char)disp[0]) || disp[0] == '-' || disp[0] == '+')) {
		char *end;

		errno = 0;
		off = strtoll(disp, &end, 0);
		if (*end || errno)
			return -EINVAL;
	} else if (disp[0]) {
		/* SYMBOL[+-OFF](%rip): the symbol's address, relative to the
		 * probe's, added to the address of the hit (ip is the probe's
		 * address + 1 in a pre_handler). */
		char *pm = strpbrk(disp, "+-");
		uint64_t value;
		int64_t extra = 0;

		if (np != 1 || strcmp(parts[0], "%rip"))
			return -EINVAL;
		if (pm) {
			extra = strtoll(pm, NULL, 0);
			*pm = '\0';
		}
		if (elf_file_address_symbol(path, disp, &value))
			return -EINVAL;
		off = (int64_t)(value - p->pc) + extra - 1;
	}
	/* A numeric displacement from %rip would be from the next
	 * instruction's address, which a probe does not know. */
	if (!strcmp(parts[0], "%rip") && (!disp[0] || isdigit((unsigned char)disp[0]) ||
					  disp[0] == '-' || disp[0] == '+'))
		return -EINVAL;
	if (push_reg(a, parts[0], strlen(parts[0])))
		return -EINVAL;
	if (np >= 2) {
		long scale = np == 3 ? strtol(parts[2], NULL, 10) : 1;

		if (push_reg(a, parts[1], strlen(parts[1])) ||
		    (scale != 1 && scale != 2 && scale != 4 && scale != 8) ||
		    (scale != 1 && (put(a, FETCH_CONST, 0, scale, 0) ||
				    put(a, FETCH_BINOP, 0, BINOP_MUL, 0))) ||
		    put(a, FETCH_BINOP, 0, BINOP_ADD, 0))
			return -EINVAL;
	}
	if ((off && put(a, FETCH_ADD, 0, off, 0)) || put(a, FETCH_LOAD, 0, 0, (uint8_t)size))
		return -EINVAL;
	return 0;
}

static enum arg_type operand_type(unsigned int size, bool sign)
{
	switch (size) {
	case 1: return sign ? ARG_S8 : ARG_U8;
	case 2: return sign ? ARG_S16 : ARG_U16;
	case 4: return sign ? ARG_S32 : ARG_U32;
	default: return sign ? ARG_S64 : ARG_U64;
	}
}

int usdt_arg_plan(const char *path, const struct usdt_probe *p, int index, struct spec_arg *a,
		  char *err, size_t errlen)
{
	char buf[256], *v[USDT_MAX_ARGS], *at, *end;
	int n = split_args(p, buf, v, USDT_MAX_ARGS), rc;
	long size;
	const char *op;

	if (index < 0 || index >= n) {
		snprintf(err, errlen, "usdt:%s:%s has %d argument%s (arg0..arg%d): not arg%d",
			 p->provider, p->name, n, n == 1 ? "" : "s", n - 1, index);
		return -EINVAL;
	}
	at = strchr(v[index], '@');
	size = at ? strtol(v[index], &end, 10) : 8;
	if (at && end != at)
		size = 0;
	op = at ? at + 1 : v[index];
	a->nops = 0;
	if (labs(size) != 1 && labs(size) != 2 && labs(size) != 4 && labs(size) != 8) {
		rc = -EINVAL;
	} else if (p->machine == EM_AARCH64) {
		rc = usdt_a64_operand(path, op, (unsigned int)labs(size), a);
	} else if (op[0] == '%') {
		rc = push_reg(a, op, strlen(op));
	} else if (op[0] == '$') {
		errno = 0;
		rc = put(a, FETCH_CONST, 0, strtoll(op + 1, &end, 0), 0);
		if (*end || errno)
			rc = -EINVAL;
	} else {
		rc = memory_operand(path, p, op, a, (unsigned int)labs(size));
	}
	if (rc) {
		snprintf(err, errlen, "usdt:%s:%s: cannot read its operand '%s'", p->provider,
			 p->name, v[index]);
		return -EINVAL;
	}
	a->src = ARG_SRC_PLAN;
	if (!a->typed)
		a->type = (uint8_t)operand_type((unsigned int)labs(size), size < 0);
	return 0;
}

/* ---- resolving usdt: probes ---- */

struct match {
	const char *prov_glob, *name_glob;
	struct usdt_probe *found;
	int n, max;
};

static int collect(const struct usdt_probe *p, void *arg)
{
	struct match *m = arg;

	if (fnmatch(m->prov_glob, p->provider, 0) || fnmatch(m->name_glob, p->name, 0))
		return 0;
	if (m->n == m->max)
		return -E2BIG;
	m->found[m->n++] = *p;
	return 0;
}

/* The DT_NEEDED libraries of the object at path, found where the loader
 * looks; returns how many were stored. */
static int needed_libraries(const char *path, char (*out)[PATH_MAX], int max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf *elf;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (elf && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		data = elf_getdata(scn, NULL);
		for (int i = 0; data && n < max && gelf_getdyn(data, i, &dyn); i++) {
			const char *name;

			if (dyn.d_tag != DT_NEEDED)
				continue;
			name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			if (name && !strchr(name, '/') && cli_library_on_disk(name, out[n], PATH_MAX))
				n++;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return n;
}

int usdt_candidate_objects(const struct cli_opts *o, const struct probe_spec *s,
			   char (*paths)[PATH_MAX], int max)
{
	char err[PATH_MAX + 128];
	int n = 0;

	if (cli_object_path(o, s, paths[0], PATH_MAX, err, sizeof(err)))
		cli_die(EXIT_BAD, "%s", err);
	n = 1;
	if (s->object[0])
		return n;
	if (o->pid) {
		char maps[64], line[PATH_MAX + 128];
		FILE *f;

		snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)o->pid);
		f = fopen(maps, "re");
		while (f && n < max && fgets(line, sizeof(line), f)) {
			char *path = strchr(line, '/');
			bool seen = false;

			if (!path)
				continue;
			path[strcspn(path, "\n")] = '\0';
			for (int i = 0; i < n && !seen; i++)
				seen = !strcmp(paths[i], path);
			if (!seen)
				snprintf(paths[n++], PATH_MAX, "%s", path);
		}
		if (f)
			fclose(f);
		return n;
	}
	n += needed_libraries(paths[0], paths + 1, max - 1);
	return n;
}

/* One PROBE's ARGs at SDT probe p: arg0.. as asked, or all operands
 * (when all, or tracing with none asked). */
static void probe_args(const struct cli_opts *o, const struct probe_spec *orig, const char *path,
		       const struct usdt_probe *p, bool all, struct probe_spec *out)
{
	char err[300];

	out->nargs = 0;
	if (!orig->nargs && (all || o->action == ACT_TRACE)) {
		int n = usdt_nargs(p);

		if (n > SPEC_MAX_ARGS)
			n = SPEC_MAX_ARGS;
		for (int i = 0; i < n; i++) {
			struct spec_arg *a = &out->args[out->nargs++];

			memset(a, 0, sizeof(*a));
			snprintf(a->name, sizeof(a->name), "arg%d", i);
			if (usdt_arg_plan(path, p, i, a, err, sizeof(err)))
				cli_die(EXIT_BAD, "%s", err);
		}
		return;
	}
	for (int i = 0; i < orig->nargs; i++) {
		struct spec_arg *a = &out->args[out->nargs++];

		*a = orig->args[i];
		if (a->src != ARG_SRC_VAR)
			continue;
		if (usdt_arg_plan(path, p, atoi(a->expr + 3), a, err, sizeof(err)))
			cli_die(EXIT_BAD, "%s", err);
	}
}

int usdt_sites(const struct cli_opts *o, const struct probe_spec *orig, bool all_args,
	       struct probe_spec *out, int max)
{
	char (*paths)[PATH_MAX];
	char glob[256], *colon;
	struct usdt_probe found[256];
	int npaths, total = 0;

	paths = calloc(MAX_CANDIDATE_OBJECTS, PATH_MAX);
	if (!paths)
		cli_die(EXIT_FAIL, "out of memory");
	npaths = usdt_candidate_objects(o, orig, paths, MAX_CANDIDATE_OBJECTS);
	snprintf(glob, sizeof(glob), "%s", orig->symbol);
	colon = strchr(glob, ':');
	if (!colon)
		cli_die(EXIT_BAD, "bad SDT probe '%s'", orig->text);
	*colon = '\0';
	for (int k = 0; k < npaths; k++) {
		struct match m = { glob, colon + 1, found, 0, 256 };
		if (usdt_foreach(paths[k], collect, &m) == -E2BIG)
			cli_die(EXIT_BAD, "'%s' matches more than 256 SDT probes", orig->text);
		for (int j = 0; j < m.n; j++) {
			struct probe_spec *s = &out[total];
			char err[600];

			if (total == max)
				cli_die(EXIT_BAD, "too many probes (at most %d)", KPROBE_MAX_SPECS);
			*s = *orig;
			s->kind = SPEC_ADDRESS;
			s->address = found[j].pc;
			s->semaphore = found[j].semaphore;
			s->symbol[0] = '\0';
			cli_spec_object(s->object, sizeof(s->object), paths[k]);
			probe_args(o, orig, paths[k], &found[j], all_args, s);
			snprintf(s->label, sizeof(s->label), "usdt:%.50s:%.50s", found[j].provider,
				 found[j].name);
			if (spec_format(s) && spec_too_long(s, err, sizeof(err)))
				cli_die(EXIT_BAD, "%s", err);
			total++;
		}
		/* A named object, or the first one with matches. */
		if (total)
			break;
	}
	free(paths);
	if (!total)
		cli_die(EXIT_BAD, "no SDT probe matches '%s'%s", orig->text,
			orig->object[0] ? "" : " in the program or the libraries it loads");
	return total;
}

int usdt_operand_count(const struct cli_opts *o, const struct probe_spec *s, int *nargs)
{
	char (*paths)[PATH_MAX];
	char glob[256], *colon, path[PATH_MAX], err[PATH_MAX + 128];
	struct usdt_probe *found;
	int npaths, least = -1;

	snprintf(glob, sizeof(glob), "%s", s->symbol);
	colon = strchr(glob, ':');
	/* An object not found: left for usdt_sites() to say. */
	if (!colon || cli_object_path(o, s, path, sizeof(path), err, sizeof(err)))
		return -1;
	*colon = '\0';
	paths = calloc(MAX_CANDIDATE_OBJECTS, PATH_MAX);
	found = calloc(256, sizeof(*found));
	if (!paths || !found)
		cli_die(EXIT_FAIL, "out of memory");
	npaths = usdt_candidate_objects(o, s, paths, MAX_CANDIDATE_OBJECTS);
	/* The objects usdt_sites() takes: the named one, or the first with
	 * matches. */
	for (int k = 0; k < npaths && least < 0; k++) {
		struct match m = { glob, colon + 1, found, 0, 256 };

		usdt_foreach(paths[k], collect, &m);
		for (int j = 0; j < m.n; j++)
			if (least < 0 || usdt_nargs(&found[j]) < least)
				least = usdt_nargs(&found[j]);
	}
	free(found);
	free(paths);
	if (least < 0)
		return -1;
	*nargs = least;
	return 0;
}

void usdt_resolve(struct cli_opts *o)
{
	int nspecs = o->nspecs;
	struct probe_spec *sites = calloc(KPROBE_MAX_SPECS, sizeof(*sites));

	if (!sites)
		cli_die(EXIT_FAIL, "out of memory");
	for (int i = 0; i < nspecs; i++) {
		int n;

		if (o->specs[i].kind != SPEC_USDT)
			continue;
		/* the first site replaces the spec, the others go at the end */
		n = usdt_sites(o, &o->specs[i], false, sites, KPROBE_MAX_SPECS);
		if (o->nspecs + n - 1 > KPROBE_MAX_SPECS)
			cli_die(EXIT_BAD, "too many probes (at most %d)", KPROBE_MAX_SPECS);
		o->specs[i] = sites[0];
		for (int j = 1; j < n; j++)
			o->specs[o->nspecs++] = sites[j];
	}
	free(sites);
}

/* kprobe vars usdt:...: each matching SDT probe with its operands. */
int usdt_vars(const struct cli_opts *o, const struct probe_spec *s)
{
	char (*paths)[PATH_MAX] = calloc(64, PATH_MAX);
	struct usdt_probe *found = calloc(256, sizeof(*found));
	char glob[256], *colon;
	int npaths, total = 0;

	if (!paths || !found)
		cli_die(EXIT_FAIL, "out of memory");
	npaths = usdt_candidate_objects(o, s, paths, MAX_CANDIDATE_OBJECTS);
	snprintf(glob, sizeof(glob), "%s", s->symbol);
	colon = strchr(glob, ':');
	if (!colon)
		cli_die(EXIT_BAD, "bad SDT probe '%s'", s->text);
	*colon = '\0';
	for (int k = 0; k < npaths; k++) {
		struct match m = { glob, colon + 1, found, 0, 256 };

		usdt_foreach(paths[k], collect, &m);
		for (int j = 0; j < m.n; j++) {
			int n = usdt_nargs(&found[j]);

			printf("usdt:%s:%s at 0x%llx [%s]%s\n", found[j].provider, found[j].name,
			       (unsigned long long)found[j].pc, paths[k],
			       found[j].semaphore ? " (semaphore)" : "");
			for (int i = 0; i < n; i++) {
				struct spec_arg a = { 0 };
				char err[300], buf[256], *v[USDT_MAX_ARGS];

				split_args(&found[j], buf, v, USDT_MAX_ARGS);
				if (usdt_arg_plan(paths[k], &found[j], i, &a, err, sizeof(err)))
					printf("\targ%d\t%-8s %s: cannot be read\n", i, "?", v[i]);
				else
					printf("\targ%d\t%-8s %s\n", i, spec_type_name(a.type), v[i]);
			}
			total++;
		}
	}
	free(paths);
	free(found);
	if (!total)
		cli_die(EXIT_BAD, "no SDT probe matches '%s'", s->text);
	return 0;
}

static int print_probe(const struct usdt_probe *p, void *arg)
{
	void **v = arg;
	FILE *f = v[0];
	const char *base = v[1];

	fprintf(f, "usdt:%s:%s:%s\t%s%s\n", base, p->provider, p->name, p->args,
		p->semaphore ? "\t(semaphore)" : "");
	(*(int *)v[2])++;
	return 0;
}

int usdt_list(const char *path, FILE *f)
{
	const char *base = strrchr(path, '/');
	int n = 0;
	void *v[3] = { f, (void *)(base ? base + 1 : path), &n };

	usdt_foreach(path, print_probe, v);
	return n;
}
