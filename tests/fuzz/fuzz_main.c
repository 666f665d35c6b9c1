/*
 * kprobes-fuzz: the differential out-of-line fuzzer.
 *
 *   kprobes-fuzz [--seed S] [--cases N] [--seconds T] [--jobs J] [--len L]
 *                [--level sse|avx|avx512] [--save-dir DIR] [--forms FILE]
 *   kprobes-fuzz --replay FILE...
 *   kprobes-fuzz --save-case SEED --save-dir DIR
 *
 * Each case runs unprobed, under a single-stepping tracer (how often each
 * boundary runs, and the registers there), and in five probed modes; any
 * difference is minimised and saved as a regression case.  Exit status 1
 * on any mismatch.  See docs/fuzzing.md.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define NFORMS 8192

struct form_stat {
	char name[56];
	uint32_t seen, accepted, refused, verified, optimized, executed;
	int err;		/* the refusal's errno */
};

struct totals {
	uint64_t cases, skipped, insns, probes, accepted, refused_einval, refused_eilseq,
		 refused_other, executed_probes, verified_probes, optimized, hits, faults,
		 untraced, mismatches, mode_runs;
};

struct stats {
	struct totals t;
	int nforms;
	struct form_stat forms[NFORMS];
};

static struct {
	uint64_t seed;
	long cases;
	double seconds;
	int jobs, len, level;
	const char *save_dir, *forms_file;
	bool verbose, minimise;
} opt = { .cases = -1, .jobs = 1, .len = 0, .level = -1, .minimise = true };

static struct fz_result *res;	/* M_NMODES results, shared with the children */
static struct fz_trace trace;

static const char *const gpr_name[16] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10",
	"r11", "r12", "r13", "r14", "r15", "rsp",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- comparison ---- */

static bool state_differs(const struct fz_case *c, const struct fz_result *a,
			  const struct fz_result *b, char *why, size_t whysz)
{
	const struct fz_state *x = &a->out, *y = &b->out;

	for (int i = 0; i < 16; i++)
		if (x->gpr[i] != y->gpr[i])
			return snprintf(why, whysz, "%s %#lx != %#lx", gpr_name[i],
					(unsigned long)x->gpr[i], (unsigned long)y->gpr[i]), true;
	if ((x->flags ^ y->flags) & 0xcd5)
		return snprintf(why, whysz, "flags %#lx != %#lx", (unsigned long)x->flags,
				(unsigned long)y->flags), true;
	/* x87 control, status, tags; mxcsr; st0-7 (not FIP/FDP/FOP: the
	 * last x87 instruction's address is the slot's when run out of line) */
	if (memcmp(x->fx, y->fx, 5) || memcmp(x->fx + 24, y->fx + 24, 4))
		return snprintf(why, whysz, "x87/mxcsr control or status"), true;
	for (int i = 0; i < 8; i++)
		if (memcmp(x->fx + 32 + 16 * i, y->fx + 32 + 16 * i, 10))
			return snprintf(why, whysz, "st%d", i), true;
	for (int i = 0; i < 16 && c->level == FZ_SSE; i++)
		if (memcmp(x->fx + 160 + 16 * i, y->fx + 160 + 16 * i, 16))
			return snprintf(why, whysz, "xmm%d", i), true;
	for (int i = 0; i < 16 && c->level == FZ_AVX; i++)
		if (memcmp(x->ymm[i], y->ymm[i], 32))
			return snprintf(why, whysz, "ymm%d", i), true;
	for (int i = 0; i < 32 && c->level == FZ_AVX512; i++)
		if (memcmp(x->zmm[i], y->zmm[i], 64))
			return snprintf(why, whysz, "zmm%d", i), true;
	for (int i = 0; i < 8 && c->level == FZ_AVX512; i++)
		if (x->k[i] != y->k[i])
			return snprintf(why, whysz, "k%d", i), true;
	for (int i = 0; i < FZ_DATA_SIZE; i++)
		if (a->data[i] != b->data[i])
			return snprintf(why, whysz, "data byte %d", i), true;
	for (int i = 0; i < FZ_STACK_CMP; i++)
		if (a->stack[i] != b->stack[i])
			return snprintf(why, whysz, "stack byte rsp0%+d", i - FZ_RED), true;
	return false;
}

static bool probed(const struct fz_result *r, int b)
{
	return r->reg_err[b] == 0;
}

/* Hits against the traced run: how often, in which order, and what the
 * handler saw. */
static bool hits_differ(const struct fz_case *c, int mode, const struct fz_result *r,
			const struct fz_trace *t, char *why, size_t whysz)
{
	int k = 0;

	if (r->bad_ip)
		return snprintf(why, whysz, "%u hits with regs->ip not at the probe + 1", r->bad_ip), true;
	for (int b = 0; b < c->nb; b++) {
		if (!probed(r, b))
			continue;
		if (r->pre[b] != t->count[b])
			return snprintf(why, whysz, "boundary +%#x ran %u times, probe hit %u times",
					c->boff[b], t->count[b], r->pre[b]), true;
		if ((mode == M_STEP || mode == M_CLOBBER) && r->post[b] != r->pre[b])
			return snprintf(why, whysz, "boundary +%#x: %u pre, %u post", c->boff[b],
					r->pre[b], r->post[b]), true;
	}
	if (t->nhits > FZ_MAX_HITS || r->nhits > FZ_MAX_HITS)
		return false;
	for (int i = 0; i < t->nhits; i++) {
		const struct fz_hit *h = &t->hits[i];

		if (!probed(r, h->b))
			continue;
		if (k >= r->nhits || r->hits[k].b != h->b)
			return snprintf(why, whysz, "hit %d: order differs at +%#x", k, c->boff[h->b]), true;
		if (r->hits[k].hash != h->hash)
			return snprintf(why, whysz, "handler at +%#x saw other registers",
					c->boff[h->b]), true;
		k++;
	}
	return false;
}

/* The traced run is a faithful reference unless the code read the trap
 * flag (pushf) and acted on it: then only its final registers tell. */
static bool trace_usable(const struct fz_trace *t, const struct fz_result *base)
{
	return t->ok && !memcmp(t->gpr, base->out.gpr, sizeof(t->gpr));
}

/* Compares mode m with the unprobed run; 0 when equal. */
static int compare_mode(const struct fz_case *c, int m, bool use_trace, char *why, size_t whysz)
{
	const struct fz_result *b = &res[M_BASE], *r = &res[m];

	if (r->status != b->status)
		return snprintf(why, whysz, "status %d (signal %d) instead of %d", r->status, r->sig,
				b->status), 1;
	if (b->status == FS_FAULT) {
		if (r->sig != b->sig || r->fault_rip != b->fault_rip ||
		    (r->sig == SIGSEGV && r->fault_addr != b->fault_addr))
			return snprintf(why, whysz, "fault: signal %d at %#lx (%#lx) instead of %d at %#lx (%#lx)",
					r->sig, (unsigned long)r->fault_rip, (unsigned long)r->fault_addr,
					b->sig, (unsigned long)b->fault_rip, (unsigned long)b->fault_addr), 1;
		return 0;
	}
	if (b->status != FS_OK)
		return 0;
	if (state_differs(c, b, r, why, whysz))
		return 1;
	if (use_trace && hits_differ(c, m, r, &trace, why, whysz))
		return 1;
	return 0;
}

/* Runs the case in the given modes (bit mask); returns the failing ones. */
static unsigned int run_case(struct fz_case *c, unsigned int modes, char *why, size_t whysz)
{
	unsigned int bad = 0;
	bool use_trace;

	why[0] = 0;
	if (fz_install(c))
		return 0;
	fz_run_mode(c, M_BASE, &res[M_BASE]);
	if (res[M_BASE].status != FS_OK && res[M_BASE].status != FS_FAULT)
		return 0;	/* the generator's fault, not the library's */
	fz_run_trace(c, &trace);
	use_trace = res[M_BASE].status == FS_OK && trace_usable(&trace, &res[M_BASE]);
	for (int m = 1; m < M_NMODES; m++) {
		char w[200];

		if (!(modes & (1u << m)))
			continue;
		fz_run_mode(c, m, &res[m]);
		if (compare_mode(c, m, use_trace, w, sizeof(w))) {
			if (!bad)
				snprintf(why, whysz, "%s: %s", fz_mode_name[m], w);
			bad |= 1u << m;
		}
	}
	return bad;
}

#define ALL_MODES (((1u << M_NMODES) - 1) & ~1u)

/* ---- statistics ---- */

static struct form_stat *form(struct stats *s, const char *name)
{
	unsigned int h = 5381;

	for (const char *p = name; *p; p++)
		h = h * 33 + (unsigned char)*p;
	for (unsigned int i = 0; i < NFORMS; i++) {
		struct form_stat *f = &s->forms[(h + i) % NFORMS];

		if (!f->name[0]) {
			snprintf(f->name, sizeof(f->name), "%s", name);
			s->nforms++;
			return f;
		}
		if (!strcmp(f->name, name))
			return f;
	}
	return NULL;
}

static void account(struct stats *s, const struct fz_case *c, bool clean, bool use_trace)
{
	struct totals *t = &s->t;

	t->cases++;
	if (res[M_BASE].status == FS_FAULT)
		t->faults++;
	if (!use_trace)
		t->untraced++;
	for (int b = 0; b < c->nb; b++) {
		const struct fz_insn *in = &c->ins[c->bins[b]];
		char name[64];
		struct form_stat *f;
		int err = res[M_STEP].reg_err[b];
		bool ran = use_trace ? trace.count[b] > 0 : res[M_STEP].pre[b] > 0;
		bool optd = false;

		for (int m = M_OPT; m <= M_SPARSE; m++)
			optd |= res[m].optimized[b];
		fz_form_name(in->bytes, in->len, name, sizeof(name));
		f = form(s, name);
		t->insns++;
		t->probes++;
		if (err == 0) {
			t->accepted++;
		} else if (err == -EINVAL) {
			t->refused_einval++;
		} else if (err == -EILSEQ) {
			t->refused_eilseq++;
		} else {
			t->refused_other++;
		}
		t->optimized += optd;
		if (ran && !err) {
			t->executed_probes++;
			t->hits += use_trace ? trace.count[b] : res[M_STEP].pre[b];
			t->verified_probes += clean;
		}
		if (!f)
			continue;
		f->seen++;
		if (err) {
			f->refused++;
			f->err = err;
		} else {
			f->accepted++;
		}
		f->executed += ran;
		f->verified += ran && !err && clean;
		f->optimized += optd;
	}
}

static void merge(struct stats *into, const struct stats *from)
{
	const uint64_t *src = (const uint64_t *)&from->t;
	uint64_t *dst = (uint64_t *)&into->t;

	for (size_t i = 0; i < sizeof(into->t) / sizeof(uint64_t); i++)
		dst[i] += src[i];
	for (int i = 0; i < NFORMS; i++) {
		const struct form_stat *f = &from->forms[i];
		struct form_stat *g;

		if (!f->name[0] || !(g = form(into, f->name)))
			continue;
		g->seen += f->seen;
		g->accepted += f->accepted;
		g->refused += f->refused;
		g->verified += f->verified;
		g->optimized += f->optimized;
		g->executed += f->executed;
		if (f->err)
			g->err = f->err;
	}
}

static int cmp_form(const void *a, const void *b)
{
	const struct form_stat *x = a, *y = b;

	if (!x->name[0] || !y->name[0])
		return !x->name[0] - !y->name[0];
	return strcmp(x->name, y->name);
}

static void report(struct stats *s, double secs, uint64_t seed)
{
	struct totals *t = &s->t;
	int accepted = 0, refused = 0, verified = 0, optimized = 0, both = 0;

	for (int i = 0; i < NFORMS; i++) {
		const struct form_stat *f = &s->forms[i];

		if (!f->name[0])
			continue;
		accepted += f->accepted > 0;
		refused += f->refused > 0;
		both += f->accepted > 0 && f->refused > 0;
		verified += f->verified > 0;
		optimized += f->optimized > 0;
	}
	printf("kprobes-fuzz: seed %#lx, %.1f s, %d job(s)\n", (unsigned long)seed, secs, opt.jobs);
	printf("  cases            %lu (%lu unprobed runs faulted, %lu without a usable trace, %lu skipped)\n",
	       (unsigned long)t->cases, (unsigned long)t->faults, (unsigned long)t->untraced,
	       (unsigned long)t->skipped);
	printf("  instructions     %lu, each probed in 5 modes\n", (unsigned long)t->insns);
	printf("  probes accepted  %lu, refused %lu (-EINVAL %lu, -EILSEQ %lu, other %lu)\n",
	       (unsigned long)t->accepted,
	       (unsigned long)(t->refused_einval + t->refused_eilseq + t->refused_other),
	       (unsigned long)t->refused_einval, (unsigned long)t->refused_eilseq,
	       (unsigned long)t->refused_other);
	printf("  probes executed  %lu (%lu hits per mode), verified %lu; optimized %lu\n",
	       (unsigned long)t->executed_probes, (unsigned long)t->hits,
	       (unsigned long)t->verified_probes, (unsigned long)t->optimized);
	printf("  forms            %d generated: %d accepted, %d refused%s, %d verified, %d optimized\n",
	       s->nforms, accepted, refused, both ? " (some both)" : "", verified, optimized);
	printf("  mismatches       %lu\n", (unsigned long)t->mismatches);
	if (opt.forms_file) {
		FILE *f = fopen(opt.forms_file, "w");

		if (!f)
			return;
		qsort(s->forms, NFORMS, sizeof(s->forms[0]), cmp_form);
		fprintf(f, "%-48s %8s %8s %8s %8s %8s  %s\n", "form", "seen", "accepted",
			"executed", "verified", "optimzd", "refused");
		for (int i = 0; i < NFORMS && s->forms[i].name[0]; i++) {
			const struct form_stat *x = &s->forms[i];

			fprintf(f, "%-48s %8u %8u %8u %8u %8u  %s\n", x->name, x->seen, x->accepted,
				x->executed, x->verified, x->optimized,
				x->refused ? (x->err == -EINVAL ? "EINVAL" : x->err == -EILSEQ ? "EILSEQ" : "other") : "");
		}
		fclose(f);
		s->nforms = 0;
	}
}

/* ---- regression cases ---- */

static const char *const level_name[] = { "sse", "avx", "avx512" };

static int save_case(const struct fz_case *c, const char *why, unsigned int modes, const char *tag)
{
	char path[512];
	FILE *f;

	if (!opt.save_dir)
		return -1;
	mkdir(opt.save_dir, 0777);
	snprintf(path, sizeof(path), "%s/%s-%016lx.case", opt.save_dir, tag, (unsigned long)c->seed);
	f = fopen(path, "w");
	if (!f)
		return perror(path), -1;
	fprintf(f, "# kprobes-fuzz case: %s\n", why);
	fprintf(f, "level %s\nstate %#lx\nbase %s\nindex %s\n", level_name[c->level],
		(unsigned long)c->seed, gpr_name[c->base_reg], gpr_name[c->index_reg]);
	fprintf(f, "data_delta %#lx\nmodes", (unsigned long)(fuzz_data - fuzz_sandbox));
	for (int m = 1; m < M_NMODES; m++)
		if (modes & (1u << m))
			fprintf(f, " %s", fz_mode_name[m]);
	fprintf(f, "\n");
	for (int b = 0; b < c->nb; b++) {
		const struct fz_insn *in = &c->ins[c->bins[b]];
		char name[64];

		fprintf(f, "insn %#06x ", in->off);
		for (int i = 0; i < in->len; i++)
			fprintf(f, "%02x", in->bytes[i]);
		fz_form_name(in->bytes, in->len, name, sizeof(name));
		fprintf(f, "%s  # %s\n", in->dead ? " dead" : "", name);
	}
	fclose(f);
	printf("  saved %s\n", path);
	return 0;
}

static int reg_index(const char *name)
{
	for (int i = 0; i < 16; i++)
		if (!strcmp(name, gpr_name[i]))
			return i;
	return -1;
}

/* RIP-relative memory operands of a saved case point into the scratch data
 * (lea's point at code); when this build places the data elsewhere
 * relative to the sandbox, move them. */
static void rebase_riprel(struct fz_insn *in, long delta)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction di;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	int32_t d;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (!delta || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, in->raw, in->rawlen, &di, ops)))
		return;
	for (int i = 0; i < di.operand_count; i++) {
		if (ops[i].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[i].mem.base != ZYDIS_REGISTER_RIP ||
		    di.raw.disp.size != 32 || di.mnemonic == ZYDIS_MNEMONIC_LEA)
			continue;
		memcpy(&d, in->raw + di.raw.disp.offset, 4);
		d += (int32_t)delta;
		memcpy(in->raw + di.raw.disp.offset, &d, 4);
	}
}

static int load_case(const char *path, struct fz_case *c, unsigned int *modes)
{
	FILE *f = fopen(path, "r");
	char line[512];
	long delta = fuzz_data - fuzz_sandbox, saved_delta = delta;

	if (!f)
		return perror(path), -1;
	memset(c, 0, sizeof(*c));
	c->from_file = true;
	*modes = 0;
	while (fgets(line, sizeof(line), f)) {
		char a[64], b[64];
		unsigned int off;

		if (line[0] == '#' || sscanf(line, "%63s", a) != 1)
			continue;
		if (!strcmp(a, "level") && sscanf(line, "%*s %63s", b) == 1) {
			for (int i = 0; i < 3; i++)
				if (!strcmp(b, level_name[i]))
					c->level = i;
		} else if (!strcmp(a, "state")) {
			c->seed = strtoull(line + 6, NULL, 0);
		} else if (!strcmp(a, "base") && sscanf(line, "%*s %63s", b) == 1) {
			c->base_reg = reg_index(b);
		} else if (!strcmp(a, "index") && sscanf(line, "%*s %63s", b) == 1) {
			c->index_reg = reg_index(b);
		} else if (!strcmp(a, "data_delta")) {
			saved_delta = strtol(line + 11, NULL, 0);
		} else if (!strcmp(a, "modes")) {
			for (int m = 1; m < M_NMODES; m++)
				if (strstr(line, fz_mode_name[m]))
					*modes |= 1u << m;
		} else if (!strcmp(a, "insn") && sscanf(line, "%*s %x %63s", &off, b) == 2 &&
			   c->n < FZ_MAX_INSN) {
			struct fz_insn *in = &c->ins[c->n];

			in->kind = FK_RAW;
			for (size_t i = 0; i + 1 < strlen(b) && in->rawlen < 15; i += 2)
				sscanf(b + i, "%2hhx", &in->raw[in->rawlen++]);
			in->dead = strstr(line, " dead") != NULL;
			c->live[c->n++] = true;
		}
	}
	fclose(f);
	if (!c->n || c->base_reg < 0 || c->index_reg < 0)
		return fprintf(stderr, "%s: not a case file\n", path), -1;
	for (int i = 0; i < c->n; i++)
		rebase_riprel(&c->ins[i], saved_delta - delta);
	if (c->level > fz_level_detect())
		c->level = -1;	/* cannot run here */
	return fz_layout(c) ? -1 : 0;
}

/* ---- minimisation ---- */

/* Delta debugging over groups (an instruction with the ones it needs:
 * push with its pop, call with its ret, setup with its string op):
 * remove chunks while the same modes still fail and the unprobed run
 * still returns normally. */
static void minimise(struct fz_case *c, unsigned int modes, char *why, size_t whysz)
{
	int groups[FZ_MAX_INSN], ng = 0, tests = 0;
	bool gone[FZ_MAX_INSN] = { false };
	char w[256];

	for (int i = 0; i < c->n - 1; i++) {
		bool seen = false;

		for (int k = 0; k < ng; k++)
			seen |= groups[k] == c->ins[i].group;
		if (!seen && c->ins[i].group != c->ins[c->n - 1].group)
			groups[ng++] = c->ins[i].group;
	}
	for (int chunk = ng / 2 > 0 ? ng / 2 : 1; chunk >= 1 && tests < 400; chunk /= 2) {
		for (int start = 0; start < ng && tests < 400; start += chunk) {
			bool any = false;

			for (int k = start; k < start + chunk && k < ng; k++) {
				any |= !gone[k];
				gone[k] = true;
			}
			if (!any)
				continue;
			for (int i = 0; i < c->n - 1; i++) {
				c->live[i] = true;
				for (int k = 0; k < ng; k++)
					if (gone[k] && c->ins[i].group == groups[k])
						c->live[i] = false;
			}
			tests++;
			if (fz_layout(c) == 0 && (run_case(c, modes, w, sizeof(w)) & modes) &&
			    res[M_BASE].status == FS_OK) {
				snprintf(why, whysz, "%s", w);
				continue;
			}
			for (int k = start; k < start + chunk && k < ng; k++)
				gone[k] = false;
		}
		if (chunk == 1)
			break;
	}
	for (int i = 0; i < c->n - 1; i++) {
		c->live[i] = true;
		for (int k = 0; k < ng; k++)
			if (gone[k] && c->ins[i].group == groups[k])
				c->live[i] = false;
	}
	fz_layout(c);
	run_case(c, modes, w, sizeof(w));
}

/* ---- driver ---- */

static void print_case(const struct fz_case *c)
{
	for (int b = 0; b < c->nb; b++) {
		const struct fz_insn *in = &c->ins[c->bins[b]];
		char name[64];

		fz_form_name(in->bytes, in->len, name, sizeof(name));
		printf("    +%#05x %-40s r%d step=%u/%u trace=%u%s\n", in->off, name,
		       res[M_STEP].reg_err[b], res[M_STEP].pre[b], res[M_STEP].post[b],
		       trace.count[b], in->dead ? " dead" : "");
	}
}

static int one_case(struct stats *s, uint64_t seed)
{
	static struct fz_case c;
	unsigned int bad;
	char why[256];
	int len = opt.len ? opt.len : 8 + (int)(seed * 0x9e3779b97f4a7c15ULL >> 59) * 2;

	fz_gen_case(&c, seed, opt.level, len);
	if (fz_layout(&c)) {
		s->t.skipped++;
		if (opt.verbose)
			printf("seed %#lx: layout failed, skipped\n", (unsigned long)seed);
		return 0;
	}
	bad = run_case(&c, ALL_MODES, why, sizeof(why));
	if (res[M_BASE].status != FS_OK && res[M_BASE].status != FS_FAULT) {
		s->t.skipped++;
		if (opt.verbose)
			printf("seed %#lx: unprobed run status %d signal %d, skipped\n",
			       (unsigned long)seed, res[M_BASE].status, res[M_BASE].sig);
		return 0;
	}
	account(s, &c, !bad, res[M_BASE].status == FS_OK && trace_usable(&trace, &res[M_BASE]));
	if (!bad)
		return 0;
	s->t.mismatches++;
	printf("MISMATCH seed %#lx: %s\n", (unsigned long)seed, why);
	if (opt.verbose)
		print_case(&c);
	if (opt.minimise && res[M_BASE].status == FS_OK) {
		minimise(&c, bad, why, sizeof(why));
		printf("  minimised to %d instructions: %s\n", c.nb, why);
		print_case(&c);
	}
	save_case(&c, why, bad, "mismatch");
	return 1;
}

static void worker(struct stats *s, int w, double deadline)
{
	res = mmap(NULL, sizeof(*res) * M_NMODES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (res == MAP_FAILED)
		exit(2);
	for (long k = w; k < opt.cases; k += opt.jobs) {
		if (opt.seconds > 0 && now() > deadline)
			break;
		one_case(s, opt.seed + (uint64_t)k);
		fflush(stdout);
	}
}

static int replay(int argc, char **argv)
{
	static struct fz_case c;
	int failed = 0;

	res = mmap(NULL, sizeof(*res) * M_NMODES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	for (int i = 0; i < argc; i++) {
		unsigned int modes, bad;
		char why[256];

		if (load_case(argv[i], &c, &modes)) {
			failed++;
			continue;
		}
		if (c.level < 0) {
			printf("SKIP %s: needs vector state this CPU lacks\n", argv[i]);
			continue;
		}
		bad = run_case(&c, ALL_MODES, why, sizeof(why));
		if (res[M_BASE].status != FS_OK && res[M_BASE].status != FS_FAULT) {
			printf("FAIL %s: the unprobed run did not complete (status %d)\n", argv[i],
			       res[M_BASE].status);
			failed++;
		} else if (bad) {
			printf("FAIL %s: %s (failing modes:", argv[i], why);
			for (int m = 1; m < M_NMODES; m++)
				if (bad & (1u << m))
					printf(" %s", fz_mode_name[m]);
			printf(")\n");
			failed++;
		} else {
			printf("ok   %s (%d instructions)\n", argv[i], c.nb);
		}
	}
	return failed ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: kprobes-fuzz [--seed S] [--cases N] [--seconds T] [--jobs J] [--len L]\n"
			"                    [--level sse|avx|avx512] [--save-dir DIR] [--forms FILE]\n"
			"                    [--no-minimise] [--verbose] [--self-test]\n"
			"       kprobes-fuzz --replay FILE...\n"
			"       kprobes-fuzz --save-case SEED --save-dir DIR\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seed", 1, 0, 's' }, { "cases", 1, 0, 'n' }, { "seconds", 1, 0, 't' },
		{ "jobs", 1, 0, 'j' }, { "len", 1, 0, 'l' }, { "level", 1, 0, 'L' },
		{ "save-dir", 1, 0, 'd' }, { "forms", 1, 0, 'f' }, { "replay", 0, 0, 'r' },
		{ "save-case", 1, 0, 'S' }, { "no-minimise", 0, 0, 'M' }, { "verbose", 0, 0, 'v' },
		{ "self-test", 0, 0, 'T' },
		{ 0 }
	};
	bool do_replay = false, seed_given = false;
	long save_seed = -1;
	struct stats *all;
	double t0 = now();
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt.seed = strtoull(optarg, NULL, 0); seed_given = true; break;
		case 'n': opt.cases = atol(optarg); break;
		case 't': opt.seconds = atof(optarg); break;
		case 'j': opt.jobs = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
		case 'l': opt.len = atoi(optarg); break;
		case 'L':
			for (int i = 0; i < 3; i++)
				if (!strcmp(optarg, level_name[i]))
					opt.level = i;
			break;
		case 'd': opt.save_dir = optarg; break;
		case 'f': opt.forms_file = optarg; break;
		case 'r': do_replay = true; break;
		case 'S': save_seed = strtol(optarg, NULL, 0); break;
		case 'M': opt.minimise = false; break;
		case 'v': opt.verbose = true; break;
		case 'T': fz_self_test = true; break;
		default: usage();
		}
	}
	if (opt.level < 0 || opt.level > fz_level_detect())
		opt.level = fz_level_detect();
	if (do_replay)
		return replay(argc - optind, argv + optind);
	/* --seconds alone runs until the time is up; --cases alone, 200 by default. */
	if (opt.cases < 0)
		opt.cases = opt.seconds > 0 ? 1L << 40 : 200;
	if (!seed_given)
		opt.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (save_seed >= 0) {
		static struct fz_case one;
		char why[256];
		unsigned int bad;

		res = mmap(NULL, sizeof(*res) * M_NMODES, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		fz_gen_case(&one, (uint64_t)save_seed, opt.level, opt.len ? opt.len : 24);
		if (fz_layout(&one))
			return 1;
		bad = run_case(&one, ALL_MODES, why, sizeof(why));
		return save_case(&one, bad ? why : "known good sample", ALL_MODES, "sample") || bad;
	}
	all = mmap(NULL, sizeof(struct stats) * (size_t)(opt.jobs + 1), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (all == MAP_FAILED)
		return 2;
	printf("kprobes-fuzz: seed %#lx, level %s\n", (unsigned long)opt.seed, level_name[opt.level]);
	for (int w = 0; w < opt.jobs; w++) {
		pid_t pid = fork();

		if (pid == 0) {
			worker(&all[w + 1], w, t0 + opt.seconds);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	for (int w = 0; w < opt.jobs; w++)
		merge(&all[0], &all[w + 1]);
	report(&all[0], now() - t0, opt.seed);
	return all[0].t.mismatches ? 1 : 0;
}
