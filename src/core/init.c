/* One-time initialization: knobs, trap handlers, thread machinery.  Runs as
 * a constructor, and again (harmlessly) from any API call made earlier. */
#include <pthread.h>

#include "core/internal.h"
#include "core/kretprobe.h"
#include "core/stack.h"
#include "os/linux/threads.h"
#include "os/linux/upcalls.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_err;

/* What the OS layer tells the core (os/linux/upcalls.h). */
static void register_upcalls(void)
{
	kp_os_upcall_set(objects_unloaded, kp_objects_unloaded);
	kp_os_upcall_set(stack_objects_changed, kp_stack_objects_changed);
	kp_os_upcall_set(ret_unhijack, kp_kretprobe_unhijack);
	kp_os_upcall_set(ret_rehijack, kp_kretprobe_rehijack);
	kp_os_upcall_set(ret_after_catch, kp_kretprobe_after_catch);
}

static void init_once(void)
{
	register_upcalls();
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
