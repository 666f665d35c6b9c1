/* A program whose variables the DWARF tests read by name (built at -O0 and
 * -O2 by tools/kprobe/kprobe.mk).  The lines marked "probe:" are where the
 * tests compare what kprobe prints with what gdb prints. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct header {
	int len;
	unsigned short flags;
	char tag[8];
	/* bit-fields: read with shifts, signed ones sign-extended */
	unsigned int urgent : 1;
	int prio : 5;
	unsigned int seq : 12;
};

struct request {
	const char *name;
	struct header hdr;
	double weight;
	long vals[4];
	enum { REQ_GET = 1, REQ_PUT = 7 } kind;
	struct header *hp;	/* a pointer to a struct: ->hp->len */
};

/* Keeps the compiler from knowing the values at -O2. */
volatile int sink;
/* A file-scope static, read by name at the probed lines. */
static long header_calls;

static inline __attribute__((always_inline)) int scale(int x, int k)
{
	return x * k + 1;
}

/* Inlined at -O2, out of line at -O0: its calls are counted the same. */
static inline long mix(long a, long b)
{
	return (a ^ (b << 3)) + sink;
}

__attribute__((noinline)) int parse_header(struct request *req, int len, double w)
{
	int total = len * 3;
	long sum = req->vals[1] + req->vals[2];

	header_calls++;
	sink = total + (int)sum;	/* probe: parse_header */
	req->weight = w * 2;
	return total + (int)sum + scale(len, 2) + (int)(header_calls & 1);
}

__attribute__((noinline)) long accumulate(const long *v, int n, float f)
{
	long acc = 0;

	for (int i = 0; i < n; i++) {
		acc += v[i] * scale(i, n);
		sink = (int)acc;	/* probe: accumulate */
	}
	return acc + (long)f;
}

struct span {
	long lo;
	long hi;
};

/* At -O2 its struct parameter is in two registers: a composite location
 * (DW_OP_piece), each field in its own piece. */
__attribute__((noinline)) long span_len(struct span s, int k)
{
	long r = (s.hi - s.lo) * k;

	sink = (int)r;	/* probe: span_len */
	return r + s.lo + s.hi;
}

/* A call the compiler cannot see through (gcc would otherwise learn which
 * registers it leaves alone). */
#ifdef __clang__
#define OPAQUE __attribute__((noinline))
#else
#define OPAQUE __attribute__((noipa))
#endif
OPAQUE long opaque(long v)
{
	sink += (int)v;
	return v * 3;
}

/* After the call, at -O2, x, y and req are no longer in any register: their
 * locations are their values at the entry (DW_OP_entry_value), which gdb
 * recovers from the caller's call-site parameters (DW_AT_call_value). */
__attribute__((noinline)) long after_call(long x, int y, struct request *req)
{
	long r = opaque(x + y);

	sink = (int)r;	/* probe: after_call */
	return r + req->hdr.len;
}

/* Floating-point return values (xmm0): retval prints them as the DWARF
 * return type says. */
__attribute__((noinline)) double weigh(const struct request *req, int k)
{
	return req->weight * k + sink * 0.0;
}

__attribute__((noinline)) float ratio(int a, int b)
{
	return (float)a / (float)b + (float)(sink & 0);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	struct request *req = calloc(1, sizeof(*req));
	long total = 0;

	if (!req)
		return 1;
	/* "block": the fault signals blocked, so that a tracer's loads cannot
	 * rely on catching a fault (they must take the slow, safe way). */
	if (argc > 2 && !strcmp(argv[2], "block")) {
		sigset_t set;

		sigemptyset(&set);
		sigaddset(&set, SIGSEGV);
		sigaddset(&set, SIGBUS);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	req->name = "GET /index.html";
	req->hdr.len = 42;
	req->hdr.flags = 0x8001;
	strcpy(req->hdr.tag, "hdr");
	req->hdr.urgent = 1;
	req->hdr.prio = -11;
	req->hdr.seq = 3001;
	req->kind = REQ_PUT;
	req->hp = &req->hdr;
	for (int i = 0; i < 4; i++)
		req->vals[i] = (i + 1) * -10;
	for (int r = 0; r < rounds; r++) {
		total += parse_header(req, r + 5, 1.5 + r);
		total += accumulate(req->vals, 3, 0.25f);
		total += span_len((struct span){ r + 2, r * 5 + 13 }, r + 1);
		total += after_call(r + 7, 11, req);
		total += (long)(weigh(req, r + 1) + ratio(r + 1, 3));
	}
	/* A call whose target DWARF does not name (an indirect call): at the
	 * entry values of after_call there is no call site to go by. */
	long (*volatile call)(long, int, struct request *) = after_call;
	total += call(rounds, 5, req);
	for (int r = 0; r < rounds * 7; r++)
		total = mix(total, r);
	if (rounds > 2)
		total = mix(total, mix(rounds, total));
	printf("%ld %d\n", total, sink);
	free(req);
	return 0;
}
