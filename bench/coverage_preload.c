/* libkprobes-coverage.so: preloaded by kprobes-bench --coverage into an
 * executable, whose functions it measures before the program runs. */
#include "bench.h"

__attribute__((constructor)) static void coverage_preload(void)
{
	bench_coverage_preloaded();
}
