/* The static-key and tracepoint headers from C++: the overloads pick the
 * site's form from the key's type; a tracepoint with typed arguments. */
#include <cstdint>
#include <cstring>
#include <string>

#include <kprobes/jump_label.h>
#include <kprobes/tracepoint.h>

#include "testutil.h"

DEFINE_STATIC_KEY_TRUE(cxx_t);
DEFINE_STATIC_KEY_FALSE(cxx_f);

KPROBES_TRACEPOINT(cxx, event, (int, id), (const char *, what), (double, x));

namespace {

TEST_FN int bits()
{
	int r = 0;

	if (static_branch_likely(&cxx_t))
		r |= 1;
	if (static_branch_unlikely(&cxx_t))
		r |= 2;
	if (static_branch_likely(&cxx_f))
		r |= 4;
	if (static_branch_unlikely(&cxx_f))
		r |= 8;
	return r;
}

TEST_FN void fire(int id, const std::string &what, double x)
{
	trace_cxx_event(id, what.c_str(), x);
}

int seen_id;
std::string seen_what;
double seen_x;
int seen_calls;

void handler(kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	seen_id = (int)(uint32_t)args[0];
	seen_what = reinterpret_cast<const char *>(args[1]);
	std::memcpy(&seen_x, &args[2], sizeof(seen_x));
	seen_calls++;
}

} // namespace

Test(jump_label_cxx, four_kinds)
{
	cr_assert_eq(bits(), 1 | 2);
	cr_assert_eq(static_branch_disable(&cxx_t), 0);
	cr_assert_eq(bits(), 0);
	cr_assert_eq(static_branch_enable(&cxx_f), 0);
	cr_assert_eq(bits(), 4 | 8);
	cr_assert_eq(static_branch_inc(&cxx_t), 0);
	cr_assert_eq(bits(), 1 | 2 | 4 | 8);
	cr_assert_eq(static_branch_dec(&cxx_f), 0);
	cr_assert_eq(static_branch_dec(&cxx_f), -EINVAL);
	cr_assert_eq(bits(), 1 | 2);
	cr_assert(static_branch_value(&cxx_t));
	cr_assert_not(static_branch_value(&cxx_f));
}

Test(jump_label_cxx, tracepoint)
{
	kprobes_tracepoint *tp = kprobes_tracepoint_find("cxx", "event");

	cr_assert_eq(tp, &KPROBES_TP_DESC(cxx, event));
	cr_assert_eq(tp->nargs, 3u);
	cr_assert_eq(kprobes_tp_arg_kind(&tp->args[1]), 'S');
	cr_assert_eq(kprobes_tp_arg_kind(&tp->args[2]), 'f');
	fire(1, "off", 1.0);
	cr_assert_eq(seen_calls, 0);
	cr_assert_eq(kprobes_tracepoint_attach(tp, handler, nullptr), 0);
	fire(-42, "from C++", 0.125);
	cr_assert_eq(seen_calls, 1);
	cr_assert_eq(seen_id, -42);
	cr_assert_eq(seen_what, "from C++");
	cr_assert_eq(seen_x, 0.125);
	cr_assert_eq(kprobes_tracepoint_detach(tp, handler, nullptr), 0);
	fire(2, "off again", 2.0);
	cr_assert_eq(seen_calls, 1);
}
