/* "Did you mean ...?": the closest of a set of names to a misspelt one. */
#ifndef KPROBE_NEARMATCH_H
#define KPROBE_NEARMATCH_H

#include <stddef.h>

struct nearmatch {
	const char *want;
	char best[256];
	unsigned int best_dist;		/* UINT_MAX: nothing close enough yet */
};

void nearmatch_init(struct nearmatch *m, const char *want);
/* Offers one candidate name. */
void nearmatch_offer(struct nearmatch *m, const char *name);
/* The best candidate if it is close enough to be a likely typo, or NULL. */
const char *nearmatch_result(const struct nearmatch *m);

/* Formats " (did you mean 'X'?)" or "" into buf. */
const char *nearmatch_hint(const struct nearmatch *m, char *buf, size_t len);

#endif
