#!/bin/sh
# The kprobe tool on arm64, end to end in the test guest (busybox sh): the
# cross-built tool, agent and audit module (/tests/kprobe/) launching the
# cross-built test program (/tests/cli/cli_target) with count, trace,
# latency, run -e and record, and attach mode (-p), and usdt: probes on
# /tests/cli/cli_usdt.  Each check prints
# [PASS] or [FAIL] and the last line is a Criterion-style synthesis, which
# tests/arm64/init.sh counts as it does a suite's.  A64_CLI=quick (on the
# kernel command line, from tests/arm64/quick.sh) runs the short set that
# `make check` boots with.
# Arguments (Criterion's, from init.sh) are ignored.
KP=${KP:-/tests/kprobe/kprobe}
T=${T:-/tests/cli/cli_target}
U=${U:-/tests/cli/cli_usdt}
W=$(mktemp -d)
pass=0
fail=0

ok() {
	echo "[PASS] arm64-cli::$1"
	pass=$((pass + 1))
}

bad() {
	echo "[FAIL] arm64-cli::$1: $2"
	fail=$((fail + 1))
	if [ -n "${3:-}" ] && [ -f "$3" ]; then
		sed 's/^/    | /' "$3" | head -n 20
	fi
}

# run NAME CMD...: the command's stdout in $W/out, stderr in $W/err, its
# status in $rc.
run() {
	"$@" >"$W/out" 2>"$W/err" </dev/null
	rc=$?
}

# has NAME FILE TEXT: TEXT occurs in FILE (fixed string).
has() {
	grep -qF -- "$3" "$2" || { bad "$1" "no \"$3\" in the output (status $rc)" "$2"; return 1; }
}

# count_of FILE TEXT: how many lines of FILE hold TEXT.
count_of() {
	grep -cF -- "$2" "$1"
}

t_count_exact() {
	run "$KP" count target_add --format json -- "$T" calls 1000
	[ $rc -eq 0 ] || { bad count_exact "status $rc" "$W/err"; return; }
	has count_exact "$W/out" "sum 1498500" || return
	has count_exact "$W/err" '"hits":1000' || return
	ok count_exact
}

# A return counted at the function's exit site (its RET), as many as the
# entries; with KPROBE_RETURN_PROBES=1 by a return probe, the same.
t_count_return() {
	for how in sites probes; do
		if [ $how = probes ]; then
			run env KPROBE_RETURN_PROBES=1 "$KP" count target_add 'target_add%return' \
				-- "$T" calls 1000
		else
			run "$KP" count target_add 'target_add%return' -- "$T" calls 1000
		fi
		[ $rc -eq 0 ] || { bad count_return "$how: status $rc" "$W/err"; return; }
		grep -Eq '^target_add .* 1000 +0$' "$W/err" &&
			grep -Eq '^target_add%return .* 1000 +0$' "$W/err" ||
			{ bad count_return "$how: not 1000 entries and returns" "$W/err"; return; }
	done
	ok count_return
}

t_count_text_glob() {
	run "$KP" count 'target_a*' 'target_greet' -- "$T" calls 50
	[ $rc -eq 0 ] || { bad count_text_glob "status $rc" "$W/err"; return; }
	grep -Eq '^target_add .* 50 +0$' "$W/err" ||
		{ bad count_text_glob "target_add 50 not shown" "$W/err"; return; }
	ok count_text_glob
}

t_trace_args_retval() {
	run "$KP" trace 'target_add a=arg1:s64 b=arg2:u64' 'target_add%return r=retval:s64' \
		-- "$T" calls 3
	[ $rc -eq 0 ] || { bad trace_args_retval "status $rc" "$W/err"; return; }
	has trace_args_retval "$W/out" "sum 9" || return
	has trace_args_retval "$W/err" " target_add a=1 b=2" || return
	has trace_args_retval "$W/err" " target_add a=2 b=4" || return
	has trace_args_retval "$W/err" " target_add%return r=3" || return
	has trace_args_retval "$W/err" " target_add%return r=6" || return
	ok trace_args_retval
}

# x0..x7 and v0..v7 are numbered apart, as rdi.. and xmm0.. on x86-64:
# the floating-point arguments through the jprobe at the entry.
t_trace_float_args() {
	run "$KP" trace 'target_scale n=arg1:s64 k=arg2:s32 x=arg1:f64 y=arg2:f64' \
		-- "$T" float 3
	[ $rc -eq 0 ] || { bad trace_float_args "status $rc" "$W/err"; return; }
	has trace_float_args "$W/out" "15" || return
	n=$(count_of "$W/err" " target_scale n=3 k=2 x=1.5 y=0.25")
	[ "$n" -eq 3 ] || { bad trace_float_args "$n entries with n=3 k=2 x=1.5 y=0.25, not 3" "$W/err"; return; }
	ok trace_float_args
}

# retval:f64 is d0 at the return; the program goes on to print its sum.
t_trace_float_retval() {
	run "$KP" trace 'target_scale%return r=retval:f64' -- "$T" float 3
	[ $rc -eq 0 ] || { bad trace_float_retval "status $rc" "$W/err"; return; }
	has trace_float_retval "$W/out" "15" || return
	n=$(count_of "$W/err" " target_scale%return r=5")
	[ "$n" -eq 3 ] || { bad trace_float_retval "$n returns r=5, not 3" "$W/err"; return; }
	ok trace_float_retval
}

# With --stack the return handler reads d0 through kprobes_vector_reg()
# (the library keeps the V registers around it): the same values, each
# with its stack from main.
t_trace_float_retval_stack() {
	run "$KP" trace --stack 'target_scale%return r=retval:f64' -- "$T" float 3
	[ $rc -eq 0 ] || { bad trace_float_retval_stack "status $rc" "$W/err"; return; }
	has trace_float_retval_stack "$W/out" "15" || return
	n=$(count_of "$W/err" " target_scale%return r=5")
	[ "$n" -eq 3 ] || { bad trace_float_retval_stack "$n returns r=5, not 3" "$W/err"; return; }
	n=$(grep -c '^        main+0x' "$W/err")
	[ "$n" -eq 3 ] || { bad trace_float_retval_stack "$n stacks through main, not 3" "$W/err"; return; }
	ok trace_float_retval_stack
}

t_trace_narrow() {
	run "$KP" trace 'target_add a=arg1:s32 b=arg1:u32 c=arg1:s16 d=arg1:u16 e=arg1:s8 f=arg1:u8 g=arg2:s16 h=arg2:u8' \
		-- "$T" narrow
	[ $rc -eq 0 ] || { bad trace_narrow "status $rc" "$W/err"; return; }
	has trace_narrow "$W/err" " target_add a=-2 b=4294967294 c=-2 d=65534 e=-2 f=254 g=-128 h=128" ||
		return
	ok trace_narrow
}

t_latency() {
	run "$KP" latency target_spin_ns --format json -- "$T" spin 300000 20
	[ $rc -eq 0 ] || { bad latency "status $rc" "$W/err"; return; }
	has latency "$W/err" '{"function":"target_spin_ns","count":20,"histogram":[' || return
	# 300 us lies in [262144, 524287]; a slow emulator only makes it longer.
	grep -Eq '"low_ns":(262144|524288|1048576|2097152)' "$W/err" ||
		{ bad latency "no bucket at or above 262144 ns" "$W/err"; return; }
	ok latency
}

t_run_count() {
	run "$KP" run -e 'uprobe:'"$T"':target_add { @c = count(); @s = sum(arg0); }' \
		-- "$T" calls 100
	[ $rc -eq 0 ] || { bad run_count "status $rc" "$W/err"; return; }
	has run_count "$W/err" "@c: 100" || return
	has run_count "$W/err" "@s: 4950" || return
	ok run_count
}

t_run_retval_printf() {
	run "$KP" run -e 'uretprobe:'"$T"':target_greet { printf("greet=%d\n", retval); }' \
		-- "$T" greet
	[ $rc -eq 0 ] || { bad run_retval_printf "status $rc" "$W/err"; return; }
	grep -q 'greet=[0-9]' "$W/out" "$W/err" ||
		{ bad run_retval_printf "no greet=N line" "$W/err"; return; }
	ok run_retval_printf
}

# override() returns from the function without running it: through x30.
t_run_override() {
	run "$KP" run -e 'uprobe:'"$T"':target_add { override(7); }' -- "$T" calls 4
	[ $rc -eq 0 ] || { bad run_override "status $rc" "$W/err"; return; }
	has run_override "$W/out" "sum 28" || return
	ok run_override
}

t_record() {
	run "$KP" record -o "$W/rec" target_recurse -- "$T" recurse 5
	[ $rc -eq 0 ] || { bad record "status $rc" "$W/err"; return; }
	run "$KP" report --sort calls "$W/rec"
	[ $rc -eq 0 ] || { bad record "report: status $rc" "$W/err"; return; }
	grep -Eq '(^| )6 +target_recurse$' "$W/out" ||
		{ bad record "report does not show 6 calls of target_recurse" "$W/out"; return; }
	ok record
}

# Attaching (-p) to a program sleeping in nanosleep between calls: the
# agent is loaded by a call the tool makes in one of its threads, the
# probe counts, and the program goes on after the session, twice (the
# second time the loaded agent is only started again).
t_attach() {
	"$T" loop >"$W/loop.out" 2>&1 &
	pid=$!
	sleep 0.5
	for round in 1 2; do
		# -d bounds the arming too: generous, for an emulator on a busy host
		run "$KP" count target_add --format json -d 4 -p "$pid"
		[ $rc -eq 0 ] || { bad attach "round $round: status $rc" "$W/err"; break; }
		grep -Eq '"hits":[1-9]' "$W/out" ||
			{ bad attach "round $round: no hits" "$W/out"; rc=1; break; }
	done
	before=$(wc -l <"$W/loop.out")
	sleep 0.5
	after=$(wc -l <"$W/loop.out")
	alive=0
	kill -0 "$pid" 2>/dev/null && alive=1
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ $rc -eq 0 ] || return
	[ $alive -eq 1 ] || { bad attach "the target died" "$W/loop.out"; return; }
	[ "$after" -gt "$before" ] || { bad attach "the target stopped ticking" "$W/loop.out"; return; }
	ok attach
}

# An SDT probe (tests/cli/cli_usdt.c, built for arm64 with GCC -O2): its
# note's operands in AArch64 syntax, a register, a stack slot ([sp, N])
# and a constant; the semaphore raised while probed.
t_usdt() {
	run "$KP" trace 'usdt:demo:req' -- "$U" 3
	[ $rc -eq 0 ] || { bad usdt "status $rc" "$W/err"; return; }
	has usdt "$W/out" "enabled=3 of 3" || return
	has usdt "$W/err" " usdt:demo:req arg0=1000 arg1=0 arg2=7" || return
	has usdt "$W/err" " usdt:demo:req arg0=1001 arg1=-1 arg2=7" || return
	has usdt "$W/err" " usdt:demo:req arg0=1002 arg1=-2 arg2=7" || return
	run "$KP" trace 'usdt:demo:req arg3' -- "$U" 1
	[ $rc -eq 2 ] || { bad usdt "arg3 of 3: status $rc, not 2" "$W/err"; return; }
	has usdt "$W/err" "has 3 arguments (arg0..arg2): not arg3" || return
	ok usdt
}

t_bad_probe() {
	run "$KP" trace 'target_add arg1:s12' -- "$T" narrow
	[ $rc -eq 2 ] || { bad bad_probe "status $rc, not 2" "$W/err"; return; }
	ok bad_probe
}

t_count_exact
t_count_return
t_trace_args_retval
t_run_count
if [ "${A64_CLI:-}" != quick ]; then
	t_count_text_glob
	t_trace_float_args
	t_trace_float_retval
	t_trace_float_retval_stack
	t_trace_narrow
	t_latency
	t_run_retval_printf
	t_run_override
	t_record
	t_attach
	t_bad_probe
	t_usdt
fi
rm -rf "$W"
echo "[====] Synthesis: Tested: $((pass + fail)) | Passing: $pass | Failing: $fail | Crashing: 0"
[ $fail -eq 0 ]
