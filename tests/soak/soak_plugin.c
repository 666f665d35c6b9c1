/* libsoakplugin.so: a shared object the soak test loads, probes by
 * "libsoakplugin.so:name", calls and unloads over and over. */

long plug_leaf(long x);
__attribute__((noinline, visibility("default"))) long plug_leaf(long x)
{
	__asm__ volatile("" : "+r"(x));
	return 3 * x + 1;
}

long plug_ret(long x);
__attribute__((noinline, visibility("default"))) long plug_ret(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x - 9;
}

/*   plug_mid(x) = ((x + 3) * 2) ^ 1
 *   +0 mov %rdi,%rax  +3 add $3,%rax  +7 add %rax,%rax  +10 xor $1,%rax
 *   +14 ret */
__asm__(".text\n"
	".p2align 4, 0xcc\n"
	".globl plug_mid\n.type plug_mid,@function\n"
	"plug_mid:\n"
	"\tmov %rdi, %rax\n"
	"\tadd $3, %rax\n"
	"\tadd %rax, %rax\n"
	"\txor $1, %rax\n"
	"\tret\n"
	".size plug_mid, .-plug_mid\n"
	".p2align 4, 0xcc\n");
