/* A statically linked program: no dynamic loader, so nothing can be
 * preloaded into it (the CLI must refuse it and leave nothing behind). */
#include <stdio.h>

int main(void)
{
	puts("static");
	return 0;
}
