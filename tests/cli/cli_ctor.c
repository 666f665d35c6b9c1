/* Calls ctor_helper() once more after its library's constructor did. */
#include <stdio.h>

int ctor_helper(int x);

int main(void)
{
	printf("%d\n", ctor_helper(1));
	return 0;
}
