#!/bin/bash
# `kprobe run` end to end: each tests/run/programs/NAME.bt runs on the
# bundled target (tests/cli/run_target.c, arguments in NAME.args, extra
# options in NAME.flags, positional parameters in NAME.params) and its
# output (-o) must equal NAME.out byte for byte.  NAME.out is what
# bpftrace 0.17 (Debian 12's) printed for the same program and run; when
# bpftrace is installed and may trace here, it runs the program too and
# must still print NAME.out (programs it cannot run, such as override(),
# have a NAME.nooracle).  NAME.stdout, when present,
# lists lines the target itself must print (what override() and signal()
# change).  NAME.builds lists other builds of the target (gcc optimization
# levels, e.g. "O0 O2", built with -g) the program must print NAME.out on
# too.  The target's path is written @TARGET@ in programs and outputs.
#
#   B=build bash tests/run/run-programs.sh            run every program
#   B=build bash tests/run/run-programs.sh NAME...    run some
#   B=build bash tests/run/run-programs.sh --capture NAME...
#                                                     write NAME.out from bpftrace
set -u
B=${B:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
PROGS=$HERE/programs
KPROBE=$(realpath "$B/kprobe")
TARGET=$(realpath "$B/tests/cli/run_target")
TMP=$(mktemp -d /tmp/kprobe-run-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

capture=0
if [ "${1:-}" = --capture ]; then
	capture=1
	shift
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in "$PROGS"/*.bt; do
		n=$(basename "$f" .bt)
		names+=("$n")
	done
fi

# bpftrace as the oracle: installed, root, tracefs, and a uprobe that works.
oracle=0
oracle_why=""
if ! command -v bpftrace > /dev/null; then
	oracle_why="bpftrace is not installed (apt-get install bpftrace)"
elif [ "$(id -u)" != 0 ]; then
	oracle_why="bpftrace needs root"
else
	if [ ! -e /sys/kernel/tracing/uprobe_events ]; then
		mount -t tracefs nodev /sys/kernel/tracing 2> /dev/null
	fi
	probe_out=$(timeout 60 bpftrace -e "uprobe:$TARGET:run_tick { @n = count(); }" \
		-c "$TARGET ticks 2 0" 2> /dev/null)
	if printf '%s\n' "$probe_out" | grep -qx '@n: 2'; then
		oracle=1
	else
		oracle_why="bpftrace cannot run uprobes here (tracefs, BPF or permissions)"
	fi
fi
if [ $capture = 1 ] && [ $oracle = 0 ]; then
	echo "cannot capture: $oracle_why" >&2
	exit 1
fi
[ $oracle = 0 ] && echo "run-programs: skipping the bpftrace comparisons: $oracle_why"

fail=0
pass=0
for n in "${names[@]}"; do
	sed "s|@TARGET@|$TARGET|g" "$PROGS/$n.bt" > "$TMP/$n.bt"
	args=$(cat "$PROGS/$n.args")
	flags=$(cat "$PROGS/$n.flags" 2> /dev/null || true)
	params=$(cat "$PROGS/$n.params" 2> /dev/null || true)
	if [ $capture = 1 ]; then
		# shellcheck disable=SC2086
		timeout 120 bpftrace --unsafe $flags -o "$TMP/$n.cap" "$TMP/$n.bt" $params \
			-c "$TARGET $args" > /dev/null 2> "$TMP/$n.err" ||
			{ echo "capture $n failed:"; cat "$TMP/$n.err"; fail=1; }
		sed "s|$TARGET|@TARGET@|g" "$TMP/$n.cap" > "$PROGS/$n.out"
		continue
	fi
	# shellcheck disable=SC2086
	timeout 60 "$KPROBE" run $flags -o "$TMP/$n.kp" "$TMP/$n.bt" $params -c "$TARGET $args" \
		> "$TMP/$n.stdout" 2> "$TMP/$n.stderr"
	rc=$?
	sed -i "s|$TARGET|@TARGET@|g" "$TMP/$n.kp" 2> /dev/null
	ok=1
	if [ $rc != 0 ]; then
		echo "FAIL $n: kprobe run exited with $rc"
		cat "$TMP/$n.stderr"
		ok=0
	elif ! cmp -s "$TMP/$n.kp" "$PROGS/$n.out"; then
		echo "FAIL $n: output differs from bpftrace's (expected, then kprobe's):"
		diff "$PROGS/$n.out" "$TMP/$n.kp" | head -40
		ok=0
	fi
	if [ -f "$PROGS/$n.stdout" ]; then
		while IFS= read -r line; do
			if ! grep -qxF -- "$line" "$TMP/$n.stdout"; then
				echo "FAIL $n: the target did not print '$line':"
				cat "$TMP/$n.stdout"
				ok=0
			fi
		done < "$PROGS/$n.stdout"
	fi
	for opt in $(cat "$PROGS/$n.builds" 2> /dev/null); do
		other="$TMP/run_target-$opt"
		[ -x "$other" ] || gcc "-$opt" -g -std=gnu11 -fno-omit-frame-pointer \
			-I"$HERE/../../tools/kprobe/common" -o "$other" "$HERE/../cli/run_target.c" -lpthread
		sed "s|@TARGET@|$other|g" "$PROGS/$n.bt" > "$TMP/$n-$opt.bt"
		# shellcheck disable=SC2086
		timeout 60 "$KPROBE" run $flags -o "$TMP/$n-$opt.kp" "$TMP/$n-$opt.bt" $params \
			-c "$other $args" > /dev/null 2> "$TMP/$n-$opt.stderr"
		sed -i "s|$other|@TARGET@|g" "$TMP/$n-$opt.kp" 2> /dev/null
		if ! cmp -s "$TMP/$n-$opt.kp" "$PROGS/$n.out"; then
			echo "FAIL $n on the target built -$opt:"
			cat "$TMP/$n-$opt.stderr"
			diff "$PROGS/$n.out" "$TMP/$n-$opt.kp" | head -20
			ok=0
		fi
	done
	if [ $oracle = 1 ] && [ ! -f "$PROGS/$n.nooracle" ]; then
		# shellcheck disable=SC2086
		timeout 120 bpftrace --unsafe $flags -o "$TMP/$n.bpf" "$TMP/$n.bt" $params \
			-c "$TARGET $args" > /dev/null 2>&1
		sed -i "s|$TARGET|@TARGET@|g" "$TMP/$n.bpf" 2> /dev/null
		if ! cmp -s "$TMP/$n.bpf" "$PROGS/$n.out"; then
			echo "FAIL $n: bpftrace itself no longer prints $n.out:"
			diff "$PROGS/$n.out" "$TMP/$n.bpf" | head -20
			ok=0
		fi
	fi
	if [ $ok = 1 ]; then
		pass=$((pass + 1))
	else
		fail=1
	fi
done
[ $capture = 1 ] && exit $fail
echo "run-programs: $pass of ${#names[@]} programs as bpftrace prints them"
exit $fail
