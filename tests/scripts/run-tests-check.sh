#!/bin/sh
# scripts/run-tests.sh on fake test binaries: a binary that runs no test
# (Criterion's "Tested: 0", or no synthesis at all) must fail the run;
# binaries that run their tests must pass it.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/kprobe-runtests.XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT
bad=0

fake() {	# NAME SYNTHESIS-LINE (empty: none) EXIT-STATUS
	mkdir -p "$W/$1/tests"
	{
		echo '#!/bin/sh'
		[ -n "$2" ] && echo "echo '[====] Synthesis: $2'"
		echo "exit $3"
	} > "$W/$1/tests/test_$1"
	chmod +x "$W/$1/tests/test_$1"
}
expect() {	# NAME WANTED-STATUS
	sh "$here/scripts/run-tests.sh" "$W/$1" > "$W/$1.out" 2>&1
	rc=$?
	if [ $rc -ne "$2" ]; then
		echo "run-tests-check: FAIL: $1: exit $rc, want $2"; sed 's/^/    /' "$W/$1.out"; bad=1
	fi
}

fake ok "Tested: 2 | Passing: 2 | Failing: 0 | Crashing: 0" 0
fake zero "Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0" 0
fake silent "" 0
fake failing "Tested: 2 | Passing: 1 | Failing: 1 | Crashing: 0" 1
expect ok 0
expect zero 1
expect silent 1
expect failing 1
grep -q 'ran no test' "$W/zero.out" || { echo "run-tests-check: FAIL: no reason given for zero tests"; bad=1; }
[ $bad -eq 0 ] && echo "run-tests-check: OK (zero-test and silent binaries fail the run)"
exit $bad
