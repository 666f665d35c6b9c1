/* Soak test: the bytes the process has allocated and not freed.
 *
 * glibc's own statistics (mallinfo2) count what its arenas hold, not what
 * the program holds: chunks cached per thread, arenas of threads that have
 * exited and fragmentation all move that figure by hundreds of KiB between
 * identical runs, depending on scheduling.  So the soak replaces malloc (the
 * executable's definitions interpose glibc's for every object, the dynamic
 * linker included) with a thin layer over glibc's that keeps an exact count
 * of live bytes, and per call site the bytes still held, to say where a
 * leak comes from.
 *
 * Under AddressSanitizer, which replaces malloc itself, its own count of
 * allocated bytes is used instead.
 */
#include "soak.h"
#include "elf/symbols.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
/* libasan's; GCC ships no header for it. */
size_t __sanitizer_get_current_allocated_bytes(void);

size_t soak_live_bytes(void)
{
	return __sanitizer_get_current_allocated_bytes();
}

void soak_alloc_mark(void)
{
}

void __sanitizer_print_memory_profile(size_t top_percent, size_t max_contexts);

/* AddressSanitizer knows every live block's allocation stack, not what
 * was live at the mark: its largest holders, on stderr. */
long soak_alloc_unwinder_growth(void)
{
	return 0;	/* AddressSanitizer's count has no call sites */
}

void soak_alloc_report(FILE *out)
{
	fprintf(out, "the largest live allocations (on stderr):\n");
	fflush(out);
	__sanitizer_print_memory_profile(90, 12);
}

#else

void *__libc_malloc(size_t n);
void __libc_free(void *p);

#define HDR 32u				/* keeps the 16-byte alignment */
#define HDR_MAGIC 0x6b70736bu
#define NSITES 4096u

/* Just below every pointer handed out. */
struct hdr {
	void *raw;			/* what glibc returned */
	size_t size;			/* what the caller asked for */
	uint32_t site;
	uint32_t magic;
};

struct alloc_site {
	_Atomic uintptr_t ip;
	_Atomic long bytes;
	_Atomic long blocks;
};

static struct alloc_site asites[NSITES];
static long site_mark[NSITES];
static _Atomic long live;

/* Lock-free find-or-insert of a call site; slot 0 collects the overflow. */
static uint32_t site_of(uintptr_t ip)
{
	uint32_t h = (uint32_t)((ip * 0x9e3779b97f4a7c15ull) >> 52) % NSITES;

	for (uint32_t i = 0; i < 64; i++) {
		uint32_t k = (h + i) % NSITES;
		uintptr_t cur = atomic_load_explicit(&asites[k].ip, memory_order_acquire);

		if (!k)
			continue;
		if (cur == ip)
			return k;
		if (!cur && atomic_compare_exchange_strong(&asites[k].ip, &cur, ip))
			return k;
		if (cur == ip)
			return k;
	}
	return 0;
}

static void *track(void *raw, size_t align, size_t n, uintptr_t ip)
{
	uintptr_t p;
	struct hdr *h;

	if (!raw)
		return NULL;
	p = ((uintptr_t)raw + HDR + align - 1) & ~(uintptr_t)(align - 1);
	h = (struct hdr *)(p - HDR);
	h->raw = raw;
	h->size = n;
	h->site = site_of(ip);
	h->magic = HDR_MAGIC;
	atomic_fetch_add_explicit(&asites[h->site].bytes, (long)n, memory_order_relaxed);
	atomic_fetch_add_explicit(&asites[h->site].blocks, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&live, (long)n, memory_order_relaxed);
	return (void *)p;
}

static struct hdr *hdr_of(void *p)
{
	struct hdr *h = (struct hdr *)((uintptr_t)p - HDR);

	return h->magic == HDR_MAGIC ? h : NULL;
}

static void *alloc_aligned(size_t align, size_t n, uintptr_t ip)
{
	if (align < 16)
		align = 16;
	if (align & (align - 1) || n > SIZE_MAX / 2 - align - HDR)
		return NULL;
	return track(__libc_malloc(n + HDR + align - 16), align, n, ip);
}

static void untrack_free(void *p)
{
	struct hdr *h;

	if (!p)
		return;
	h = hdr_of(p);
	if (!h)
		return;		/* not ours: the dynamic linker's early memory */
	h->magic = 0;
	atomic_fetch_sub_explicit(&asites[h->site].bytes, (long)h->size, memory_order_relaxed);
	atomic_fetch_sub_explicit(&asites[h->site].blocks, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&live, (long)h->size, memory_order_relaxed);
	__libc_free(h->raw);
}

#define CALLER ((uintptr_t)__builtin_return_address(0))

void *malloc(size_t n)
{
	return alloc_aligned(16, n, CALLER);
}

void free(void *p)
{
	untrack_free(p);
}

void *calloc(size_t a, size_t b)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(a, b, &n))
		return NULL;
	p = alloc_aligned(16, n, CALLER);
	if (p)
		memset(p, 0, n);
	return p;
}

static void *realloc_at(void *old, size_t n, uintptr_t ip)
{
	struct hdr *h;
	void *p;

	if (!old)
		return alloc_aligned(16, n, ip);
	if (!n) {
		untrack_free(old);
		return NULL;
	}
	h = hdr_of(old);
	p = alloc_aligned(16, n, ip);
	if (p && h)
		memcpy(p, old, h->size < n ? h->size : n);
	if (p)
		untrack_free(old);
	return p;
}

void *realloc(void *old, size_t n)
{
	return realloc_at(old, n, CALLER);
}

void *reallocarray(void *old, size_t a, size_t b)
{
	size_t n;

	if (__builtin_mul_overflow(a, b, &n))
		return NULL;
	return realloc_at(old, n, CALLER);
}

void *memalign(size_t align, size_t n)
{
	return alloc_aligned(align, n, CALLER);
}

void *aligned_alloc(size_t align, size_t n)
{
	return alloc_aligned(align, n, CALLER);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || align & (align - 1))
		return 22;	/* EINVAL */
	p = alloc_aligned(align, n, CALLER);
	if (!p)
		return 12;	/* ENOMEM */
	*out = p;
	return 0;
}

void *valloc(size_t n)
{
	return alloc_aligned((size_t)sysconf(_SC_PAGESIZE), n, CALLER);
}

void *pvalloc(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return alloc_aligned(pg, (n + pg - 1) & ~(pg - 1), CALLER);
}

size_t malloc_usable_size(void *p)
{
	struct hdr *h = p ? hdr_of(p) : NULL;

	return h ? h->size : 0;
}

size_t soak_live_bytes(void)
{
	return (size_t)atomic_load(&live);
}

void soak_alloc_mark(void)
{
	for (uint32_t i = 0; i < NSITES; i++)
		site_mark[i] = atomic_load(&asites[i].bytes);
}

static bool in_unwinder(uintptr_t ip)
{
	struct ksym obj;

	return ip && ksym_object_of(ip - 1, &obj) == 0 && obj.basename &&
	       !strncmp(obj.basename, "libgcc_s.so", 11);
}

/* libgcc builds sorted tables for the frames the library registers (its
 * executable pools') the first time an unwind goes through them. */
long soak_alloc_unwinder_growth(void)
{
	long sum = 0;

	for (uint32_t i = 0; i < NSITES; i++) {
		long d = atomic_load(&asites[i].bytes) - site_mark[i];

		if (d && in_unwinder(atomic_load(&asites[i].ip)))
			sum += d;
	}
	return sum;
}

/* The call sites holding the most bytes more than at the mark. */
void soak_alloc_report(FILE *out)
{
	bool shown[NSITES] = { false };

	fprintf(out, "call sites holding more than at the baseline:\n");
	for (int n = 0; n < 12; n++) {
		long best = 0;
		uint32_t at = 0;

		for (uint32_t i = 0; i < NSITES; i++) {
			long d = atomic_load(&asites[i].bytes) - site_mark[i];

			if (!shown[i] && d > best) {
				best = d;
				at = i;
			}
		}
		if (!best)
			break;
		shown[at] = true;
		soak_alloc_print_site(out, atomic_load(&asites[at].ip), best,
				      atomic_load(&asites[at].blocks));
	}
}

#endif

/* The library's symbol tables name static functions too, which dladdr
 * cannot (the report runs after the run, off any hot path). */
void soak_alloc_print_site(FILE *out, uintptr_t ip, long bytes, long blocks)
{
	struct ksym sym;

	fprintf(out, "  %+9ld bytes (%ld blocks live) from ", bytes, blocks);
	if (ip && ksym_lookup_addr(ip - 1, &sym) == 0 && sym.name)
		fprintf(out, "%s+%#lx (%s)\n", sym.name, (unsigned long)(ip - sym.addr),
			sym.basename);
	else if (ip && ksym_object_of(ip - 1, &sym) == 0)
		fprintf(out, "%s+%#lx\n", sym.basename, (unsigned long)(ip - sym.load_bias));
	else
		fprintf(out, "%#lx\n", (unsigned long)ip);
}
