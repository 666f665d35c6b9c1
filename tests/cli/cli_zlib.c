/* A program with its own copy of libz (the system's, linked as usual):
 * an unqualified probe on a libz function must land in it, never in a
 * copy the kprobe agent carries.  Usage: cli_zlib N (calls adler32 N times). */
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1;
	uLong sum = adler32(0L, Z_NULL, 0);

	for (long i = 0; i < n; i++)
		sum = adler32(sum, (const Bytef *)"kprobe", 6);
	printf("adler32 %lx\n", sum);
	return 0;
}
