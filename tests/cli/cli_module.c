/* A module for `kprobe load` tests (tests/test_run.c):
 *
 *   formats         init prints one line per kprobe_printk conversion
 *   long            init prints a line longer than KPROBE_PRINTK_MAX
 *   hits FUNCTION   a kprobe on FUNCTION prints "hit A B" per call
 *   fail N          init prints why, then returns N
 *   args ARG...     init prints its argc and each argv[i] in brackets
 *
 * and exit prints "exit". */
#include <kprobes.h>
#include <kprobes/module.h>
#include <stdlib.h>
#include <string.h>

static struct kprobe kp;
static char symbol[128];
static int registered;

static int on_hit(struct kprobe *p, struct pt_regs *regs)
{
	kprobe_printk("hit %ld %ld", (long)regs_get_kernel_argument(regs, 0),
		      (long)regs_get_kernel_argument(regs, 1));
	return 0;
}

static void formats(void)
{
	const char *volatile null = NULL;

	kprobe_printk("d=%d i=%i neg=%d", 42, -7, -2147483647 - 1);
	kprobe_printk("w=[%5d] l=[%-5d] z=[%05d] zn=[%05d]", 42, 42, 42, -42);
	kprobe_printk("u=%u x=%x X=%X o=%o", 4000000000u, 0xbeefu, 0xbeefu, 8u);
	kprobe_printk("ld=%ld lu=%lu lx=%lx lld=%lld llu=%llu", -1L, 18446744073709551615UL,
		      0xdeadbeefcafeUL, -9223372036854775807LL - 1, 12345ULL);
	kprobe_printk("hhd=%hhd hd=%hd hu=%hu zu=%zu", 300, 70000, 65535, (size_t)99);
	kprobe_printk("s=[%s] p=[%.3s] w=[%6s] l=[%-6s] n=[%s]", "abc", "abcdef", "ab", "ab",
		      null);
	kprobe_printk("c=%c%c pct=%% star=[%*d] p=%p", 'o', 'k', 4, 7, (void *)0x1234);
	kprobe_printk("trailing newline kept once\n");
	kprobe_printk("ctl=[\x01\t]");
}

int kprobe_module_init(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "formats")) {
		formats();
	} else if (!strcmp(mode, "long")) {
		char big[3000];

		memset(big, 'y', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		kprobe_printk("x%sz", big);
	} else if (!strcmp(mode, "hits") && argc > 2) {
		strncpy(symbol, argv[2], sizeof(symbol) - 1);
		kp.symbol_name = symbol;
		kp.pre_handler = on_hit;
		if (register_kprobe(&kp) < 0)
			return -2;
		registered = 1;
	} else if (!strcmp(mode, "fail") && argc > 2) {
		kprobe_printk("failing with %d", atoi(argv[2]));
		return atoi(argv[2]);
	} else if (!strcmp(mode, "args")) {
		kprobe_printk("argc %d", argc);
		for (int i = 1; i < argc; i++)
			kprobe_printk("[%s]", argv[i]);
	}
	return 0;
}

void kprobe_module_exit(void)
{
	if (registered)
		unregister_kprobe(&kp);
	kprobe_printk("exit");
}
