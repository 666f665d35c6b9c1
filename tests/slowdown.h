/* How many times slower than a native machine a suite may run: the
 * timeouts that end a hang (Criterion's, a child's alarm) are multiplied
 * by it.  The arm64 builds, which run in an emulator, set it
 * (tests/arm64/arm64.mk). */
#ifndef KP_TESTS_SLOWDOWN_H
#define KP_TESTS_SLOWDOWN_H

#ifndef KP_TEST_SLOWDOWN
#define KP_TEST_SLOWDOWN 1
#endif

#endif
