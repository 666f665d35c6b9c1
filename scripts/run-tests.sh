#!/bin/sh
# Runs every test binary (plain and sanitizer builds) and prints a summary
# line "N passed, N failed". Each Criterion test runs in its own process.
# A binary fails when a test fails or crashes, when it exits non-zero, and
# when it runs no test at all (Criterion's "Tested: 0", or no synthesis).
B=${1:-build}
pass=0; fail=0; failed_bins=""
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "$B"/tests/test_* "$B"/tests-asan/test_*; do
    [ -x "$t" ] || continue
    # Output goes to a file: a stray child holding a pipe open must not
    # hang the run.
    t0=$(date +%s)
    log=$(mktemp); timeout -k 10 300 "$t" --jobs 2 --timeout 60 >"$log" 2>&1 </dev/null; rc=$?
    out=$(cat "$log"); rm -f "$log"
    line=$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -n 1)
    np=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    nf=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*Crashing: \([0-9]*\).*/\1 \2/p')
    nt=$(printf '%s' "$line" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
    np=${np:-0}; set -- $nf; nf=$(( ${1:-0} + ${2:-0} ))
    if [ $rc -ne 0 ] && [ $nf -eq 0 ]; then nf=1; fi
    # A binary that runs no test (every test skipped, none selected, or no
    # synthesis at all) fails: it would otherwise vanish from the count.
    if [ $nf -eq 0 ] && [ "${nt:-0}" -eq 0 ]; then
        nf=1
        line="${line:-exit $rc, no synthesis} -- ran no test"
    fi
    pass=$((pass + np)); fail=$((fail + nf))
    printf '%-40s %s [%ss]\n' "$t" "${line:-exit $rc}" $(( $(date +%s) - t0 ))
    if [ $nf -ne 0 ]; then
        failed_bins="$failed_bins $t"
        printf '%s\n' "$out" | grep -v '^\[----\] *$' | tail -n 40
    fi
done
echo "Synthesis: Tested: $((pass + fail)) | Passing: $pass | Failing: $fail | Crashing: 0"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failing:$failed_bins"; exit 1; }
