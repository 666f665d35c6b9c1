#!/bin/bash
# libkprobes.so as programs use it: linked in (tests/shlib/dynlinked.c)
# and inside an object the program preloads (tests/shlib/preload.c), with
# a program of ours, bash and python3; each must print what it prints
# unprobed, exit 0, and the probe must see its write() calls.
set -u
B=${B:-build}
D=$B/tests/shlib
fail=0

check() {	# NAME EXPECTED-STDOUT EXPECTED-STDERR-LINE CMD...
	local name=$1 out=$2 err=$3
	shift 3
	"$@" > "$D/out" 2> "$D/err"
	local rc=$?
	if [ $rc != 0 ] || [ "$(cat "$D/out")" != "$out" ] ||
	   { [ -n "$err" ] && ! grep -qxF -- "$err" "$D/err"; }; then
		echo "FAIL $name: status $rc"
		sed 's/^/  out: /' "$D/out"
		sed 's/^/  err: /' "$D/err"
		fail=1
	else
		echo "ok   $name"
	fi
}

check dynlinked "$(printf 'w\nw\nw\ndynlinked: 3 hits')" "" "$D/dynlinked"
check preload-bash "hi" "preload: write hits 1" env LD_PRELOAD="$D/libpreload.so" /bin/bash -c 'echo hi'
check preload-own "$(printf 'w\nw\nw\ndynlinked: 3 hits')" "preload: write hits 3" \
	env LD_PRELOAD="$D/libpreload.so" "$D/dynlinked"
if [ -x /usr/bin/python3 ]; then
	check preload-python "x" "preload: write hits 1" \
		env LD_PRELOAD="$D/libpreload.so" /usr/bin/python3 -S -c 'import os; os.write(1, b"x")'
else
	echo "skip preload-python: no /usr/bin/python3"
fi
exit $fail
