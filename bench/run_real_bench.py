#!/usr/bin/env python3
"""`kprobe run` against `kprobe count` on real programs (`make bench`):
every function of the program's library probed, counted by probe, on the
sqlite3 workload of the real-program tests (tests/real/workload.sql, a
fifth of its orders as in their quick mode) and on a jq filter over a
generated 2.4 MB JSON document (bench/kprobe_stacks_jq.sh's):

  kprobe count 'LIB:*' -- COMMAND
  kprobe run -e 'uprobe:LIB:* { @[probe] = count(); }' -- COMMAND

Rows per workload: the median wall seconds of RUNS runs of the command
alone, of count and of run, the hits, and run/count (target <= 1.5).
The runs alternate, so a change of the machine's load falls on both.
A workload whose program is not installed is skipped, saying so.
Usage: run_real_bench.py BUILD_DIR [--json]"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("KPROBE_BENCH_REAL_RUNS", "5"))
HERE = os.path.dirname(os.path.abspath(__file__))


def wall(cmd, cwd, stdin=None, before=None):
    """Seconds one run of cmd takes (before() runs first, untimed)."""
    if before:
        before()
    with open(stdin or os.devnull, "rb") as f:
        start = time.monotonic()
        subprocess.run(cmd, cwd=cwd, stdin=f, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        return time.monotonic() - start


def hits_of_count(path):
    n = 0
    with open(path) as f:
        for line in f:
            col = line.split()
            if len(col) == 5 and col[1].startswith("0x"):
                n += int(col[3])
    return n


def hits_of_run(path):
    n = 0
    with open(path) as f:
        for line in f:
            if line.startswith("@["):
                n += int(line.rsplit(":", 1)[1])
    return n


def measure(kprobe, tmp, name, lib, command, stdin=None, before=None):
    count_out = os.path.join(tmp, name + ".count")
    run_out = os.path.join(tmp, name + ".run")
    program = "uprobe:%s:* { @[probe] = count(); }" % lib
    plain, count, run = [], [], []
    for _ in range(RUNS):
        plain.append(wall(command, tmp, stdin, before))
        count.append(wall([kprobe, "count", "-o", count_out, lib + ":*", "--"] + command,
                          tmp, stdin, before))
        run.append(wall([kprobe, "run", "-o", run_out, "-e", program, "--"] + command,
                        tmp, stdin, before))
    count_hits, run_hits = hits_of_count(count_out), hits_of_run(run_out)
    med = statistics.median
    return {
        name + "_plain_s": round(med(plain), 3),
        name + "_count_s": round(med(count), 3),
        name + "_run_s": round(med(run), 3),
        name + "_hits": run_hits,
        # the same hits, or the comparison means nothing
        name + "_hits_match": count_hits == run_hits,
        name + "_run_over_count": round(med(run) / med(count), 2),
    }


def sqlite3_rows(kprobe, tmp):
    if not shutil.which("sqlite3"):
        return {"sqlite3": "skipped: sqlite3 is not installed"}
    sql = os.path.join(tmp, "workload.sql")
    with open(os.path.join(HERE, "..", "tests", "real", "workload.sql")) as f:
        text = f.read().replace("WHERE i < 20000", "WHERE i < 4000")
    with open(sql, "w") as f:
        f.write(text)
    db = os.path.join(tmp, "test.db")

    def fresh_db():
        if os.path.exists(db):
            os.unlink(db)
    return measure(kprobe, tmp, "sqlite3", "libsqlite3.so.0",
                   ["sqlite3", "-batch", "-bail", db], stdin=sql, before=fresh_db)


def jq_rows(kprobe, tmp):
    if not shutil.which("jq"):
        return {"jq": "skipped: jq is not installed"}
    doc = os.path.join(tmp, "doc.json")
    random.seed(1)
    data = [{"id": i, "name": "n%d" % i, "tags": ["a", "b", "c"][:i % 4], "v": random.random(),
             "nested": {"x": i, "y": [i, i + 1]}} for i in range(20000)]
    with open(doc, "w") as f:
        json.dump(data, f)
    flt = "[.[] | select(.v > 0.5) | {id, s: (.tags|length), t: (.nested.y|add)}] | length"
    return measure(kprobe, tmp, "jq", "libjq.so.1", ["jq", flt, doc])


def main():
    build = sys.argv[1]
    as_json = "--json" in sys.argv
    kprobe = os.path.abspath(os.path.join(build, "kprobe"))
    tmp = tempfile.mkdtemp(prefix="kprobe-bench-real-")
    try:
        rows = {}
        rows.update(sqlite3_rows(kprobe, tmp))
        rows.update(jq_rows(kprobe, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if as_json:
        print(json.dumps(rows))
        return
    for k, v in rows.items():
        print("%-24s %s" % (k, v))
    for name in ("sqlite3", "jq"):
        if name + "_run_over_count" in rows:
            print("%s: run/count = %.2f   (target <= 1.5)" %
                  (name, rows[name + "_run_over_count"]))


if __name__ == "__main__":
    main()
