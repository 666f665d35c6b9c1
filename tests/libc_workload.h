/* A short run through libc code built without frame pointers (qsort_r with
 * a callback, bsearch, strtod, strtol, snprintf, getenv, strtok_r): the
 * workload the stack suites probe libc under and unwind from. */
#ifndef KP_TEST_LIBC_WORKLOAD_H
#define KP_TEST_LIBC_WORKLOAD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long libc_workload_sink;

static int libc_workload_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static int libc_workload_cmp_r(const void *a, const void *b, void *arg)
{
	(void)arg;
	return libc_workload_cmp(a, b);
}

static void libc_workload(void)
{
	char buf[128], tok[] = "a b,c d";
	int v[40], key = 7;
	char *save;

	for (int i = 0; i < 40; i++)
		v[i] = (i * 17) % 40;
	qsort_r(v, 40, sizeof(int), libc_workload_cmp_r, NULL);
	libc_workload_sink += (unsigned long)bsearch(&key, v, 40, sizeof(int), libc_workload_cmp);
	libc_workload_sink += (unsigned long)strtod("3.14159e2", NULL);
	libc_workload_sink += (unsigned long)strtol("-12345", NULL, 10) + strtoul("0x1f", NULL, 16);
	libc_workload_sink += (unsigned long)atoi("42");
	libc_workload_sink += (unsigned long)snprintf(buf, sizeof(buf), "%d %s %5.2f %lx", 12, "x",
						      2.5, 255UL);
	libc_workload_sink += (unsigned long)getenv("PATH");
	for (char *t = strtok_r(tok, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
		libc_workload_sink += (unsigned long)t[0];
}

#endif
