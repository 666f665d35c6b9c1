/* A library the CLI tests' target loads with dlopen after the probes are
 * armed: probes on it are deferred until it loads. */
__attribute__((noinline, used, visibility("default"))) long plugin_work(long x)
{
	return x * 2 + 1;
}
