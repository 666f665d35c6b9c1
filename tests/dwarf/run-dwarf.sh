#!/bin/sh
# Program variables by name compared with gdb (the oracle), inlined
# copies counted, and SDT probes (ours with a semaphore, libstdc++'s,
# python3.11's against bpftrace): for each build
# of tests/cli/cli_dwarf.c (gcc -O0/-O2, clang -O0/-O2 when installed),
# kprobe trace prints parameters, locals, struct fields behind pointers,
# array elements, strings, doubles, bit-fields, enums and the fields of a
# struct held in pieces at three source lines, and gdb prints
# the same expressions at the same lines on the same input.  Then bad
# input: an unknown variable and a field of a non-struct exit 2 with one
# line.  Usage: run-dwarf.sh BUILD_DIR
set -u
B=${1:-build}
KPROBE=$B/kprobe
SRC=tests/cli/cli_dwarf.c
OUT=$B/tests/dwarf
mkdir -p "$OUT"
fail=0
checked=0

if ! command -v gdb >/dev/null 2>&1; then
	echo "dwarf-vars: SKIP: gdb is not installed (it is the oracle)"
	exit 0
fi
if ! command -v jq >/dev/null 2>&1; then
	echo "dwarf-vars: SKIP: jq is not installed (it reads kprobe's JSON)"
	exit 0
fi

L1=$(grep -n 'probe: parse_header' $SRC | cut -d: -f1)
L2=$(grep -n 'probe: accumulate' $SRC | cut -d: -f1)
L3=$(grep -n 'probe: span_len' $SRC | cut -d: -f1)
# EXPR:KIND, KIND d (integer), f (floating point) or s (string).
P1="header_calls:d sink:d len:d total:d sum:d req->hdr.len:d req->hdr.flags:d req->vals[1]:d req->vals[3]:d w:f req->weight:f req->name:s req->hdr.tag:s *req->name:c req->hdr.urgent:d req->hdr.prio:d req->hdr.seq:d req->kind:d req->hp->len:d req->hp->tag:s"
P2="i:d n:d acc:d v[2]:d *v:d f:f"
# A struct passed by value: in registers at -O2, in pieces (DW_OP_piece).
P3="s.lo:d s.hi:d k:d r:d"
# Parameters whose registers the call reused: at -O2 their values at the
# entry (DW_OP_entry_value), which gdb takes from the caller's call site;
# compared at every stop (the last call is an indirect one: no call site,
# <optimized out> for gdb too).
L4=$(grep -n 'probe: after_call' $SRC | cut -d: -f1)
P4="x y req->hdr.len r"

# The source file the lines are in.
SRCNAME=cli_dwarf.c

# gdb's value of each EXPR at the first stop at FILE:LINE, one a line.
gdb_values() {
	prog=$1 line=$2 exprs=$3
	set --
	for e in $exprs; do
		x=${e%:*}
		case ${e##*:} in
		d) set -- "$@" -ex "print $x" ;;
		c) set -- "$@" -ex "print/d $x" ;;
		f) set -- "$@" -ex "print $x" ;;
		s) set -- "$@" -ex "printf \"=%s\\n\", $x" ;;
		esac
	done
	timeout 60 gdb -nx -q -batch -ex "break $SRCNAME:$line" -ex "run 2" "$@" "$prog" \
		</dev/null 2>/dev/null | sed -n 's/^\$[0-9]* = //p; s/^=//p'
}

# kprobe's value of each EXPR in the first event, one a line ("null" when
# it says optimized out).
kprobe_values() {
	prog=$1 line=$2 exprs=$3
	set --
	args= k=0
	for e in $exprs; do
		args="$args ${e%:*}"
		k=$((k + 1))
		# A probe takes at most 8 arguments: several probes, one line.
		if [ $k -eq 6 ]; then
			set -- "$@" "$SRCNAME:$line$args"
			args= k=0
		fi
	done
	[ -n "$args" ] && set -- "$@" "$SRCNAME:$line$args"
	timeout 60 "$KPROBE" trace --format json -o "$OUT/trace.json" "$@" -- "$prog" 2 \
		2>"$OUT/err" >/dev/null || { cat "$OUT/err" >&2; return 1; }
	for e in $exprs; do
		jq -r --arg k "${e%:*}" 'select(.args | has($k)) | .args[$k] | tostring' \
			"$OUT/trace.json" | head -1
	done
}

# Why kprobe cannot read NAME at the line (kprobe vars), or nothing.
why_unavailable() {
	"$KPROBE" vars "$SRCNAME:$2" "$1" 2>/dev/null |
		sed -n "s/^\t.* $3\( (parameter)\)\{0,1\}: //p" | head -1
}

compare_point() {
	prog=$1 tag=$2 line=$3 exprs=$4
	gdb_values "$prog" "$line" "$exprs" >"$OUT/gdb.txt"
	kprobe_values "$prog" "$line" "$exprs" >"$OUT/kp.txt" || {
		echo "FAIL $tag:$line: kprobe trace failed"
		fail=1
		return
	}
	n=0
	for e in $exprs; do
		n=$((n + 1))
		want=$(sed -n "${n}p" "$OUT/gdb.txt")
		got=$(sed -n "${n}p" "$OUT/kp.txt")
		[ "$got" = null ] && got="<optimized out>"
		checked=$((checked + 1))
		if [ "$want" = "$got" ]; then
			continue
		fi
		# gdb prints a piece of a composite location that has no
		# location (DW_OP_piece alone: optimized out) this way.
		if [ "$want" = "<synthetic pointer>" ] && [ "$got" = "<optimized out>" ]; then
			continue
		fi
		echo "FAIL $tag:$line ${e%:*}: gdb '$want', kprobe '$got'" \
		     "($(why_unavailable "$prog" "$line" "${e%:*}"))"
		fail=1
	done
}

# EXPRs at every stop at LINE, gdb's and kprobe's, one value a line, in
# the order of the stops; EXTRA: another probe traced alongside (its
# events, without arguments, left out).
compare_stops() {
	prog=$1 tag=$2 line=$3 exprs=$4 extra=${5:-}
	{
		echo "break $SRCNAME:$line"
		echo "commands"
		echo "silent"
		for e in $exprs; do echo "print $e"; done
		echo "continue"
		echo "end"
		echo "run 2"
	} >"$OUT/stops.gdb"
	timeout 60 gdb -nx -q -batch -x "$OUT/stops.gdb" "$prog" </dev/null 2>/dev/null |
		sed -n 's/^\$[0-9]* = //p' >"$OUT/gdb.txt"
	timeout 60 "$KPROBE" trace --format json -o "$OUT/trace.json" "$SRCNAME:$line $exprs" \
		$extra -- "$prog" 2 >/dev/null 2>"$OUT/err" || {
		echo "FAIL $tag:$line: kprobe trace failed: $(cat "$OUT/err")"
		fail=1
		return
	}
	: >"$OUT/kp.txt"
	jq -r 'select(.args) | .args | to_entries[] | .value | tostring' "$OUT/trace.json" |
		sed 's/^null$/<optimized out>/' >"$OUT/kp.txt"
	n=$(wc -l <"$OUT/gdb.txt")
	if [ "$n" -eq 0 ] || ! cmp -s "$OUT/gdb.txt" "$OUT/kp.txt"; then
		echo "FAIL $tag:$line $exprs at every stop${extra:+ (with $extra)}: gdb, then kprobe:"
		paste "$OUT/gdb.txt" "$OUT/kp.txt"
		fail=1
		return
	fi
	checked=$((checked + n))
	echo "dwarf-vars: $tag $SRCNAME:$line${extra:+ (with $extra)}: $n values at every stop as gdb's" \
	     "($(grep -c '<optimized out>' "$OUT/gdb.txt") optimized out)"
}

for cc in gcc clang; do
	if ! command -v $cc >/dev/null 2>&1; then
		echo "dwarf-vars: $cc not installed: its builds are not checked"
		continue
	fi
	for opt in O0 O2; do
		prog=$OUT/cli_dwarf-$cc-$opt
		$cc -$opt -g -o "$prog" $SRC || { echo "FAIL: cannot build $prog"; fail=1; continue; }
		compare_point "$prog" "$cc-$opt" "$L1" "$P1"
		compare_point "$prog" "$cc-$opt" "$L2" "$P2"
		compare_point "$prog" "$cc-$opt" "$L3" "$P3"
		compare_stops "$prog" "$cc-$opt" "$L4" "$P4"
		# The same with a return probe on the function: its stub in
		# the return slot stands for the caller's call site.
		compare_stops "$prog" "$cc-$opt" "$L4" "$P4" after_call%return
	done
done

# The same values by FUNCTION+OFFSET (the line's address), with a return
# probe on the function, against gdb at that address, every stop.
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	off=$("$KPROBE" vars "$SRCNAME:$L4" "$prog" 2>/dev/null | sed -n '1s/^after_call+\(0x[0-9a-f]*\) .*/\1/p')
	[ -n "$off" ] || { echo "FAIL $(basename "$prog"): no address for $SRCNAME:$L4"; fail=1; continue; }
	printf '%s\n' "break *after_call+$off" commands silent 'print x' 'print y' \
		'print req->hdr.len' continue end 'run 2' >"$OUT/off.gdb"
	timeout 60 gdb -nx -q -batch -x "$OUT/off.gdb" "$prog" </dev/null 2>/dev/null |
		sed -n 's/^\$[0-9]* = //p' >"$OUT/gdb.txt"
	timeout 60 "$KPROBE" trace --format json -o "$OUT/trace.json" "after_call+$off x y req->hdr.len" \
		after_call%return -- "$prog" 2 >/dev/null 2>"$OUT/err"
	jq -r 'select(.args) | .args | to_entries[] | .value | tostring' "$OUT/trace.json" |
		sed 's/^null$/<optimized out>/' >"$OUT/kp.txt"
	if [ ! -s "$OUT/gdb.txt" ] || ! cmp -s "$OUT/gdb.txt" "$OUT/kp.txt"; then
		echo "FAIL $(basename "$prog") after_call+$off with after_call%return: gdb, then kprobe: $(cat "$OUT/err")"
		paste "$OUT/gdb.txt" "$OUT/kp.txt"
		fail=1
	else
		checked=$((checked + $(wc -l <"$OUT/gdb.txt")))
	fi
done
echo "dwarf-vars: after_call+OFFSET with its return probe: values at every stop as gdb's (4 builds)"

# An entry value a call site passes in a register the caller preserves
# (rbx), which the callee's call-frame information has no rule for: every
# stop as gdb's, also with a return probe on the function.
SRCNAME=cli_entry.c
LE=$(grep -n 'probe: handle' tests/cli/$SRCNAME | cut -d: -f1)
for cc in gcc clang; do
	command -v $cc >/dev/null 2>&1 || continue
	prog=$OUT/cli_entry-$cc
	$cc -O2 -g -o "$prog" tests/cli/$SRCNAME || { echo "FAIL: cannot build $prog"; fail=1; continue; }
	compare_stops "$prog" "$cc-O2" "$LE" "k r->len t"
	compare_stops "$prog" "$cc-O2" "$LE" "k r->len t" handle%return
done
SRCNAME=cli_dwarf.c

# $params and $vars: every parameter and then every local at the line,
# names and values as gdb's "info args" and "info locals" print them
# (pointers, which ASLR moves, as PTR).
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	timeout 60 gdb -nx -q -batch -ex "break $SRCNAME:$L1" -ex 'run 1' -ex 'info args' \
		-ex 'info locals' "$prog" </dev/null 2>/dev/null |
		sed -n '/^[a-z_]* = /p' | sed 's/0x[0-9a-f]*/PTR/' >"$OUT/gdb-vars.txt"
	for v in '$params' '$vars'; do
		timeout 60 "$KPROBE" trace --format json -o "$OUT/vars.json" "$SRCNAME:$L1 $v" \
			-- "$prog" 1 >/dev/null 2>"$OUT/err"
		jq -r '.args | to_entries[] | "\(.key) = \(.value)"' "$OUT/vars.json" 2>/dev/null |
			sed 's/ = null$/ = <optimized out>/; s/0x[0-9a-f]*/PTR/' >"$OUT/kp-vars.txt"
		want=$OUT/gdb-vars.txt
		[ "$v" = '$params' ] && { head -3 "$OUT/gdb-vars.txt" >"$OUT/gdb-params.txt"; want=$OUT/gdb-params.txt; }
		if [ ! -s "$want" ] || ! cmp -s "$want" "$OUT/kp-vars.txt"; then
			echo "FAIL $(basename "$prog") $v at $SRCNAME:$L1: gdb, then kprobe:"
			paste "$want" "$OUT/kp-vars.txt"
			fail=1
		else
			checked=$((checked + $(wc -l <"$want")))
		fi
	done
done
echo "dwarf-vars: \$params and \$vars as gdb's info args and info locals (4 builds)"

# Floating-point return values: retval (no :TYPE) of weigh() (double) and
# ratio() (float) at every return, against gdb's "finish", in the plain
# return handler and in the one that takes a stack (which reads xmm0 with
# kprobes_vector_reg()).  One gdb run and two kprobe runs a build.
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	{
		for fn in weigh ratio; do
			echo "break $fn"
			echo "commands"
			echo "silent"
			echo "finish"
			echo "end"
		done
		echo "run 2"
		echo "continue"
		echo "continue"
		echo "continue"
	} >"$OUT/ret.gdb"
	timeout 60 gdb -nx -q -batch -x "$OUT/ret.gdb" "$prog" </dev/null 2>/dev/null |
		sed -n 's/^Value returned is \$[0-9]* = //p' >"$OUT/gdb-ret.txt"
	for stack in "" --stack; do
		timeout 60 "$KPROBE" trace $stack --format json -o "$OUT/ret.json" \
			"weigh%return retval" "ratio%return retval" -- "$prog" 2 >/dev/null 2>"$OUT/err"
		jq -r '.args.retval | tostring' "$OUT/ret.json" >"$OUT/kp-ret.txt"
		if [ "$(wc -l <"$OUT/gdb-ret.txt")" -ne 4 ] ||
		   ! cmp -s "$OUT/gdb-ret.txt" "$OUT/kp-ret.txt"; then
			echo "FAIL $(basename "$prog") weigh%return, ratio%return retval $stack: gdb" \
			     "$(tr '\n' ' ' <"$OUT/gdb-ret.txt"), kprobe" \
			     "$(tr '\n' ' ' <"$OUT/kp-ret.txt") $(cat "$OUT/err")"
			fail=1
		else
			checked=$((checked + 4))
		fi
	done
done
echo "dwarf-vars: retval of double and float functions as gdb's finish (4 builds, with and without --stack)"

# ... and of int and long functions: signed, as gdb's finish prints them.
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	{
		for fn in parse_header span_len; do
			echo "break $fn"
			echo "commands"
			echo "silent"
			echo "finish"
			echo "end"
		done
		echo "run 2"
		echo "continue"
		echo "continue"
		echo "continue"
	} >"$OUT/ret.gdb"
	timeout 60 gdb -nx -q -batch -x "$OUT/ret.gdb" "$prog" </dev/null 2>/dev/null |
		sed -n 's/^Value returned is \$[0-9]* = //p' >"$OUT/gdb-ret.txt"
	timeout 60 "$KPROBE" trace --format json -o "$OUT/ret.json" \
		"parse_header%return retval" "span_len%return retval" -- "$prog" 2 >/dev/null 2>"$OUT/err"
	jq -r '.args.retval | tostring' "$OUT/ret.json" >"$OUT/kp-ret.txt"
	if [ "$(wc -l <"$OUT/gdb-ret.txt")" -ne 4 ] || ! cmp -s "$OUT/gdb-ret.txt" "$OUT/kp-ret.txt"; then
		echo "FAIL $(basename "$prog") parse_header%return, span_len%return retval: gdb" \
		     "$(tr '\n' ' ' <"$OUT/gdb-ret.txt"), kprobe $(tr '\n' ' ' <"$OUT/kp-ret.txt") $(cat "$OUT/err")"
		fail=1
	else
		checked=$((checked + 4))
	fi
done
echo "dwarf-vars: retval of int and long functions as gdb's finish (4 builds)"

# Inlined copies: the calls of mix() (out of line at -O0, inlined at -O2)
# and scale() (always inlined) counted exactly, the same in every build.
# clang -O2 unrolls main's loop by 4 and gives the copies of mix one
# DW_TAG_inlined_subroutine: each copy is probed (23 calls all the same).
# It also unrolls accumulate's loop by 2 with scale folded into an
# induction variable (no instruction of its own) and drops the copy in
# parse_header: those calls cannot be counted, and the tool must say so
# for accumulate's (the call line's code in 3 copies, 1 inlined copy).
LACC=$(grep -n 'acc += v\[i\] \* scale' $SRC | cut -d: -f1)
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	timeout 60 "$KPROBE" count --format json -o "$OUT/count.json" mix scale -- "$prog" 3 \
		>/dev/null 2>"$OUT/err" || { echo "FAIL count $prog: $(cat "$OUT/err")"; fail=1; continue; }
	mix=$(jq '[.probes[] | select(.probe == "mix") | .hits] | add' "$OUT/count.json")
	scale=$(jq '[.probes[] | select(.probe == "scale") | .hits] | add' "$OUT/count.json")
	inl=$(jq '[.probes[] | select(.inlined_in)] | length' "$OUT/count.json")
	echo "dwarf-vars: $(basename "$prog"): mix $mix calls, scale $scale calls, $inl inlined copies probed"
	# rounds 3: 21 + 2 calls of mix, 3 * (1 + 3) of scale.
	if [ "$mix" != 23 ]; then
		echo "FAIL $(basename "$prog"): mix $mix (want 23)"
		fail=1
	fi
	said=$(grep -c "scale: the call at cli_dwarf.c:$LACC has 3 copies of its code and 1 inlined copy" "$OUT/err")
	case $prog:$scale:$said in
	*:12:0) ;;
	*clang-O2:*:1)
		echo "KNOWN GAP $(basename "$prog"): scale $scale (12 calls), said: $(cat "$OUT/err")" ;;
	*)
		echo "FAIL $(basename "$prog"): scale $scale (want 12, or the calls not counted said): $(cat "$OUT/err")"
		fail=1 ;;
	esac
done
# A helper inlined in a loop clang -O2 vectorizes: counted exactly where
# the compiler kept a copy per call (gcc -O2: 37), else the tool says that
# its inlined copy holds copies it cannot tell apart.
for cc in gcc clang; do
	command -v $cc >/dev/null 2>&1 || continue
	prog=$OUT/cli_vec_inline-$cc
	$cc -O2 -g -o "$prog" tests/cli/cli_vec_inline.c || { echo "FAIL: cannot build $prog"; fail=1; continue; }
	timeout 60 "$KPROBE" count --format json -o "$OUT/count.json" triple -- "$prog" 37 \
		>/dev/null 2>"$OUT/err" || { echo "FAIL count $prog: $(cat "$OUT/err")"; fail=1; continue; }
	hits=$(jq '[.probes[] | select(.probe == "triple") | .hits] | add' "$OUT/count.json")
	said=$(grep -c "triple: its inlined copy at .* in apply holds copies of its code that are not alike" "$OUT/err")
	echo "dwarf-vars: $(basename "$prog"): triple $hits of 37 calls counted$([ "$said" = 1 ] && echo ', undercount said')"
	if [ "$hits" != 37 ] && [ "$said" != 1 ]; then
		echo "FAIL $(basename "$prog"): triple $hits (want 37, or the undercount said): $(cat "$OUT/err")"
		fail=1
	fi
done

# An inlined copy's own parameters at its entry, at every stop as gdb's
# (gdb does not stop at a copy with no instruction of its own: those
# builds are compared by the names kprobe vars lists there).
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	printf '%s\n' 'break scale' commands silent 'print k' 'print x' continue end 'run 2' \
		>"$OUT/scale.gdb"
	timeout 60 gdb -nx -q -batch -x "$OUT/scale.gdb" "$prog" </dev/null 2>/dev/null |
		sed -n 's/^\$[0-9]* = //p' >"$OUT/gdb.txt"
	timeout 60 "$KPROBE" trace --format json -o "$OUT/trace.json" 'scale k x' -- "$prog" 2 \
		>/dev/null 2>"$OUT/err"
	jq -r 'select(.args) | .args | to_entries[] | .value | tostring' "$OUT/trace.json" |
		sed 's/^null$/<optimized out>/' >"$OUT/kp.txt"
	if [ "$(wc -l <"$OUT/gdb.txt")" = "$(wc -l <"$OUT/kp.txt")" ]; then
		cmp -s "$OUT/gdb.txt" "$OUT/kp.txt" && checked=$((checked + $(wc -l <"$OUT/gdb.txt"))) ||
			{ echo "FAIL $(basename "$prog") scale k x: gdb, then kprobe: $(cat "$OUT/err")";
			  paste "$OUT/gdb.txt" "$OUT/kp.txt"; fail=1; }
	fi
	got=$("$KPROBE" vars scale "$prog" 2>&1 | sed -n 's/^\t.* \([a-z]*\) (parameter).*/\1/p' | sort -u | tr '\n' ' ')
	[ "$got" = "k x " ] || { echo "FAIL kprobe vars scale $(basename "$prog"): '$got'"; fail=1; }
done
echo "dwarf-vars: an inlined copy's parameters as gdb's at every stop, its own names everywhere"

# --no-inlines: only out-of-line copies; mix has none at gcc -O2.
"$KPROBE" count --no-inlines --format json -o "$OUT/count.json" parse_header scale \
	-- "$OUT/cli_dwarf-gcc-O0" 3 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q scale "$OUT/err"; then
	echo "FAIL --no-inlines: scale (inlined only) was probed: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
"$KPROBE" count --no-inlines --format json -o "$OUT/count.json" parse_header \
	-- "$OUT/cli_dwarf-gcc-O2" 3 >/dev/null 2>"$OUT/err"
if [ "$(jq '.probes | length' "$OUT/count.json")" != 1 ]; then
	echo "FAIL --no-inlines: $(cat "$OUT/count.json" "$OUT/err")"
	fail=1
fi

# A function of a library, named without its object: its variables from
# the library's debug information (the executable has none), kept in a
# separate file found through .gnu_debuglink, and libc's through its
# build-id under /usr/lib/debug when libc6-dbg is installed.
mkdir -p "$OUT/lib"
printf '%s\n' 'struct pt { int x; long y; };' \
	'__attribute__((noinline)) long lib_sum(struct pt *p, int k) { return p->x * k + p->y; }' \
	>"$OUT/lib/libsep.c"
printf '%s\n' '#include <stdlib.h>' 'struct pt { int x; long y; };' 'long lib_sum(struct pt *, int);' \
	'int main(void) { struct pt p = { 3, 40 }; long t = 0;' \
	'for (int k = 1; k <= 2; k++) t += lib_sum(&p, k); return getenv("KP_SEP_NONE") ? 1 : t != 89; }' \
	>"$OUT/lib/main.c"
gcc -O2 -g -shared -fPIC -o "$OUT/lib/libsep.so" "$OUT/lib/libsep.c" &&
	objcopy --only-keep-debug "$OUT/lib/libsep.so" "$OUT/lib/libsep.so.dbg" &&
	objcopy --strip-debug --add-gnu-debuglink="$OUT/lib/libsep.so.dbg" "$OUT/lib/libsep.so" &&
	gcc -O2 -o "$OUT/lib/sepmain" "$OUT/lib/main.c" -L"$OUT/lib" -lsep ||
	{ echo "FAIL: cannot build the separate debug file test"; fail=1; }
got=$(LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" trace -o "$OUT/sep.txt" 'lib_sum p->x p->y k' \
	-- "$OUT/lib/sepmain" 2>&1 && sed 's/.*lib_sum[^ ]* //' "$OUT/sep.txt" | tr '\n' ';')
if [ "$got" != "p->x=3 p->y=40 k=1;p->x=3 p->y=40 k=2;" ]; then
	echo "FAIL a library's variables through .gnu_debuglink, no object named: '$got'"
	fail=1
else
	echo "dwarf-vars: a library's variables through .gnu_debuglink, no object named"
fi
# ... and a FILE:LINE probe in it (the agent reads the line table from
# the same debug file).
LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" count --format json -o "$OUT/sep.json" 'libsep.c:2' \
	-- "$OUT/lib/sepmain" >/dev/null 2>"$OUT/err"
got=$(jq -r '[.probes[] | "\(.object)=\(.hits)"] | join(" ")' "$OUT/sep.json" 2>/dev/null)
[ "$got" = "libsep.so=2" ] ||
	{ echo "FAIL a FILE:LINE probe through .gnu_debuglink: '$got' $(cat "$OUT/err")"; fail=1; }
# A debug file of another build under the link's name (its CRC-32 is not
# the link's): not read, as gdb does not read it (its locations would
# give wrong values).
gcc -O0 -g -shared -fPIC -o "$OUT/lib/other.so" "$OUT/lib/libsep.c" &&
	objcopy --only-keep-debug "$OUT/lib/other.so" "$OUT/lib/libsep.so.dbg"
LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" trace -o "$OUT/sep.txt" 'lib_sum p->x k' \
	-- "$OUT/lib/sepmain" >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q 'no debug information\|no such function' "$OUT/err"; then
	echo "FAIL a stale debug file was read: exit $rc, $(cat "$OUT/err" "$OUT/sep.txt")"
	fail=1
fi
# A helper a library only inlines (two copies, no out-of-line one), named
# without its object: its copies in the library are probed, 2 per call of
# lib_run, and --no-inlines finds nothing to probe.
printf '%s\n' 'volatile long lib_sink;' \
	'static inline __attribute__((always_inline)) void lib_mix(long a) { lib_sink = lib_sink * 3 + a; }' \
	'__attribute__((noinline)) long lib_run(long n) { lib_mix(n); if (n & 1) lib_sink += 7; lib_mix(n + 1); return lib_sink; }' \
	>"$OUT/lib/libinl.c"
printf '%s\n' 'long lib_run(long);' \
	'int main(void) { long t = 0; for (long k = 0; k < 5; k++) t += lib_run(k); return t == 42; }' \
	>"$OUT/lib/inlmain.c"
gcc -O2 -g -shared -fPIC -o "$OUT/lib/libinl.so" "$OUT/lib/libinl.c" &&
	gcc -O2 -o "$OUT/lib/inlmain" "$OUT/lib/inlmain.c" -L"$OUT/lib" -linl ||
	{ echo "FAIL: cannot build the library inlining test"; fail=1; }
LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" count --format json -o "$OUT/inl.json" lib_mix \
	-- "$OUT/lib/inlmain" >/dev/null 2>"$OUT/err"
got=$(jq -r '[.probes[] | select(.probe == "lib_mix" and .object == "libinl.so" and .inlined_in) |
	.hits] | "\(length) copies, \(add) calls"' "$OUT/inl.json" 2>/dev/null)
if [ "$got" != "2 copies, 10 calls" ]; then
	echo "FAIL a library's inlined copies, no object named: '$got' $(cat "$OUT/err" "$OUT/inl.json")"
	fail=1
else
	echo "dwarf-vars: a library's inlined copies, no object named ($got)"
fi
LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" count --no-inlines lib_mix -- "$OUT/lib/inlmain" \
	>/dev/null 2>"$OUT/err"
rc=$?
[ $rc -eq 2 ] || { echo "FAIL --no-inlines on a library's inline-only helper: exit $rc, $(cat "$OUT/err")"; fail=1; }
LIBC=$(ldd "$OUT/lib/sepmain" | sed -n 's/.*libc\.so\.6 => \([^ ]*\).*/\1/p')
BID=$(readelf -n "$LIBC" 2>/dev/null | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
if [ -n "$BID" ] && [ -r "/usr/lib/debug/.build-id/$(echo "$BID" | cut -c1-2)/$(echo "$BID" | cut -c3-).debug" ]; then
	got=$(LD_LIBRARY_PATH=$OUT/lib timeout 60 "$KPROBE" trace -o "$OUT/bid.txt" 'getenv name' \
		-- "$OUT/lib/sepmain" 2>&1 && grep -c 'name="KP_SEP_NONE"' "$OUT/bid.txt")
	[ "$got" = 1 ] && echo "dwarf-vars: libc's variables through its build-id" ||
		{ echo "FAIL libc's getenv name through the build-id: '$got'"; fail=1; }
else
	echo "dwarf-vars: no debug file for libc under /usr/lib/debug/.build-id (libc6-dbg): not checked"
fi

# Bad input: one line, exit 2.
prog=$OUT/cli_dwarf-gcc-O0
"$KPROBE" trace "cli_dwarf.c:$L1 nosuch" -- "$prog" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "no variable 'nosuch'.*available: .*total" "$OUT/err"; then
	echo "FAIL unknown variable: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
"$KPROBE" trace "cli_dwarf.c:$L1 len.x" -- "$prog" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "not a struct" "$OUT/err"; then
	echo "FAIL field of a non-struct: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
"$KPROBE" trace "cli_dwarf.c:$L1 req->nosuch" -- "$prog" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "has no field 'nosuch'" "$OUT/err"; then
	echo "FAIL unknown field: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
# Loads through bad pointers (unmapped, kernel, non-canonical) are faults
# in the output, not crashes of the program.
# d's hop leaves the canonical range (an offset too far for the compiled
# form); e and f are register-and-hops plans (the compiled form): a second
# hop through the byte the first read (an address below 4096), and a hop
# 2 GB past the code (unmapped).
out=$("$KPROBE" trace "cli_dwarf.c:$L1 a=@#4096*8:u64 b=@#-140737488355328*8:u64 c=@#9223372036854775807*4:s32 d=@r7+140737488355328*8:u64 e=@r7*1*8:u64 f=@r16+2147483647*8:u64 len" \
	-o "$OUT/fault.txt" -- "$prog" 1 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -q 'a=(fault) b=(fault) c=(fault) d=(fault) e=(fault) f=(fault) len=5' "$OUT/fault.txt"; then
	echo "FAIL faulting loads: exit $rc, $out, $(cat "$OUT/fault.txt")"
	fail=1
fi

# Plans with cases, as entry values from call sites compile: the key
# picks a case (the first, a later one, then steps after the end), none
# matching is optimized out, and a case whose load faults too.
out=$("$KPROBE" trace "cli_dwarf.c:$L1 a=@#7?7#42!:s64 b=@#7?6#1?7#42!:s64 c=@#7?7#42?8#1!+1:s64 d=@#7?6#1?8#2!:s64 e=@#7?7#4096*8!:u64 len" \
	-o "$OUT/cases.txt" -- "$prog" 1 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -q 'a=42 b=42 c=43 d=<optimized out> e=<optimized out> len=5' "$OUT/cases.txt"; then
	echo "FAIL plans with cases: exit $rc, $out, $(cat "$OUT/cases.txt")"
	fail=1
fi

# With the fault signals blocked the agent cannot catch a faulting load:
# plans (compiled chains and the general form) then read through the
# kernel, with the same values, and a bad pointer is still a fault.
for prog in "$OUT"/cli_dwarf-gcc-O[02]; do
	"$KPROBE" trace "cli_dwarf.c:$L1 req->hdr.len req->hp->len req->hdr.prio c=@#4096*8:u64 d=@r7+140737488355328*8:u64 f=@r16+2147483647*8:u64" \
		-o "$OUT/block.txt" -- "$prog" 1 block >/dev/null 2>"$OUT/err"
	grep -q 'req->hdr.len=42 req->hp->len=42 req->hdr.prio=-11 c=(fault) d=(fault) f=(fault)$' "$OUT/block.txt" ||
		{ echo "FAIL loads with the fault signals blocked, $(basename "$prog"): $(cat "$OUT/block.txt" "$OUT/err")"; fail=1; }
done

# A plan step that reads a vector register: xmm0 at parse_header's first
# instruction (its double parameter w) at the first call, against gdb's
# $xmm0 there; there is no v16.
for prog in "$OUT"/cli_dwarf-gcc-O[02]; do
	timeout 60 "$KPROBE" trace --format json -o "$OUT/vreg.json" "parse_header x=@v0:f64" \
		-- "$prog" 2 >/dev/null 2>"$OUT/err"
	got=$(jq -r '.args.x | tostring' "$OUT/vreg.json" 2>/dev/null | head -1)
	want=$(timeout 60 gdb -nx -q -batch -ex 'break *parse_header' -ex 'run 2' \
		-ex 'print $xmm0.v2_double[0]' "$prog" </dev/null 2>/dev/null | sed -n 's/^\$[0-9]* = //p')
	if [ -z "$want" ] || [ "$got" != "$want" ]; then
		echo "FAIL @v0 at parse_header, $(basename "$prog"): gdb '$want', kprobe '$got' $(cat "$OUT/err")"
		fail=1
	fi
done
"$KPROBE" trace "parse_header x=@v16:f64" -- "$OUT/cli_dwarf-gcc-O0" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ]; then
	echo "FAIL @v16 accepted: exit $rc, $(cat "$OUT/err")"
	fail=1
fi

# ---- casts to struct types of the program's DWARF in kprobe run ----
# ((struct request *)arg0)->FIELD, through a struct inside and a pointer
# to a struct, against gdb's values of the same fields at the entry.
for prog in "$OUT"/cli_dwarf-*-O[02]; do
	cast='((struct request *)arg0)'
	timeout 60 "$KPROBE" run -o "$OUT/cast.txt" -e "uprobe:$prog:parse_header { printf(\"%d %d %d %d %d\\n\", $cast->hdr.len, $cast->hdr.flags, $cast->hp->len, arg1, $cast->kind); exit(); }" \
		-- "$prog" 2 >/dev/null 2>"$OUT/err"
	got=$(grep -v '^Attaching\|^$' "$OUT/cast.txt" | head -1)
	want=$(timeout 60 gdb -nx -q -batch -ex 'break parse_header' -ex 'run 2' -ex 'print req->hdr.len' \
		-ex 'print req->hdr.flags' -ex 'print req->hp->len' -ex 'print len' -ex 'print/d req->kind' \
		"$prog" </dev/null 2>/dev/null | sed -n 's/^\$[0-9]* = //p' | tr '\n' ' ')
	checked=$((checked + 5))
	[ "$got " = "$want" ] || { echo "FAIL cast in a program, $(basename "$prog"): '$got', gdb '$want' $(cat "$OUT/err")"; fail=1; }
done

# The forms bpftrace 0.17 reads from DWARF too (a cast's own fields,
# args->NAME->FIELD), byte for byte as it prints them when it can run here.
if command -v bpftrace >/dev/null 2>&1; then
	same=0
	for prog in "$OUT"/cli_dwarf-*-O[02]; do
		bt="uprobe:$prog:parse_header { printf(\"%d %s %d %d\\n\", ((struct request *)arg0)->kind, str(((struct request *)arg0)->name), args->req->kind, args->len); }"
		timeout 60 "$KPROBE" run -o "$OUT/bt-kprobe.txt" -e "$bt" -- "$prog" 2 >/dev/null 2>"$OUT/err"
		if timeout 60 bpftrace -o "$OUT/bt-bpftrace.txt" -e "$bt" -c "$prog 2" >/dev/null 2>&1 &&
		   [ -s "$OUT/bt-bpftrace.txt" ]; then
			if cmp -s "$OUT/bt-bpftrace.txt" "$OUT/bt-kprobe.txt"; then
				same=$((same + 1))
			else
				echo "FAIL casts in a program differ from bpftrace's, $(basename "$prog"):"
				diff "$OUT/bt-bpftrace.txt" "$OUT/bt-kprobe.txt" | head -6
				fail=1
			fi
		else
			echo "dwarf-vars: bpftrace cannot run here: casts not compared with it"
			break
		fi
	done
	[ $same -gt 0 ] && echo "dwarf-vars: casts and args->NAME->FIELD in a program: as bpftrace prints them ($same builds)"
fi

# ---- C++ names: demangled, qualified, overloads by signature or glob ----
if command -v g++ >/dev/null 2>&1; then
	# In expressions: a member named alone in a member function, through
	# this, a namespace's variable and a class's static member, against
	# gdb, at -O0 and -O2.
	SRCNAME=cli_cxx.cpp
	LX=$(grep -n 'probe: resize' tests/cli/cli_cxx.cpp | cut -d: -f1)
	for opt in O0 O2; do
		g++ -$opt -g -o "$OUT/cli_cxx-$opt" tests/cli/cli_cxx.cpp
		compare_point "$OUT/cli_cxx-$opt" "g++-$opt" "$LX" \
			"size:d this->size:d n:d demo::calls:d demo::Widget::made:d"
	done
	SRCNAME=cli_dwarf.c
	# The function by its C++ name, with a variable.
	timeout 60 "$KPROBE" trace --format json -o "$OUT/cxx.json" 'demo::Widget::resize(int) n' \
		-- "$OUT/cli_cxx-O2" 2 >/dev/null 2>"$OUT/err"
	got=$(jq -r 'select(.args) | .args.n' "$OUT/cxx.json" 2>/dev/null | tr '\n' ' ')
	[ "$got" = "0 1 " ] || { echo "FAIL C++ function with a variable: '$got' $(cat "$OUT/err")"; fail=1; }
	# ... its return probe (the parameter read at the entry), and a line
	# in it, shown by its demangled name (the return probe's with %return).
	timeout 60 "$KPROBE" trace --format json -o "$OUT/cxx.json" 'demo::Widget::resize(int)%return n' \
		"cli_cxx.cpp:$LX size" -- "$OUT/cli_cxx-O2" 2 >/dev/null 2>"$OUT/err"
	got=$(jq -r 'select(.args) | "\(.probe | sub("\\+0x[0-9a-f]+$"; "+OFF")) \(.args | to_entries | .[0].value)"' \
		"$OUT/cxx.json" 2>/dev/null | sort | tr '\n' ';')
	want="demo::Widget::resize(int)%return 0;demo::Widget::resize(int)%return 1;demo::Widget::resize(int)+OFF 0;demo::Widget::resize(int)+OFF 4;"
	[ "$got" = "$want" ] || { echo "FAIL C++ return probe and line by name: '$got' $(cat "$OUT/err")"; fail=1; }
	g++ -O2 -g -o "$OUT/cli_cxx" tests/cli/cli_cxx.cpp
	timeout 60 "$KPROBE" count --format json -o "$OUT/count.json" 'demo::Widget::resize(int)' \
		'demo::Widget::resize(double)' 'demo::twice*' -- "$OUT/cli_cxx" 4 >/dev/null 2>"$OUT/err"
	got=$(jq -r '[.probes[] | "\(.probe)=\(.hits)"] | sort | join(";")' "$OUT/count.json" 2>/dev/null)
	want="demo::Widget::resize(double)=8;demo::Widget::resize(int)=4;double demo::twice<double>(double)=4;int demo::twice<int>(int)=4"
	[ "$got" = "$want" ] || { echo "FAIL C++ names: '$got' $(cat "$OUT/err")"; fail=1; }
	# kprobe vars takes the same names: an overload by its signature,
	# both by a glob.
	"$KPROBE" vars 'demo::Widget::resize(double)' "$OUT/cli_cxx" >"$OUT/vars.txt" 2>&1
	"$KPROBE" vars 'demo::Widget::resize*' "$OUT/cli_cxx" >>"$OUT/vars.txt" 2>&1
	got=$(sed -n 's/^\(demo[^+]*\)+.*/\1/p; s/^\t.* \([a-z]*\) (parameter)$/\1/p' "$OUT/vars.txt" | tr '\n' ' ')
	want="demo::Widget::resize(double) this f demo::Widget::resize(double) this f demo::Widget::resize(int) this n "
	[ "$got" = "$want" ] || { echo "FAIL kprobe vars of C++ names: '$got' $(cat "$OUT/vars.txt")"; fail=1; }
	# this is a const pointer (gdb: "demo::Widget * const"), not a
	# pointer to const.
	grep -q '^	struct Widget \* const  *this (parameter)$' "$OUT/vars.txt" ||
		{ echo "FAIL kprobe vars: the type of this: $(cat "$OUT/vars.txt")"; fail=1; }
else
	echo "dwarf-vars: g++ not installed: C++ names not checked"
fi

# ---- SDT probes (USDT) ----

# Our own probe, guarded by a semaphore: the program sees it raised only
# while probed, and every operand form (register, memory, constant) reads.
prog=$OUT/cli_usdt
gcc -O2 -Itools/kprobe/common -o "$prog" tests/cli/cli_usdt.c || { echo "FAIL: cannot build $prog"; fail=1; }
out=$("$prog" 6)
[ "$out" = "enabled=0 of 6" ] || { echo "FAIL usdt: unprobed run says '$out'"; fail=1; }
out=$(timeout 60 "$KPROBE" trace --format json -o "$OUT/usdt.json" usdt:demo:req -- "$prog" 6 2>&1)
got=$(jq -r 'select(.args) | "\(.probe) \(.args.arg0) \(.args.arg1) \(.args.arg2)"' "$OUT/usdt.json" |
      tr '\n' ';')
want="usdt:demo:req 1000 0 7;usdt:demo:req 1001 -1 7;usdt:demo:req 1002 -2 7;usdt:demo:req 1003 -3 7;usdt:demo:req 1004 -4 7;usdt:demo:req 1005 -5 7;"
if [ "$out" != "enabled=6 of 6" ] || [ "$got" != "$want" ]; then
	echo "FAIL usdt:demo:req: program '$out', events '$got'"
	fail=1
fi
"$KPROBE" trace "usdt:demo:req arg3" -- "$prog" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "has 3 arguments" "$OUT/err"; then
	echo "FAIL usdt arg3 of 3: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
# ... and in a program, when it is compiled: the line, the caret (where
# bpftrace's lexer starts the location: at the map for @[arg3]), exit 2.
"$KPROBE" run -e "usdt:$prog:demo:req { @[arg3] = count(); }" -- "$prog" 1 >/dev/null 2>"$OUT/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "ERROR: arg3: usdt probe demo:req has 3 arguments (arg0..arg2)" "$OUT/err" ||
   ! grep -q '^ *~~*$' "$OUT/err"; then
	echo "FAIL usdt arg3 of 3 in a program: exit $rc, $(cat "$OUT/err")"
	fail=1
fi
"$KPROBE" trace "usdt:demo:nosuch" -- "$prog" 1 >/dev/null 2>"$OUT/err"
[ $? -eq 2 ] || { echo "FAIL usdt:demo:nosuch: $(cat "$OUT/err")"; fail=1; }

# A probe in a library the program loads with dlopen(): armed, its
# semaphore raised, when the library loads.
lib=$OUT/libusdt_lib.so
gcc -O2 -shared -fPIC -Itools/kprobe/common -o "$lib" tests/cli/cli_usdt_lib.c &&
	gcc -O2 -DMAIN -o "$OUT/cli_usdt_dl" tests/cli/cli_usdt_lib.c -ldl ||
	{ echo "FAIL: cannot build the dlopen SDT test"; fail=1; }
out=$(timeout 60 "$KPROBE" trace --format json -o "$OUT/usdt-dl.json" "usdt:$lib:libp:ev" \
	-- "$OUT/cli_usdt_dl" "$lib" 2>&1)
got=$(jq -r 'select(.args) | "\(.args.arg0) \(.args.arg1) \(.args.arg2)"' "$OUT/usdt-dl.json" | tr '\n' ';')
if [ "$out" != "enabled=4 of 4" ] || [ "$got" != "0 0 5;1 -1 5;2 -2 5;3 -3 5;" ]; then
	echo "FAIL usdt in a dlopen'ed library: program '$out', events '$got'"
	fail=1
fi

# kprobe list and kprobe vars show SDT probes and their operands.
"$KPROBE" list "$prog" | grep -qx "usdt:$prog:demo:req" ||
	{ echo "FAIL kprobe list $prog: no usdt:$prog:demo:req"; fail=1; }
# ... alone, by a glob over the usdt: PROBE form.
got=$("$KPROBE" list "$prog" 'usdt:*' 2>&1)
[ "$got" = "usdt:$prog:demo:req" ] || { echo "FAIL kprobe list $prog 'usdt:*': '$got'"; fail=1; }
"$KPROBE" vars usdt:demo:req "$prog" >"$OUT/vars.txt" 2>&1
if ! grep -q '(semaphore)' "$OUT/vars.txt" || ! grep -q '^	arg1	s32 ' "$OUT/vars.txt" ||
   ! grep -q '^	arg2	s32      -4@\$7' "$OUT/vars.txt"; then
	echo "FAIL kprobe vars usdt:demo:req: $(cat "$OUT/vars.txt")"
	fail=1
fi
# ... and variables with their types at a line.
"$KPROBE" vars "cli_dwarf.c:$L1" "$OUT/cli_dwarf-gcc-O0" >"$OUT/vars.txt" 2>&1
if ! grep -q '^	struct request \* *req (parameter)$' "$OUT/vars.txt" ||
   ! grep -q '^	double  *w (parameter)$' "$OUT/vars.txt" || ! grep -q '^	long int  *sum$' "$OUT/vars.txt"; then
	echo "FAIL kprobe vars cli_dwarf.c:$L1: $(cat "$OUT/vars.txt")"
	fail=1
fi

# ... the same names as perf probe -V lists as available there (perf
# lists each row of the line table for the line; the names are compared).
if command -v perf >/dev/null 2>&1 &&
   timeout 30 perf probe -x "$OUT/cli_dwarf-gcc-O0" -V "cli_dwarf.c:$L1" >/dev/null 2>&1; then
	for prog in "$OUT"/cli_dwarf-*-O[02]; do
		want=$(timeout 30 perf probe -x "$prog" -V "cli_dwarf.c:$L1" 2>/dev/null |
			sed -n 's/^\t\t.*\t\([a-z_]*\)$/\1/p' | sort -u | tr '\n' ' ')
		got=$("$KPROBE" vars "cli_dwarf.c:$L1" "$prog" 2>&1 | grep -v ': ' |
			sed -n 's/^\t.* \([a-z_]*\)\( (parameter)\)\{0,1\}$/\1/p' | sort -u | tr '\n' ' ')
		[ -n "$want" ] && [ "$got" = "$want" ] ||
			{ echo "FAIL kprobe vars $(basename "$prog"): '$got', perf probe -V '$want'"; fail=1; }
	done
	echo "dwarf-vars: kprobe vars lists what perf probe -V lists (4 builds)"
else
	echo "dwarf-vars: perf probe cannot run here: kprobe vars not compared with it"
fi

# libstdc++'s throw and catch: once per exception.
if command -v g++ >/dev/null 2>&1; then
	printf '%s\n' '#include <stdexcept>' '#include <cstdio>' \
		'int main() { int c = 0; for (int i = 0; i < 5; i++) { try { throw std::runtime_error("x"); }' \
		'catch (const std::exception &) { c++; } } std::printf("%d\n", c); }' >"$OUT/throw.cpp"
	g++ -O2 -o "$OUT/throw" "$OUT/throw.cpp"
	timeout 60 "$KPROBE" count --format json -o "$OUT/count.json" usdt:libstdcxx:throw \
		usdt:libstdcxx:catch -- "$OUT/throw" >/dev/null 2>"$OUT/err"
	got=$(jq -r '[.probes[] | "\(.probe)=\(.hits)"] | sort | join(" ")' "$OUT/count.json" 2>/dev/null)
	if [ "$got" != "usdt:libstdcxx:catch=5 usdt:libstdcxx:throw=5" ]; then
		echo "FAIL libstdc++ throw/catch: '$got' $(cat "$OUT/err")"
		fail=1
	fi
else
	echo "dwarf-vars: g++ not installed: libstdc++'s SDT probes not checked"
fi

# python3.11's function__entry: name, file and line, as bpftrace reads them
# (when it can run here), else the three generator starts of the script.
PY=/usr/bin/python3.11
if [ -x $PY ] && readelf -n $PY 2>/dev/null | grep -q function__entry; then
	timeout 60 "$KPROBE" trace --format json -o "$OUT/py.json" \
		'usdt:python:function__entry file=arg0:string fn=arg1:string line=arg2' \
		-- $PY tests/dwarf/usdt.py >/dev/null 2>"$OUT/err"
	jq -r 'select(.args) | "\(.args.file) \(.args.fn) \(.args.line)"' "$OUT/py.json" \
		>"$OUT/py-kprobe.txt" 2>/dev/null
	mine=$(grep -c "/tests/dwarf/usdt.py gen 5\$" "$OUT/py-kprobe.txt")
	[ "$mine" = 3 ] || { echo "FAIL python function__entry: $mine of 3 gen starts; $(cat "$OUT/err")"; fail=1; }
	if command -v bpftrace >/dev/null 2>&1 &&
	   timeout 60 bpftrace -e "usdt:$PY:python:function__entry { printf(\"%s %s %d\\n\", str(arg0), str(arg1), arg2); }" \
		-c "$PY tests/dwarf/usdt.py" >"$OUT/py-bpftrace.raw" 2>/dev/null; then
		grep -v '^Attaching\|^done$\|^$' "$OUT/py-bpftrace.raw" >"$OUT/py-bpftrace.txt"
		if ! cmp -s "$OUT/py-bpftrace.txt" "$OUT/py-kprobe.txt"; then
			echo "FAIL python function__entry differs from bpftrace's:"
			diff "$OUT/py-bpftrace.txt" "$OUT/py-kprobe.txt" | head -10
			fail=1
		else
			echo "dwarf-vars: python3.11 function__entry: $(wc -l <"$OUT/py-kprobe.txt") events, as bpftrace"
		fi
	else
		echo "dwarf-vars: bpftrace cannot run here: python's events checked without it"
	fi
	# The same probe in a program: kprobe run's output (-o) byte for byte
	# as bpftrace's for the same program, or the three gen starts.
	prog="usdt:$PY:python:function__entry { printf(\"%s %s %d\\n\", str(arg0), str(arg1), arg2); @n = count(); }"
	timeout 60 "$KPROBE" run -o "$OUT/py-run.txt" -e "$prog" -c "$PY tests/dwarf/usdt.py" \
		>/dev/null 2>"$OUT/err"
	mine=$(grep -c "/tests/dwarf/usdt.py gen 5\$" "$OUT/py-run.txt")
	[ "$mine" = 3 ] || { echo "FAIL kprobe run python function__entry: $mine of 3 gen starts; $(cat "$OUT/err")"; fail=1; }
	if command -v bpftrace >/dev/null 2>&1 &&
	   timeout 60 bpftrace -o "$OUT/py-run-bpftrace.txt" -e "$prog" -c "$PY tests/dwarf/usdt.py" \
		>/dev/null 2>&1 && [ -s "$OUT/py-run-bpftrace.txt" ]; then
		if ! cmp -s "$OUT/py-run-bpftrace.txt" "$OUT/py-run.txt"; then
			echo "FAIL kprobe run python function__entry differs from bpftrace's:"
			diff "$OUT/py-run-bpftrace.txt" "$OUT/py-run.txt" | head -10
			fail=1
		else
			echo "dwarf-vars: python3.11 function__entry in a program: as bpftrace prints it"
		fi
	else
		echo "dwarf-vars: bpftrace cannot run here: python's program output not compared"
	fi
	# gc__start (by generation) and line, counted in a program, as
	# bpftrace counts them in the same run of the script.
	prog="usdt:$PY:python:gc__start { @gc[arg0] = count(); } usdt:$PY:python:line { @lines = count(); }"
	timeout 60 "$KPROBE" run -o "$OUT/py-gc.txt" -e "$prog" -c "$PY tests/dwarf/usdt.py" \
		>/dev/null 2>"$OUT/err"
	if ! grep -q '^@gc\[2\]: [1-9]' "$OUT/py-gc.txt" || ! grep -q '^@lines: [1-9]' "$OUT/py-gc.txt"; then
		echo "FAIL python gc__start and line: $(cat "$OUT/py-gc.txt" "$OUT/err")"
		fail=1
	elif command -v bpftrace >/dev/null 2>&1 &&
	     timeout 60 bpftrace -o "$OUT/py-gc-bpftrace.txt" -e "$prog" -c "$PY tests/dwarf/usdt.py" \
		>/dev/null 2>&1 && [ -s "$OUT/py-gc-bpftrace.txt" ]; then
		if ! cmp -s "$OUT/py-gc-bpftrace.txt" "$OUT/py-gc.txt"; then
			echo "FAIL python gc__start and line differ from bpftrace's:"
			diff "$OUT/py-gc-bpftrace.txt" "$OUT/py-gc.txt" | head -10
			fail=1
		else
			echo "dwarf-vars: python3.11 gc__start and line counted as bpftrace counts them"
		fi
	else
		echo "dwarf-vars: bpftrace cannot run here: python's gc__start and line not compared"
	fi
else
	echo "dwarf-vars: $PY with SDT notes not installed: its probes not checked"
fi

if [ $fail -ne 0 ]; then
	echo "dwarf-vars: FAILED"
	exit 1
fi
echo "dwarf-vars: OK ($checked values compared with gdb)"
