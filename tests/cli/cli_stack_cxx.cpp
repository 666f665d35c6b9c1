// C++ frames for kprobe trace --stack: a namespace, a class, a template,
// an overload, built without frame pointers; each name must come out
// demangled.
#include <cstdlib>

extern "C" volatile int cxx_sink;
volatile int cxx_sink;

namespace shapes {

struct Circle {
	int r;
	__attribute__((noinline)) int area(int scale) const;
};

__attribute__((noinline)) int leaf(int x)
{
	cxx_sink += x;
	return cxx_sink;
}

__attribute__((noinline)) int Circle::area(int scale) const
{
	int v = leaf(r * r * scale);

	cxx_sink -= v;
	return v + 3;
}

template <typename T> __attribute__((noinline)) int measure(const T &shape, int scale)
{
	int v = shape.area(scale);

	cxx_sink ^= v;
	return v * 2;
}

} // namespace shapes

int main(int argc, char **argv)
{
	shapes::Circle c{ argc > 1 ? std::atoi(argv[1]) : 2 };

	return shapes::measure(c, 3) == 12345 ? 1 : 0;
}
