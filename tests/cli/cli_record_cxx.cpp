// C++ exceptions through recorded functions (tests/record/run-record.sh):
// N times catcher() -> middle() -> thrower(), which throws; catcher()
// catches, so middle and thrower never return.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#define NOINLINE __attribute__((noinline, noclone))

static volatile long sink;

NOINLINE void thrower(int i)
{
	sink += i;
	if (i >= 0)	// not provably noreturn: it keeps its return probe
		throw std::runtime_error("thrown");
}

NOINLINE void middle(int i)
{
	thrower(i);
	sink++;
}

NOINLINE int catcher(int i)
{
	try {
		middle(i);
	} catch (const std::exception &) {
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, caught = 0;

	for (int i = 0; i < n; i++)
		caught += catcher(i);
	std::printf("%d\n", caught);
	return 0;
}
