/* A library whose constructor calls one of its own functions: kprobe must
 * count that call (tests/record/run-record.sh). */
__attribute__((noinline, visibility("default"))) int ctor_helper(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static volatile int ctor_result;

__attribute__((constructor)) static void lib_constructor(void)
{
	ctor_result = ctor_helper(41);
}
