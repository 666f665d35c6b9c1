#!/bin/sh
# Counting by stack against a plain count: every jv_* function of libjq
# probed while jq filters a generated 2.4 MB JSON document, run under
#   kprobe count 'libjq.so.1:jv_*'
#   kprobe count --stacks[=DEPTH] --format folded 'libjq.so.1:jv_*'
# Prints the best of REPS runs of each (wall seconds, and CPU seconds of
# the tool and jq together), the hits, the distinct stacks, and the
# ratios: count_stacks_ratio (wall time, the row `make bench` shows with
# its target) and its CPU-time twin.  Skips, saying so, without jq or GNU
# time.
#
#   bench/kprobe_stacks_jq.sh [BUILD_DIR [REPS [DEPTH]]]
set -eu
B=${1:-build}
REPS=${2:-5}
DEPTH=${3:-32}
if ! command -v jq >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
	echo "kprobe_stacks_jq: skipped (needs jq and python3)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/doc.json" <<'PY'
import json, random, sys
random.seed(1)
doc = [{"id": i, "name": "n%d" % i, "tags": ["a", "b", "c"][:i % 4], "v": random.random(),
        "nested": {"x": i, "y": [i, i + 1]}} for i in range(20000)]
json.dump(doc, open(sys.argv[1], "w"))
PY
filter='[.[] | select(.v > 0.5) | {id, s: (.tags|length), t: (.nested.y|add)}] | length'

# best wall time and best CPU time (user + system, the tool and the
# command: on a loaded machine the steadier figure) of REPS runs of "$@",
# as "WALL CPU"
best() {
	bw=999999
	bc=999999
	for _ in $(seq "$REPS"); do
		/usr/bin/env time -o "$tmp/time" -f "%e %U %S" "$@" >/dev/null 2>&1
		t=$(tail -1 "$tmp/time")
		bw=$(echo "$t $bw" | awk '{ print ($1 < $4 ? $1 : $4) }')
		bc=$(echo "$t $bc" | awk '{ c = $2 + $3; print (c < $4 ? c : $4) }')
	done
	echo "$bw $bc"
}

if ! /usr/bin/env time -f "%e" true >/dev/null 2>&1; then
	echo "kprobe_stacks_jq: skipped (needs GNU time)"
	exit 0
fi
jq_t=$(best jq "$filter" "$tmp/doc.json")
count_t=$(best "$B/kprobe" count -o "$tmp/count" 'libjq.so.1:jv_*' -- jq "$filter" "$tmp/doc.json")
stacks_t=$(best "$B/kprobe" count --stacks="$DEPTH" --format folded -o "$tmp/folded" \
	'libjq.so.1:jv_*' -- jq "$filter" "$tmp/doc.json")
hits=$(awk 'NR > 1 { s += $4 } END { print s }' "$tmp/count")
stacked=$(awk '{ s += $NF } END { print s }' "$tmp/folded")
lines=$(wc -l < "$tmp/folded")
echo "                      wall s   cpu s   (best of $REPS)"
echo "jq alone:             $jq_t"
echo "count:                $count_t  (${hits} hits)"
echo "count --stacks=$DEPTH:    $stacks_t  (${stacked} hits, ${lines} folded stacks)"
echo "$stacks_t $count_t" | awk '{ printf "count_stacks_ratio       %.2f\ncount_stacks_ratio_cpu   %.2f\n", $1 / $3, $2 / $4;
	printf "count_stacks_ratio = %.2f   (target <= 3)\n", $1 / $3 }'
