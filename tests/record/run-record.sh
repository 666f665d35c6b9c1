#!/bin/bash
# kprobe record / report / replay / dump end to end on programs whose calls
# are known exactly (tests/cli/cli_record.c, cli_record_cxx.cpp), uftrace as
# an oracle for the call graph when it is installed, and count's calls made
# by a library's constructor.  Run by `make check` (tests/record/record.mk).
set -u
B=${B:-build}
K=$B/kprobe
P=$B/tests/cli
CHECK="python3 tests/record/check_record.py"
T=$(mktemp -d /tmp/kprobe-record-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
n=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
# expect NAME EXPECTED ACTUAL
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected '$2', got '$3'"; fi; }

# The counts line of one function: ENTRIES RETURNS UNMATCHED MAXDEPTH THREADS PIDS
row() { awk -v f="$2" '$1 == f { $1 = ""; sub(/^ /, ""); print }' "$1"; }

# record_json DIR ARGS...: records, dumps JSON Lines and the counts.
record_json() {
	local d=$1
	shift
	if ! "$K" record -o "$T/$d" "$@" >"$T/$d.out" 2>"$T/$d.err"; then
		echo "# record failed:"; sed 's/^/#   /' "$T/$d.err"
		return 1
	fi
	"$K" dump --format json "$T/$d" >"$T/$d.json" 2>>"$T/$d.err" &&
		$CHECK counts "$T/$d.json" >"$T/$d.counts"
}

# 1. Deep recursion: 501 nested calls, each entry with its return.
if record_json rec -- "$P/cli_record" recurse 500; then
	expect "recursion: rec's entries, returns, unmatched, depth" "501 501 0 501 1 1" \
		"$(row "$T/rec.counts" rec)"
	expect "recursion: main entered and returned once" "1 1 0 0 1 1" \
		"$(row "$T/rec.counts" main)"
	# report's Total time of main is replay's duration on main's closing line.
	rep=$("$K" report "$T/rec" | awk '$NF == "main" { print $1, $2 }')
	rpl=$("$K" replay "$T/rec" | awk '/\} \/\* main \*\// { print $1, $2 }')
	expect "recursion: report's total of main equals replay's" "$rpl" "$rep"
	calls=$("$K" report --sort calls "$T/rec" | awk 'NR == 3 { print $(NF-1), $NF }')
	expect "recursion: report --sort calls puts rec first" "501 rec" "$calls"
	if "$K" dump --format chrome "$T/rec" >"$T/rec.chrome" &&
	   b=$($CHECK chrome "$T/rec.chrome"); then
		expect "recursion: Chrome trace parses, every B closed by its E" 502 "$b"
	else
		fail "recursion: Chrome trace"
	fi
else
	fail "recursion: record"
fi

# 1b. Recursion deeper than the return probe's instances (4,096 for a
# few functions): the returns it misses are said, counted in info, and
# the calls left are closed, marked.
if record_json deep -- "$P/cli_record" recurse 5000; then
	expect "deep recursion: rec's entries and returns, 905 without an instance" \
		"5001 5001 905 5001 1 1" "$(row "$T/deep.counts" rec)"
	missed=$(awk '$1 == "missed_returns" { print $2 }' "$T/deep/info")
	if [ "${missed:-none}" = 905 ] &&
	   grep -q "missed the return of at least 905 calls" "$T/deep.err"; then
		ok "deep recursion: the 905 missed returns said and counted"
	else
		fail "deep recursion: missed returns '${missed:-none}' (905) not said or counted"
	fi
else
	fail "deep recursion: record"
fi

# 2. Threads: every thread in its own file, all its calls.
if record_json thr -F main -- "$P/cli_record" threads 4 2000; then
	expect "threads: leaf's calls on 4 threads" "8000 8000 0 1 4 1" "$(row "$T/thr.counts" leaf)"
	files=$(ls "$T/thr" | grep -c '\.dat$')
	expect "threads: one file per thread (main + 4)" 5 "$files"
	# The toolchain's start-up and tear-down code is left out, as uftrace
	# leaves it out; main is the outermost call.
	crt=$(awk '$1 ~ /^(_start|_init|_fini|frame_dummy|register_tm_clones|deregister_tm_clones|__do_global_dtors_aux)$/' "$T/thr.counts")
	expect "-F main: no toolchain functions recorded" "" "$crt"
	expect "-F main: main once, returning" "1 1 0 0 1 1" "$(row "$T/thr.counts" main)"
else
	fail "threads: record"
fi

# 2b. More threads than buffers, one after another: each waits for the
# buffer of an exited one rather than lose its calls.
if KPROBE_RINGS=3 record_json seq -- "$P/cli_record" seqthreads 12 500; then
	expect "threads beyond the buffers: every call of leaf" "6000 6000 0 1 12 1" \
		"$(row "$T/seq.counts" leaf)"
	lost=$(awk '/^lost_/ { s += $2 } END { print s + 0 }' "$T/seq/info")
	expect "threads beyond the buffers: nothing lost" 0 "$lost"
else
	fail "threads beyond the buffers: record"
fi

# 3. longjmp: middle and inner never return; closed when outer returns.
if record_json lj -- "$P/cli_record" longjmp 100; then
	expect "longjmp: outer returns every time" "100 100 0 1 1 1" "$(row "$T/lj.counts" outer)"
	expect "longjmp: middle closed unmatched" "100 100 100 2 1 1" "$(row "$T/lj.counts" middle)"
	expect "longjmp: inner closed unmatched" "100 100 100 3 1 1" "$(row "$T/lj.counts" inner)"
	"$K" dump --format chrome "$T/lj" >"$T/lj.chrome" && b=$($CHECK chrome "$T/lj.chrome") ||
		b=bad
	expect "longjmp: Chrome trace pairs every B with an E" 301 "$b"
else
	fail "longjmp: record"
fi

# 4. C++ exceptions: thrower and middle unwound, catcher returns.
if record_json cxx -- "$P/cli_record_cxx" 100; then
	# (C++ names demangled, without their parameters, as uftrace shows them)
	expect "exceptions: catcher returns every time" "100 100 0 1 1 1" \
		"$(row "$T/cxx.counts" catcher)"
	expect "exceptions: middle closed unmatched" "100 100 100 2 1 1" \
		"$(row "$T/cxx.counts" middle)"
	expect "exceptions: thrower closed unmatched" "100 100 100 3 1 1" \
		"$(row "$T/cxx.counts" thrower)"
else
	fail "exceptions: record"
fi

# 4b. The PROBE forms of count and trace: a C++ name with its signature, a
# source line, an SDT probe with an argument (the tool resolves them).
if record_json cxxname 'catcher(int)' 'catcher(int)%return' 'middle(int)' -- \
	"$P/cli_record_cxx" 20; then
	expect "C++ names: catcher(int) entries and returns" "20 20 0 0 1 1" \
		"$(row "$T/cxxname.counts" catcher)"
	expect "C++ names: middle(int) entries inside catcher" "20 0 0 1 1 1" \
		"$(row "$T/cxxname.counts" middle)"
else
	fail "C++ names: record"
fi
if record_json line cli_record.c:73 -- "$P/cli_record" fib 1; then
	expect "FILE.c:LINE: every call of fib" "21891 0 0 0 1 1" \
		"$(row "$T/line.counts" cli_record.c:73)"
else
	fail "FILE.c:LINE: record"
fi
if gcc -O2 -Itools/kprobe/common -o "$T/cli_usdt" tests/cli/cli_usdt.c &&
   record_json usdt 'usdt:demo:req arg0' -- "$T/cli_usdt" 5; then
	got=$(python3 -c 'import json, sys
print(" ".join(str(json.loads(l)["args"]["arg0"]) for l in sys.stdin))' <"$T/usdt.json")
	expect "usdt: every hit with its argument" "1000 1001 1002 1003 1004" "$got"
else
	fail "usdt: record"
fi

# 5. fork with -f: the child's calls too, in its own file.
if record_json fork -f -- "$P/cli_record" fork 300; then
	expect "fork -f: leaf in parent and child" "600 600 0 1 2 2" "$(row "$T/fork.counts" leaf)"
else
	fail "fork: record"
fi

# 6. A thread that exits inside a call: closed at its last event, marked.
if record_json exit -- "$P/cli_record" exit_in_call; then
	expect "thread exit mid-call: stay closed unmatched" "1 1 1 1 1 1" \
		"$(row "$T/exit.counts" stay)"
else
	fail "exit mid-call: record"
fi

# 7. Seconds of recursion at full speed: nothing lost, every call there.
N=${KPROBE_RECORD_FIB_N:-300}
if "$K" record -o "$T/big" fib 'fib%return' -- "$P/cli_record" fib "$N" >"$T/big.out" \
	2>"$T/big.err"; then
	lost=$(awk '/^lost_/ { s += $2 } END { print s + 0 }' "$T/big/info")
	expect "full speed: no event lost" 0 "$lost"
	calls=$("$K" report --sort calls "$T/big" | awk '$NF == "fib" { print $(NF-1) }')
	expect "full speed: every call of fib recorded" $((N * 21891)) "$calls"
	# 8 bytes an event (compact: the TSC's low 48 bits), a 16-byte one
	# first and whenever the upper bits change.
	bytes=$(awk '$1 == "bytes" { print $2 }' "$T/big/info")
	events=$((2 * N * 21891))
	if [ "$bytes" -ge $((8 * events)) ] && [ "$bytes" -le $((8 * events + 64)) ]; then
		ok "full speed: 8 bytes an event"
	else
		fail "full speed: $bytes bytes for $events events"
	fi
else
	fail "full speed: record"; sed 's/^/#   /' "$T/big.err"
fi

# 7c. --drop: what a full buffer drops is counted, and the events kept
# plus the events counted lost are every event of the run.
N=100
if "$K" record --drop -o "$T/drop" fib 'fib%return' -- "$P/cli_record" fib $N >/dev/null \
	2>"$T/drop.err" && "$K" dump --format json "$T/drop" >"$T/drop.json" 2>/dev/null; then
	lost=$(awk '/^lost_/ { s += $2 } END { print s + 0 }' "$T/drop/info")
	kept=$($CHECK events "$T/drop.json")
	expect "--drop: events kept plus events counted lost" $((2 * N * 21891)) $((kept + lost))
	said=$(sed -n 's/^kprobe: lost \([0-9]*\) events.*/\1/p' "$T/drop.err")
	expect "--drop: the loss said on stderr" "$lost" "${said:-0}"
else
	fail "--drop: record"
fi

# 7d. latency at full speed loses nothing: every call of fib timed.
if "$K" latency fib -- "$P/cli_record" fib 20 >"$T/lat.out" 2>"$T/lat.err"; then
	expect "latency at full speed: every call of fib" "latency of fib: $((20 * 21891)) calls" \
		"$(cat "$T/lat.out" "$T/lat.err" | grep -o 'latency of fib: [0-9]* calls')"
	expect "latency at full speed: no loss reported" "" "$(grep -i lost "$T/lat.err")"
else
	fail "latency at full speed"
fi

# 7e. -F LIBRARY: every function of a library, its constructor's calls
# included (the probes are armed before the library's constructors run).
if record_json flib -F libcli_ctor.so -- "$P/cli_ctor"; then
	expect "-F library: ctor_helper from the constructor and from main" "2 2 0 1 1 1" \
		"$(row "$T/flib.counts" ctor_helper)"
	expect "-F library: the constructor itself" "1 1 0 0 1 1" \
		"$(row "$T/flib.counts" lib_constructor)"
	expect "-F library: nothing of the program" "" "$(row "$T/flib.counts" main)"
else
	fail "-F library: record"
fi

# 7f. Returns taken at the functions' exit sites (kprobes on them, where
# every exit can take a jump) give the call graph return probes give
# (KPROBE_RETURN_PROBES=1): the same counts, the same replay but for the
# durations, on recursion, threads, longjmp, exceptions and a library's
# functions.
same_graph() {
	local name=$1
	shift
	if record_json "x$name" "$@" && KPROBE_RETURN_PROBES=1 record_json "r$name" "$@"; then
		expect "exit sites, $name: counts as with return probes" \
			"$(cat "$T/r$name.counts")" "$(cat "$T/x$name.counts")"
		"$K" replay "$T/x$name" | sed 's/^[^|]*|//; /^# thread /d' >"$T/x$name.graph"
		"$K" replay "$T/r$name" | sed 's/^[^|]*|//; /^# thread /d' >"$T/r$name.graph"
		if cmp -s "$T/x$name.graph" "$T/r$name.graph" && [ -s "$T/x$name.graph" ]; then
			ok "exit sites, $name: replay as with return probes"
		else
			fail "exit sites, $name: replay differs from return probes'"
		fi
	else
		fail "exit sites, $name: record"
	fi
}
same_graph recurse -F main -- "$P/cli_record" recurse 200
same_graph fib -F main -- "$P/cli_record" fib 2
same_graph threads -F main -- "$P/cli_record" seqthreads 3 500
same_graph longjmp -F main -- "$P/cli_record" longjmp 50
same_graph cxx -- "$P/cli_record_cxx" 50
same_graph lib -F libcli_ctor.so -- "$P/cli_ctor"

# 7g. A program's latency pattern: its uretprobe's fast form runs at the
# exit site; as many returns timed and counted as with return probes.
lat_prog="uprobe:$P/cli_record:fib { @s[tid] = nsecs; }
uretprobe:$P/cli_record:fib /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }
uretprobe:$P/cli_record:fib { @n = count(); }"
hist_total() { awk '/^@n:/ { n = $2 } /^\[/ { s += $3 } END { print n, s }' "$1"; }
if "$K" run -e "$lat_prog" -- "$P/cli_record" fib 3 >"$T/latx" 2>&1 &&
   KPROBE_RETURN_PROBES=1 "$K" run -e "$lat_prog" -- "$P/cli_record" fib 3 >"$T/latr" 2>&1; then
	expect "exit sites, run: returns counted and timed as with return probes" \
		"$(hist_total "$T/latr")" "$(hist_total "$T/latx")"
	expect "exit sites, run: every call of fib counted" "65673" \
		"$(awk '/^@n:/ { print $2 }' "$T/latx")"
else
	fail "exit sites, run: the latency program"
fi

# 7a. Compact events across a wrap of the TSC's low 48 bits keep their
# durations (a recording written by make_wrap_recording.py).
python3 tests/record/make_wrap_recording.py "$T/wrap"
got=$("$K" replay "$T/wrap" | awk '$2 == "us" { print $1 }' | tr '\n' ' ')
expect "compact events across a TSC wrap: inner and outer durations" "0.400 1.000 " "$got"

# 7b. trace at full speed, to a file, loses nothing and says nothing of it.
if "$K" trace fib 'fib%return' -o "$T/trace.txt" -- "$P/cli_record" fib 20 >/dev/null \
	2>"$T/trace.err"; then
	expect "trace at full speed: every event written" $((2 * 20 * 21891)) \
		"$(grep -c ' fib' "$T/trace.txt")"
	expect "trace at full speed: no loss reported" "" "$(grep lost "$T/trace.err")"
else
	fail "trace at full speed"
fi

# 8. uftrace as the oracle of the call graph (same replay format).
if command -v uftrace >/dev/null 2>&1 &&
   timeout 60 uftrace record --no-libcall -d "$T/uft" -P rec -P main "$P/cli_record" recurse 30 \
	>/dev/null 2>&1; then
	graph() { awk -F'|' '{ n = $2; sub(/^ /, "", n); print n }' |
		sed -E 's/;? *\/\*.*//; s/\(\)//; s/ *=.*//' | grep -E '^ *(\} *$|main|rec)' |
		sed -E 's/ +$//'; }
	uftrace replay -d "$T/uft" 2>/dev/null | grep -v '^#' | graph >"$T/uft.graph"
	if "$K" record -o "$T/kg" main 'main%return' rec 'rec%return' -- \
		"$P/cli_record" recurse 30 >/dev/null 2>&1; then
		"$K" replay "$T/kg" | grep -v '^#' | graph >"$T/kg.graph"
		if [ -s "$T/uft.graph" ] && cmp -s "$T/uft.graph" "$T/kg.graph"; then
			ok "uftrace oracle: same call graph for recurse 30"
		else
			fail "uftrace oracle: call graphs differ"
			diff "$T/uft.graph" "$T/kg.graph" | head -10 | sed 's/^/#   /'
		fi
	else
		fail "uftrace oracle: kprobe record"
	fi
else
	echo "# skipped: uftrace oracle (uftrace not installed or cannot run here)"
fi

# 8b. uftrace's report as the oracle of Calls: every function uftrace
# reports for a threaded run and a forking run, with the same calls
# (uftrace cannot patch the C runtime's own functions, that kprobe also
# records: only uftrace's rows are compared).
if command -v uftrace >/dev/null 2>&1; then
	for args in "threads 3 100" "fork 20"; do
		d=uft${args%% *}
		rm -rf "$T/$d" "$T/k$d"
		if timeout 60 uftrace record --no-libcall -P . -d "$T/$d" "$P/cli_record" $args \
			>/dev/null 2>&1 &&
		   "$K" record -f -o "$T/k$d" -- "$P/cli_record" $args >/dev/null 2>&1; then
			uftrace report -d "$T/$d" 2>/dev/null | awk 'NR > 2 && $NF !~ /^linux:|\)$/ {
				print $NF, $(NF-1) }' | sort >"$T/$d.calls"
			"$K" report "$T/k$d" | awk 'NR > 2 { print $NF, $(NF-1) }' | sort >"$T/k$d.calls"
			miss=$(join -a 1 -e none -o 0,1.2,2.2 "$T/$d.calls" "$T/k$d.calls" |
				awk '$2 != $3' | tr '\n' ' ')
			if [ -s "$T/$d.calls" ] && [ -z "$miss" ]; then
				ok "uftrace oracle: report's calls for '$args'"
			else
				fail "uftrace oracle: report's calls for '$args' differ: $miss"
			fi
		else
			echo "# skipped: uftrace report oracle for '$args' (a record failed)"
		fi
	done
fi

# 8c. Arguments and return values recorded, in order.
if record_json args 'leaf arg1' 'leaf%return retval' -- "$P/cli_record" threads 1 5; then
	got=$(python3 -c 'import json, sys
print(" ".join("%s:%s" % (e["type"][0], list(e["args"].values())[0])
      for e in map(json.loads, sys.stdin) if e["function"] == "leaf"))' <"$T/args.json")
	expect "arguments and return values of leaf" \
		"e:0x0 r:1 e:0x1 r:2 e:0x2 r:3 e:0x3 r:4 e:0x4 r:5" "$got"
else
	fail "arguments: record"
fi

# 9. Calls made by a library's constructor are counted (uprobes count 2).
hits=$("$K" count ctor_helper -o /dev/stdout -- "$P/cli_ctor" 2>/dev/null | awk '$1 == "ctor_helper" { print $(NF-1) }')
expect "constructor: ctor_helper counted in the constructor and in main" 2 "$hits"

# 10. count's fast path (a thread's own row, set up at its first hit) is
# exact: entry and return on both fast paths; a fork child that is not
# followed inherits a thread set up to count and counts nothing; agent code
# on a program thread (arming the probes of a library dlopen() loaded,
# which opens and reads its file) is not counted.
# count_hits OUT PROBE: the hits of PROBE in count's table, over its rows
# of every process (0 if not shown)
count_hits() { awk -v p="$2" '$1 == p || $2 == p { h += $(NF-1) } END { print h + 0 }' "$1"; }
"$K" count fib 'fib%return' -o "$T/cfib" -- "$P/cli_record" fib 3 >/dev/null 2>&1
expect "count: fib's entries and returns, 3 x 21891" "65673 65673" \
	"$(count_hits "$T/cfib" fib) $(count_hits "$T/cfib" 'fib%return')"
"$K" count leaf 'leaf%return' -o "$T/cthr" -- "$P/cli_record" threads 8 2000 >/dev/null 2>&1
expect "count: leaf on 8 threads" "16000 16000" \
	"$(count_hits "$T/cthr" leaf) $(count_hits "$T/cthr" 'leaf%return')"
KPROBE_RINGS=2 "$K" count leaf 'leaf%return' -o "$T/cshared" -- "$P/cli_record" threads 8 2000 \
	>/dev/null 2>&1
expect "count: 8 threads on 2 rings, 6 in the shared row" "16000 16000" \
	"$(count_hits "$T/cshared" leaf) $(count_hits "$T/cshared" 'leaf%return')"
"$K" count leaf -o "$T/cfork" -- "$P/cli_record" fork 300 >/dev/null 2>&1
expect "count: an unfollowed fork child counts nothing" 300 "$(count_hits "$T/cfork" leaf)"
"$K" count -f leaf -o "$T/cforkf" -- "$P/cli_record" fork 300 >/dev/null 2>&1
expect "count -f: parent and child" 600 "$(count_hits "$T/cforkf" leaf)"
lib=$(realpath "$P/libcli_ctor.so")
"$K" count libc.so.6:open libc.so.6:read "$lib:ctor_helper" -o "$T/cdl" -- \
	"$P/cli_record" dlopen 5 "$lib" >/dev/null 2>&1
expect "count: the agent's open and read while arming a dlopen'ed library are not counted" \
	"5 0 1" "$(count_hits "$T/cdl" open) $(count_hits "$T/cdl" read) $(count_hits "$T/cdl" ctor_helper)"

# 11. Bad input: one line, status 2 or 1; mutated recordings never crash
# the readers.
bad=$(python3 tests/record/mutate_record.py "$K" "$T/lj" 40 | tail -1)
expect "mutated recordings: report, replay, dump end with 0 or 1" 0 "$bad"

"$K" report "$T/nonexistent" >/dev/null 2>"$T/bad.err"
expect "report of a missing directory fails with 1" 1 $?
"$K" dump "$T/rec" >/dev/null 2>&1
expect "dump without --format fails with 2" 2 $?
printf 'garbage' >"$T/rec/$(ls "$T/rec" | grep -m1 '\.dat$')"
"$K" replay "$T/rec" >/dev/null 2>"$T/corrupt.err"
expect "replay of a corrupt thread file exits 0" 0 $?
grep -q "make no sense" "$T/corrupt.err" && ok "replay warns about the corrupt file" ||
	fail "replay warns about the corrupt file"

# A record that fails before it records (a bad probe, a command that
# cannot run) leaves the earlier recording in DIR as it was; one that
# records replaces it whole.
"$K" record -o "$T/keep" -- "$P/cli_record" recurse 3 >/dev/null 2>&1
"$K" record -o "$T/keep" no_such_function -- "$P/cli_record" recurse 3 >/dev/null 2>&1
st=$?
"$K" record -o "$T/keep" -- "$T/no-such-program" >/dev/null 2>&1
st="$st $?"
expect "failed records: status 2, the earlier recording still there" "2 2 4 rec" \
	"$st $("$K" report "$T/keep" 2>/dev/null | awk '$NF == "rec" { print $(NF-1), $NF }')"
"$K" record -o "$T/keep" -- "$P/cli_record" longjmp 2 >/dev/null 2>&1
expect "a new recording replaces the earlier one" "1 " \
	"$(ls "$T/keep" | grep -c '\.dat$') $("$K" report "$T/keep" | awk '$NF == "rec"')"

# A FIFO or a device in place of a recording's file: refused or skipped,
# never waited on.
cp -r "$T/lj" "$T/fifo"
mkfifo "$T/fifo/1-1.dat"
timeout 10 "$K" replay "$T/fifo" >/dev/null 2>&1
expect "a FIFO as a thread file is skipped" 0 $?
rm "$T/fifo/specs" && mkfifo "$T/fifo/specs"
timeout 10 "$K" report "$T/fifo" >/dev/null 2>"$T/fifo.err"
expect "a FIFO as the specs file fails with 1" "1 1" "$? $(wc -l <"$T/fifo.err")"
rm "$T/fifo/info" && mkfifo "$T/fifo/info"
timeout 10 "$K" dump --format json "$T/fifo" >/dev/null 2>"$T/fifo.err"
expect "a FIFO as the info file fails with 1" "1 1" "$? $(wc -l <"$T/fifo.err")"

echo "# record: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
