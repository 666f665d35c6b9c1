/* A callback reached from a library loaded with dlopen() after the
 * probes were armed: libsqlite3 (Debian's, built without frame pointers)
 * calls stack_dl_row() from sqlite3_exec() once per row, ROWS rows
 * (cli_stack_dl [ROWS [MS [HOLD]]]); then, HOLD milliseconds later, the
 * library is closed and, with MS, the program sleeps MS milliseconds
 * before it ends.  Exit status 3: the
 * library could not be loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

volatile int sink;

NOINLINE int stack_dl_row(void *arg, int n, char **values, char **names)
{
	sink += n;
	__asm__ volatile("" : : "r"(values), "r"(names) : "memory");
	return 0;
}

int main(int argc, char **argv)
{
	int rows = argc > 1 ? atoi(argv[1]) : 1;
	int ms = argc > 2 ? atoi(argv[2]) : 0;
	int hold = argc > 3 ? atoi(argv[3]) : 0;
	int (*open_db)(const char *, void **);
	int (*exec)(void *, const char *, int (*)(void *, int, char **, char **), void *, char **);
	int (*close_db)(void *);
	char sql[160];
	void *h, *db = NULL;

	h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 3;
	*(void **)&open_db = dlsym(h, "sqlite3_open");
	*(void **)&exec = dlsym(h, "sqlite3_exec");
	*(void **)&close_db = dlsym(h, "sqlite3_close");
	if (!open_db || !exec || !close_db || open_db(":memory:", &db))
		return 3;
	snprintf(sql, sizeof(sql), "with recursive r(i) as (select 1 union all "
		 "select i + 1 from r where i < %d) select i from r", rows);
	if (exec(db, sql, stack_dl_row, NULL, NULL))
		return 3;
	close_db(db);
	if (hold > 0)
		usleep((useconds_t)hold * 1000);
	dlclose(h);
	if (ms > 0)
		usleep((useconds_t)ms * 1000);
	return 0;
}
