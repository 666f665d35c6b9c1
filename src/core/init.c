/* One-time initialization: knobs, trap handlers, thread machinery.  Runs as
 * a constructor, and again (harmlessly) from any API call made earlier. */
#include <pthread.h>

#include "core/internal.h"
#include "os/linux/threads.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_err;

static void init_once(void)
{
	kp_knobs_init();
	kp_threads_init();
	kp_fork_init();
	init_err = arch_init();
	kp_blacklist_init();
}

int kp_init(void)
{
	pthread_once(&once, init_once);
	return init_err;
}

__attribute__((constructor)) static void kp_constructor(void)
{
	kp_init();
}
