/* Entry values passed in a callee-saved register: at -O2 handle() reuses
 * k's register, so k at the probe line is its value at the entry
 * (DW_OP_entry_value), which the call site in main gives as the loop's
 * counter, kept in a register the ABI says calls preserve (rbx); the
 * call-frame information says nothing about that register in handle(),
 * which saves none. */
#include <stdlib.h>

struct req {
	int len;
};

volatile int sink;

/* A call the compiler cannot see through: the loop's counter must live
 * in a register it preserves. */
#ifdef __clang__
#define OPAQUE __attribute__((noinline))
#else
#define OPAQUE __attribute__((noipa))
#endif
OPAQUE void tick(void)
{
	sink++;
}

__attribute__((noinline)) int handle(struct req *r, int k)
{
	int t = r->len * k;

	sink = t;	/* probe: handle */
	return t + 1;
}

int main(int argc, char **argv)
{
	struct req r = { 7 };
	int n = argc > 1 ? atoi(argv[1]) : 3, total = 0;

	for (int i = 0; i < n; i++) {
		r.len = i + 3;
		total += handle(&r, i);
		tick();
	}
	return total > 0 ? 0 : 1;
}
