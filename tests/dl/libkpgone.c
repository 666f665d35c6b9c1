/* A shared object that tests/test_gone.c loads and unloads: nothing else in
 * a test process depends on it, whatever the build (libm, which the
 * sanitizer runtimes link, never unloads there). */
long kpgone_cube(long x);

long kpgone_cube(long x)
{
	return x * x * x;
}
