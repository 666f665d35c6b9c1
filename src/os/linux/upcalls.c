/* The OS layer's upcalls (upcalls.h), set by the layers above. */
#include "os/linux/upcalls.h"

struct kp_os_upcalls kp_os_upcalls;
