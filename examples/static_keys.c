/*
 * static_keys: a static key and a static tracepoint in one program.
 *
 * A request loop with optional logging behind a static key (a 5-byte NOP
 * while logging is off), and a tracepoint, example:request, whose handler
 * is attached through the C API and prints each argument by its declared
 * type.  At the end kprobes_list() shows the tracepoint while attached.
 *
 *   build/examples/static_keys
 */
#include <kprobes.h>
#include <kprobes/jump_label.h>
#include <kprobes/tracepoint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

DEFINE_STATIC_KEY_FALSE(verbose);

KPROBES_TRACEPOINT(example, request, (int, id), (const char *, path), (double, ms));

static void serve(int id, const char *path)
{
	double ms = 0.5 * id;

	if (static_branch_unlikely(&verbose))	/* a NOP until enabled */
		printf("    [verbose] request %d for %s\n", id, path);
	trace_example_request(id, path, ms);	/* a NOP until a handler attaches */
}

static void run(const char *what)
{
	static const char *const paths[] = { "/", "/index.html", "/api/items" };

	printf("%s (verbose is %s)\n", what, static_branch_value(&verbose) ? "on" : "off");
	for (int i = 1; i <= 3; i++)
		serve(i, paths[i - 1]);
}

/* A tracepoint handler runs on the thread that passes the site, under the
 * same rules as a probe handler: keep it short, use write(2). */
static void on_request(struct kprobes_tracepoint *tp, const uint64_t *args, void *data)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "    [%s] %s:%s", (const char *)data, tp->provider,
			 tp->name);

	for (unsigned int i = 0; i < tp->nargs && n < (int)sizeof(buf) - 64; i++) {
		const struct kprobes_tp_arg *a = &tp->args[i];
		double d;

		switch (kprobes_tp_arg_kind(a)) {
		case 's':	/* sign-extend from the declared size */
			n += snprintf(buf + n, sizeof(buf) - n, " %s=%lld", a->name,
				      a->size == 4 ? (long long)(int32_t)args[i] : (long long)args[i]);
			break;
		case 'S':
			n += snprintf(buf + n, sizeof(buf) - n, " %s=\"%s\"", a->name,
				      (const char *)(uintptr_t)args[i]);
			break;
		case 'f':
			memcpy(&d, &args[i], sizeof(d));
			n += snprintf(buf + n, sizeof(buf) - n, " %s=%g", a->name, d);
			break;
		default:
			n += snprintf(buf + n, sizeof(buf) - n, " %s=%#llx", a->name,
				      (unsigned long long)args[i]);
		}
	}
	buf[n++] = '\n';
	if (write(STDOUT_FILENO, buf, (size_t)n) < 0)
		return;
}

int main(void)
{
	struct kprobes_tracepoint *tp = kprobes_tracepoint_find("example", "request");
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);	/* the handler writes with write(2) */
	run("1. nothing enabled: both sites are NOPs");

	if ((err = static_branch_enable(&verbose)))
		return fprintf(stderr, "static_branch_enable: %s\n", strerror(-err)), 1;
	run("2. static_branch_enable(&verbose): its site is now a JMP to the printf");

	if (!tp)
		return fprintf(stderr, "tracepoint example:request not found\n"), 1;
	if ((err = kprobes_tracepoint_attach(tp, on_request, "handler")))
		return fprintf(stderr, "attach: %s\n", strerror(-err)), 1;
	static_branch_disable(&verbose);
	run("3. a handler attached to example:request, verbose off again");

	printf("4. kprobes_list() while attached:\n");
	fflush(stdout);
	kprobes_list(stdout);

	kprobes_tracepoint_detach(tp, on_request, "handler");
	/* Reference counts: two users want verbose, one leaves. */
	static_branch_inc(&verbose);
	static_branch_inc(&verbose);
	static_branch_dec(&verbose);
	run("5. detached; verbose inc, inc, dec: still on");
	static_branch_dec(&verbose);
	run("6. dec again: off");
	return 0;
}
