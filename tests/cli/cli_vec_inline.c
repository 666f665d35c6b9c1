/* An inlined helper in a loop a compiler may vectorize (clang -O2 does:
 * one DW_TAG_inlined_subroutine for the scalar and the vector copies),
 * for the count of inlined copies (tests/dwarf/run-dwarf.sh). */
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) int triple(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) void apply(int *out, const int *in, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = triple(in[i]);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 37;
	int *a = calloc((size_t)n, sizeof(*a)), *b = calloc((size_t)n, sizeof(*b));

	if (!a || !b)
		return 1;
	for (int i = 0; i < n; i++)
		a[i] = i;
	apply(b, a, n);
	printf("%d\n", b[n - 1]);
	free(a);
	free(b);
	return 0;
}
