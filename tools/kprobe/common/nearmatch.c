/* Edit-distance suggestions for unknown names. */
#include "nearmatch.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MAXLEN 255

void nearmatch_init(struct nearmatch *m, const char *want)
{
	m->want = want;
	m->best[0] = '\0';
	m->best_dist = UINT_MAX;
}

/* Levenshtein distance, giving up (returning limit) once it reaches limit. */
static unsigned int distance(const char *a, const char *b, unsigned int limit)
{
	unsigned int row[MAXLEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > MAXLEN || lb > MAXLEN)
		return limit;
	if ((la > lb ? la - lb : lb - la) >= limit)
		return limit;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned int)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned int diag = row[0], lowest;

		row[0] = (unsigned int)i;
		lowest = row[0];
		for (size_t j = 1; j <= lb; j++) {
			unsigned int up = row[j];
			unsigned int best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
			if (best < lowest)
				lowest = best;
		}
		if (lowest >= limit)
			return limit;
	}
	return row[lb];
}

void nearmatch_offer(struct nearmatch *m, const char *name)
{
	unsigned int d = distance(m->want, name, m->best_dist == UINT_MAX ? 64 : m->best_dist);

	if (d < m->best_dist && d < 64) {
		m->best_dist = d;
		snprintf(m->best, sizeof(m->best), "%s", name);
	}
}

const char *nearmatch_result(const struct nearmatch *m)
{
	size_t len = strlen(m->want);
	unsigned int limit = len <= 4 ? 1 : len <= 9 ? 2 : 3;

	if (m->best_dist == UINT_MAX || m->best_dist == 0 || m->best_dist > limit)
		return NULL;
	return m->best;
}

const char *nearmatch_hint(const struct nearmatch *m, char *buf, size_t len)
{
	const char *best = nearmatch_result(m);

	if (best)
		snprintf(buf, len, " (did you mean '%s'?)", best);
	else if (len)
		buf[0] = '\0';
	return buf;
}
