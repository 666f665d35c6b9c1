// C++ names for the probe tests: a namespace, a class, overloads, a
// template; each called a known number of times.
#include <cstdio>
#include <cstdlib>

namespace demo {

// Read by name as demo::calls and demo::Widget::made.
long calls;

struct Widget {
	static int made;
	long size = 0;
	__attribute__((noinline)) void resize(int n)
	{
		calls += n + 1;
		size += n;	// probe: resize
	}
	__attribute__((noinline)) void resize(double f) { size += (long)(f * 2); }
	__attribute__((noinline)) long area() const { return size * size; }
};

int Widget::made;

template <typename T> __attribute__((noinline)) T twice(T v) { return v + v; }

} // namespace demo

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	demo::Widget w;
	long total = 0;

	demo::Widget::made = 1;

	for (int i = 0; i < rounds; i++) {
		w.resize(i);		// rounds calls
		w.resize(0.5);		// rounds calls
		w.resize(1.5);
		total += w.area() + demo::twice(i) + (long)demo::twice(0.25);
	}
	std::printf("%ld\n", total);
	return 0;
}
