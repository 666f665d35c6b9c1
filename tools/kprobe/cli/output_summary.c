/* End-of-run summaries: hit counts per probe point and latency histograms. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "output.h"

/* Text rows by hits, most first; equal counts keep the probes' order. */
static int by_hits(const void *a, const void *b)
{
	const struct count_row *x = *(const struct count_row *const *)a;
	const struct count_row *y = *(const struct count_row *const *)b;

	if (x->hits != y->hits)
		return x->hits > y->hits ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Whether the rows come from more than one process (-f). */
static bool several_processes(const struct count_row *rows, int n)
{
	for (int i = 1; i < n; i++)
		if (rows[i].desc->pid != rows[0].desc->pid)
			return true;
	return false;
}

/* Names and objects come from the target's session memory: escaped and
 * bounded by their fields. */
static void count_line(FILE *f, const struct count_row *r, int w, bool pid)
{
	const struct kps_desc *d = r->desc;

	if (pid)
		fprintf(f, "%7u  ", (unsigned int)d->pid);
	if (r->inlined_of) {
		char name[300];

		snprintf(name, sizeof(name), "%s (inlined in %.*s)", r->inlined_of,
			 (int)strnlen(d->name, sizeof(d->name)), d->name);
		text_field_to(f, name, strlen(name), w);
	} else {
		text_field_to(f, d->name, sizeof(d->name), w);
	}
	fprintf(f, "  0x%016" PRIx64 "  ", d->addr);
	text_field_to(f, d->object, sizeof(d->object), 20);
	fprintf(f, " %12" PRIu64 " %10" PRIu64 "\n", r->hits, r->missed);
}

static void counts_text(FILE *f, const struct count_row *rows, int n, uint64_t lost,
			bool zeros)
{
	const struct count_row **order = malloc((size_t)(n ? n : 1) * sizeof(*order));
	bool pid = several_processes(rows, n);
	int w = 5, hidden = 0;

	for (int i = 0; i < n; i++) {
		const struct kps_desc *d = rows[i].desc;

		int dw = (int)text_field_width(d->name, sizeof(d->name));

		if (rows[i].inlined_of)
			dw += (int)strlen(rows[i].inlined_of) + (int)strlen(" (inlined in )");
		if (dw > w)
			w = dw;
	}
	if (pid)
		fprintf(f, "%7s  ", "PID");
	fprintf(f, "%-*s  %-18s  %-20s %12s %10s\n", w, "PROBE", "ADDRESS", "OBJECT", "HITS",
		"MISSED");
	if (order) {
		for (int i = 0; i < n; i++)
			order[i] = &rows[i];
		qsort(order, (size_t)n, sizeof(*order), by_hits);
	}
	for (int i = 0; i < n; i++) {
		const struct count_row *r = order ? order[i] : &rows[i];

		if (!zeros && !r->hits && !r->missed) {
			hidden++;
			continue;
		}
		count_line(f, r, w, pid);
	}
	free(order);
	if (hidden)
		fprintf(f, "(%d probe%s with no hits not shown: -z shows them)\n", hidden,
			hidden == 1 ? "" : "s");
	if (lost)
		fprintf(f, "lost: %" PRIu64 "\n", lost);
}

static void counts_json(const struct output *o, const struct count_row *rows, int n,
			uint64_t lost)
{
	FILE *f = o->f;

	fputs("{\"probes\":[", f);
	for (int i = 0; i < n; i++) {
		const struct kps_desc *d = rows[i].desc;

		fputs(i ? ",{\"probe\":" : "{\"probe\":", f);
		if (rows[i].inlined_of) {
			json_string(f, rows[i].inlined_of, strlen(rows[i].inlined_of));
			fputs(",\"inlined_in\":", f);
		}
		json_string(f, d->name, strnlen(d->name, sizeof(d->name)));
		fprintf(f, ",\"address\":\"0x%" PRIx64 "\",\"object\":", d->addr);
		json_string(f, d->object, strnlen(d->object, sizeof(d->object)));
		fprintf(f, ",\"hits\":%" PRIu64 ",\"missed\":%" PRIu64 "}", rows[i].hits,
			rows[i].missed);
	}
	fprintf(f, "],\"lost\":%" PRIu64, lost);
	if (o->counts_json_more)
		o->counts_json_more(o->counts_json_more_arg, f);
	fputs("}\n", f);
}

void output_counts(struct output *o, const struct count_row *rows, int n, uint64_t lost)
{
	if (o->format == FMT_JSON)
		counts_json(o, rows, n, lost);
	else
		counts_text(o->f, rows, n, lost, o->zeros);
	fflush(o->f);
}

/* Bucket b holds [low, high] ns (see kps_bucket()). */
static uint64_t bucket_low(unsigned int b)
{
	return b ? 1ull << b : 0;
}

static uint64_t bucket_high(unsigned int b)
{
	return b ? (b == 63 ? UINT64_MAX : (2ull << b) - 1) : 1;
}

static void bucket_range(const uint64_t *buckets, int *lo, int *hi)
{
	*lo = -1;
	*hi = -1;
	for (int b = 0; b < KPS_BUCKETS; b++) {
		if (!buckets[b])
			continue;
		if (*lo < 0)
			*lo = b;
		*hi = b;
	}
}

static void latency_text(FILE *f, const char *function, const uint64_t *buckets,
			 uint64_t lost)
{
	uint64_t total = 0, max = 0;
	int lo, hi;

	for (int b = 0; b < KPS_BUCKETS; b++) {
		total += buckets[b];
		if (buckets[b] > max)
			max = buckets[b];
	}
	fputs("latency of ", f);
	text_escape_to(f, function, strlen(function));
	fprintf(f, ": %" PRIu64 " calls\n", total);
	bucket_range(buckets, &lo, &hi);
	if (lo < 0)
		return;
	fprintf(f, "%20s : %-10s distribution\n", "nsecs", "count");
	for (int b = lo; b <= hi; b++) {
		int stars = (int)(buckets[b] * 40 / max);
		char bar[41];

		memset(bar, '*', (size_t)stars);
		memset(bar + stars, ' ', (size_t)(40 - stars));
		bar[40] = '\0';
		fprintf(f, "%9" PRIu64 " -> %-9" PRIu64 " : %-10" PRIu64 " |%s|\n", bucket_low(b),
			bucket_high(b), buckets[b], bar);
	}
	if (lost)
		fprintf(f, "missed: %" PRIu64 "\n", lost);
}

static void latency_json(FILE *f, const char *function, const uint64_t *buckets)
{
	uint64_t total = 0;
	int lo, hi;

	for (int b = 0; b < KPS_BUCKETS; b++)
		total += buckets[b];
	fputs("{\"function\":", f);
	json_string(f, function, strlen(function));
	fprintf(f, ",\"count\":%" PRIu64 ",\"histogram\":[", total);
	bucket_range(buckets, &lo, &hi);
	for (int b = lo; lo >= 0 && b <= hi; b++)
		fprintf(f, "%s{\"low_ns\":%" PRIu64 ",\"high_ns\":%" PRIu64 ",\"count\":%" PRIu64 "}",
			b > lo ? "," : "", bucket_low(b), bucket_high(b), buckets[b]);
	fputs("]}\n", f);
}

void output_latency(struct output *o, const char *function, const uint64_t *buckets,
		    uint64_t lost)
{
	if (o->format == FMT_JSON)
		latency_json(o->f, function, buckets);
	else
		latency_text(o->f, function, buckets, lost);
	fflush(o->f);
}
