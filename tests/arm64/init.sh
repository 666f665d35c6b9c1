#!/bin/sh
# /init of the arm64 test guest (busybox sh): runs every Criterion binary in
# /tests and /tests-asan (sanitizer builds), prints each one's synthesis,
# the summary "N passed, N failed" and the exit status between the markers
# tests/arm64/arm64.sh reads from the console, then powers the machine off.
# The counting follows scripts/run-tests.sh: a binary fails when a test
# fails or crashes, when it exits non-zero, and when it runs no test at all.
export PATH=/bin:/sbin
export LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu
# LeakSanitizer's scan at exit costs every sanitized process 10 to 25 s in
# the emulator (0.5 to 1 s without it), and Criterion runs each test in a
# process of its own: the sanitized suites run without it, all but the
# fuzzer with the library (test_arm64_fuzz), which registers and removes
# probes on every instruction class some hundred times a sequence, in
# LEAK_CHECKED.  Natively every suite runs with it (make check).
ASAN_NOLEAKS=detect_leaks=0:abort_on_error=0
LEAK_CHECKED=" /tests-asan/test_arm64_fuzz "
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# Every applet of busybox (the suites' shell commands use more than the
# initramfs links; this shell, the dynamically linked busybox, runs only
# linked applets).
/bin/busybox --install -s /bin
# What udev makes on a system: the tool's suites write to /dev/stdout.
/bin/busybox ln -sf /proc/self/fd /dev/fd
/bin/busybox ln -sf /proc/self/fd/0 /dev/stdin
/bin/busybox ln -sf /proc/self/fd/1 /dev/stdout
/bin/busybox ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
export TMPDIR=/tmp

# Seconds from one /proc/uptime reading to another (busybox sh: integer
# arithmetic on centiseconds).
centis() { echo "$1" | sed 's/\.//; s/^0*//; s/^$/0/'; }
secs() {
	local d=$(( $(centis "$2") - $(centis "$1") ))
	printf '%d.%02d' $((d / 100)) $((d % 100))
}

echo KPROBES-ARM64-BEGIN
booted=$(cut -d' ' -f1 /proc/uptime)
echo "kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpus," \
	"features: $(sed -n 's/^Features[^:]*: //p' /proc/cpuinfo | head -n 1)"
verbose=
grep -q 'kp.verbose=1' /proc/cmdline && verbose=1
pass=0; fail=0; failed_bins=""
for t in /tests/* /tests-asan/*; do
	[ -f "$t" ] && [ -x "$t" ] || continue
	case $t in *.so) continue ;; esac	# a library a suite loads
	log=/tmp/out.log
	t0=$(cut -d' ' -f1 /proc/uptime)
	case $LEAK_CHECKED in
	*" $t "*) export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 ;;
	*) export ASAN_OPTIONS=$ASAN_NOLEAKS ;;
	esac
	timeout 900 "$t" --verbose --jobs 1 --timeout 240 >"$log" 2>&1 </dev/null; rc=$?
	t1=$(cut -d' ' -f1 /proc/uptime)
	line=$(grep 'Synthesis:' "$log" | tail -n 1)
	np=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	nf=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*Crashing: \([0-9]*\).*/\1 \2/p')
	nt=$(echo "$line" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
	np=${np:-0}; set -- $nf; nf=$(( ${1:-0} + ${2:-0} ))
	# a binary that reports no failure yet exits non-zero says so
	[ $rc -ne 0 ] && [ $nf -eq 0 ] && nf=1 && line="$line -- exit $rc"
	if [ $nf -eq 0 ] && [ "${nt:-0}" -eq 0 ]; then
		nf=1
		line="${line:-exit $rc, no synthesis} -- ran no test"
	fi
	pass=$((pass + np)); fail=$((fail + nf))
	if [ -n "$verbose" ]; then
		grep -E '^\[(PASS|FAIL|SKIP)' "$log" | grep -v 'Test is disabled'
	else
		# where the time goes: the tests that took 30 s or more
		grep -E '^\[(PASS|FAIL)\].*\(([3-9][0-9]|[0-9]{3,})\.[0-9]*s\)$' "$log"
	fi
	grep '^bench:' "$log"	# the overhead rows (tests/arm64/bench_arm64.c)
	echo "$t: ${line:-exit $rc} ($(secs "$t0" "$t1") s)"
	if [ $nf -ne 0 ]; then
		failed_bins="$failed_bins $t"
		# (a test's output cannot pass for the markers)
		grep -Ev '^\[(RUN |PASS|SKIP)\]|^\[----\] *$' "$log" | tail -n 60 |
			sed 's/^KPROBES-ARM64-/ &/'
	fi
done
echo "guest: booted in ${booted} s, tests ran until $(cut -d' ' -f1 /proc/uptime) s"
echo "arm64: $pass passed, $fail failed"
[ $fail -eq 0 ] && status=0 || { echo "failing:$failed_bins"; status=1; }
echo "KPROBES-ARM64-END status=$status"
poweroff -f
