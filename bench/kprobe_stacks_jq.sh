#!/bin/sh
# Counting by stack against a plain count: every jv_* function of libjq
# probed while jq filters a generated 2.4 MB JSON document, run under
#   kprobe count 'libjq.so.1:jv_*'
#   kprobe count --stacks[=DEPTH] --format folded 'libjq.so.1:jv_*'
# Prints the best of REPS runs of each (wall seconds), the hits, the
# distinct stacks, and the ratio.  Skips, saying so, without jq.
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

# best wall time of REPS runs of "$@"
best() {
	b=
	for _ in $(seq "$REPS"); do
		s=$(date +%s.%N)
		"$@" >/dev/null
		e=$(date +%s.%N)
		b=$(echo "$s $e ${b:-999999}" | awk '{ t = $2 - $1; print (t < $3 ? t : $3) }')
	done
	echo "$b"
}

jq_s=$(best jq "$filter" "$tmp/doc.json")
count_s=$(best "$B/kprobe" count -o "$tmp/count" 'libjq.so.1:jv_*' -- jq "$filter" "$tmp/doc.json")
stacks_s=$(best "$B/kprobe" count --stacks="$DEPTH" --format folded -o "$tmp/folded" \
	'libjq.so.1:jv_*' -- jq "$filter" "$tmp/doc.json")
hits=$(awk 'NR > 1 { s += $4 } END { print s }' "$tmp/count")
stacked=$(awk '{ s += $NF } END { print s }' "$tmp/folded")
lines=$(wc -l < "$tmp/folded")
echo "jq alone:             ${jq_s} s"
echo "count:                ${count_s} s  (${hits} hits)"
echo "count --stacks=$DEPTH:    ${stacks_s} s  (${stacked} hits, ${lines} folded stacks)"
echo "$stacks_s $count_s" | awk '{ printf "ratio stacks/count:   %.2f\n", $1 / $2 }'
