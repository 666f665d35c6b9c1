/* A shared object tests/test_stack_cache.c builds twice, with FRAME bytes
 * of locals (256 and 1024): the code keeps its layout, so the return
 * address of the callback's call is at the same offset in both, but the
 * rule that unwinds from it (the CFA's offset from the stack pointer)
 * differs.  Loaded one after the other at the same address, a rule kept
 * from the first applied to the second gives the wrong caller.  Built
 * without frame pointers, so none rescues a wrong rule. */
#ifndef FRAME
#define FRAME 256
#endif

typedef long (*kpframe_cb)(long);

long kpframe_call(kpframe_cb cb, long x);

__attribute__((noinline)) long kpframe_call(kpframe_cb cb, long x)
{
	volatile char buf[FRAME];
	long r;

	buf[0] = (char)x;
	buf[FRAME - 1] = (char)(x >> 8);
	r = cb(x + buf[0]);
	return r + buf[FRAME - 1];
}
