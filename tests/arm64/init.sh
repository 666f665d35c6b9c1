#!/bin/sh
# /init of the arm64 test guest (busybox sh): runs every Criterion binary in
# /tests and /tests-asan (sanitizer builds), prints each one's synthesis,
# the summary "N passed, N failed" and the exit status between the markers
# tests/arm64/arm64.sh reads from the console, then powers the machine off.
# The counting follows scripts/run-tests.sh: a binary fails when a test
# fails or crashes, when it exits non-zero, and when it runs no test at all.
export PATH=/bin:/sbin
export LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
export TMPDIR=/tmp

echo KPROBES-ARM64-BEGIN
booted=$(cut -d' ' -f1 /proc/uptime)
echo "kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpus," \
	"features: $(sed -n 's/^Features[^:]*: //p' /proc/cpuinfo | head -n 1)"
verbose=
grep -q 'kp.verbose=1' /proc/cmdline && verbose=--verbose
pass=0; fail=0; failed_bins=""
for t in /tests/* /tests-asan/*; do
	[ -f "$t" ] && [ -x "$t" ] || continue
	case $t in *.so) continue ;; esac	# a library a suite loads
	log=/tmp/out.log
	timeout 600 "$t" $verbose --jobs 1 --timeout 120 >"$log" 2>&1 </dev/null; rc=$?
	line=$(grep 'Synthesis:' "$log" | tail -n 1)
	np=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	nf=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*Crashing: \([0-9]*\).*/\1 \2/p')
	nt=$(echo "$line" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
	np=${np:-0}; set -- $nf; nf=$(( ${1:-0} + ${2:-0} ))
	[ $rc -ne 0 ] && [ $nf -eq 0 ] && nf=1
	if [ $nf -eq 0 ] && [ "${nt:-0}" -eq 0 ]; then
		nf=1
		line="${line:-exit $rc, no synthesis} -- ran no test"
	fi
	pass=$((pass + np)); fail=$((fail + nf))
	[ -n "$verbose" ] && grep -E '^\[(PASS|FAIL|SKIP)' "$log"
	grep '^bench:' "$log"	# the overhead rows (tests/arm64/bench_arm64.c)
	echo "$t: ${line:-exit $rc}"
	if [ $nf -ne 0 ]; then
		failed_bins="$failed_bins $t"
		# (a test's output cannot pass for the markers)
		grep -v '^\[----\] *$' "$log" | tail -n 40 | sed 's/^KPROBES-ARM64-/ &/'
	fi
done
echo "guest: booted in ${booted} s, tests ran until $(cut -d' ' -f1 /proc/uptime) s"
echo "arm64: $pass passed, $fail failed"
[ $fail -eq 0 ] && status=0 || { echo "failing:$failed_bins"; status=1; }
echo "KPROBES-ARM64-END status=$status"
poweroff -f
