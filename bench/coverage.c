/* kprobes-bench --coverage OBJECT: the share of an ELF object's function
 * entries that jump optimization can take, and the reasons for the rest. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "elf/symbols.h"

#define MAX_REASONS 32

struct tally {
	uintptr_t *seen;
	size_t nseen, cap;
	long total, ok;
	const char *why[MAX_REASONS];
	long count[MAX_REASONS];
	int nwhy;
};

static bool seen_before(struct tally *t, uintptr_t addr)
{
	for (size_t i = t->nseen; i > 0 && i + 64 > t->nseen; i--)
		if (t->seen[i - 1] == addr)
			return true;
	if (t->nseen == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->seen = realloc(t->seen, t->cap * sizeof(*t->seen));
		if (!t->seen)
			exit(1);
	}
	t->seen[t->nseen++] = addr;
	return false;
}

static size_t padding_after(uintptr_t end)
{
	struct ksym other;
	size_t n = 0;

	while (n < 4 && ksym_lookup_addr(end + n, &other) == -ENOENT)
		n++;
	return n;
}

static int count_one(const struct ksym *sym, void *arg)
{
	struct tally *t = arg;
	const char *why;
	int i;

	if (!sym->size || seen_before(t, sym->addr))
		return 0;
	t->total++;
	why = arch_opt_check(sym->addr, sym->addr, sym->size, padding_after(sym->addr + sym->size));
	if (!why) {
		t->ok++;
		return 0;
	}
	for (i = 0; i < t->nwhy; i++)
		if (!strcmp(t->why[i], why))
			break;
	if (i == t->nwhy && t->nwhy < MAX_REASONS)
		t->why[t->nwhy++] = why;
	if (i < t->nwhy)
		t->count[i]++;
	return 0;
}

int bench_coverage(const char *object, bool json)
{
	struct tally t;

	memset(&t, 0, sizeof(t));
	if (ksym_foreach(object, "*", count_one, &t) || !t.total) {
		fprintf(stderr, "kprobes-bench: no functions found in %s (is it loaded?)\n", object);
		free(t.seen);
		return 2;
	}
	if (json) {
		printf("{\"object\":\"%s\",\"functions\":%ld,\"optimizable\":%ld,\"share\":%.4f,\"reasons\":{",
		       object, t.total, t.ok, (double)t.ok / (double)t.total);
		for (int i = 0; i < t.nwhy; i++)
			printf("%s\"%s\":%ld", i ? "," : "", t.why[i], t.count[i]);
		printf("}}\n");
	} else {
		printf("%s: %ld of %ld function entries can be jump-optimized (%.1f%%)\n", object,
		       t.ok, t.total, 100.0 * (double)t.ok / (double)t.total);
		for (int i = 0; i < t.nwhy; i++)
			printf("  %6ld  %s\n", t.count[i], t.why[i]);
	}
	free(t.seen);
	return 0;
}
