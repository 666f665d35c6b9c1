#!/usr/bin/env python3
"""The kprobe tool on a fib workload (`make bench`): what count and record
cost per hit or event in a whole run, against the unprobed run and uftrace.

  cli_count      ns per hit of `kprobe count fib`
  cli_count_ret  ns per call of `kprobe count fib 'fib%return'`
  record_fib     ns per event of `kprobe record fib 'fib%return'`
  record_lost    events that record lost (must be 0)
  uftrace_fib    ns per event of `uftrace record -P fib` (null: not installed)
  startup_libc   seconds of `kprobe count 'libc.so.6:*' -- true`: probing
                 every function of libc, arming, optimizing and leaving, for
                 a command that does nothing (best of RUNS)
  startup_libc_ret  the same with 'libc.so.6:*%return'

The targets, printed at the end: cli_count <= 1.5 x the engine's `o` row,
cli_count_ret <= 1.5 x its `ro` row (both from kprobes-bench --only=o,ro,
run here), record_fib <= 1/4 of uftrace_fib, record_lost 0.

Each (and its _cpu twin, from user + system time of the tool and the
command, steadier on a loaded machine) is the best of RUNS whole runs of fib(20) x N minus the best of the
same command on fib(20) x 1 (start-up, arming, the end: fixed costs), less
the same difference unprobed, divided by the calls (21891 per fib(20)) or
events (two per call).
Usage: cli_bench.py BUILD_DIR [--json]"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

RUNS = 3
N = int(os.environ.get("KPROBE_BENCH_FIB_N", "500"))
CALLS = (N - 1) * 21891


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def best(cmd, cwd=None):
    """The best wall time of RUNS runs, and the best CPU time (user and
    system, the tool and the command together)."""
    t = c = None
    for _ in range(RUNS):
        start, cpu = time.monotonic(), cpu_of_children()
        subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        d, dc = time.monotonic() - start, cpu_of_children() - cpu
        t = d if t is None else min(t, d)
        c = dc if c is None else min(c, dc)
    return t, c


def marginal(cmd_of):
    """Seconds (wall, CPU) the N - 1 extra fib(20) cost under cmd_of(n)."""
    (wn, cn), (w1, c1) = best(cmd_of(N)), best(cmd_of(1))
    return wn - w1, cn - c1


def engine_rows(build):
    """The engine's o and ro rows (ns per hit) from the same build, or None."""
    exe = os.path.join(build, "kprobes-bench")
    if not os.access(exe, os.X_OK):
        return None
    try:
        out = subprocess.run([exe, "--json", "--only=o,ro"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout
        rows = json.loads(out)
        return {k: float(rows[k]) for k in ("o", "ro")}
    except (subprocess.CalledProcessError, ValueError, KeyError, TypeError):
        return None


def target_lines(rows, engine):
    """One line per target: the ratio from wall and from CPU time."""
    def ratio(a, b):
        return "null" if a is None or not b else "%.2f" % (a / b)

    if engine:
        for row, base in (("cli_count", "o"), ("cli_count_ret", "ro")):
            print("%s/%s = %s (cpu %s)   (target <= 1.5)" %
                  (row, base, ratio(rows[row], engine[base]),
                   ratio(rows[row + "_cpu"], engine[base])))
    if rows["uftrace_fib"]:
        print("record_fib/uftrace_fib = %s (cpu %s)   (target <= 0.25)" %
              (ratio(rows["record_fib"], rows["uftrace_fib"]),
               ratio(rows["record_fib_cpu"], rows["uftrace_fib_cpu"])))
    print("record_lost = %d   (target 0)" % rows["record_lost"])


def main():
    build = sys.argv[1]
    as_json = "--json" in sys.argv
    kprobe = os.path.join(build, "kprobe")
    def prog(n):
        return [os.path.join(build, "tests/cli/cli_record"), "fib", str(n)]

    tmp = tempfile.mkdtemp(prefix="kprobe-bench-")
    try:
        base = marginal(prog)
        count = marginal(lambda n: [kprobe, "count", "fib", "--"] + prog(n))
        count_ret = marginal(lambda n: [kprobe, "count", "fib", "fib%return", "--"] + prog(n))
        data = os.path.join(tmp, "kprobe.data")
        record = marginal(lambda n: [kprobe, "record", "-o", data, "fib", "fib%return", "--"]
                          + prog(n))
        lost = 0
        with open(os.path.join(data, "info")) as f:
            for line in f:
                key, val = line.split()[:2]
                if key.startswith("lost_"):
                    lost += int(val)
        shutil.rmtree(data)
        uftrace = None
        if shutil.which("uftrace"):
            udata = os.path.join(tmp, "uftrace.data")
            try:
                uftrace = marginal(lambda n: ["uftrace", "record", "--no-libcall", "-d", udata,
                                              "-P", "fib"] + prog(n))
            except subprocess.CalledProcessError:
                uftrace = None
        startup = best([kprobe, "count", "-o", os.devnull, "libc.so.6:*", "--", "true"])
        startup_ret = best([kprobe, "count", "-o", os.devnull, "libc.so.6:*%return", "--",
                            "true"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    def per(t, n, i):
        return round((t[i] - base[i]) * 1e9 / n, 2)

    rows = {
        "fib_calls": CALLS,
        "unprobed_s": round(base[0], 4),
        "cli_count": per(count, CALLS, 0),
        "cli_count_ret": per(count_ret, CALLS, 0),
        "record_fib": per(record, 2 * CALLS, 0),
        "record_lost": lost,
        "uftrace_fib": None if uftrace is None else per(uftrace, 2 * CALLS, 0),
        # the same from CPU time, steadier on a loaded machine
        "cli_count_cpu": per(count, CALLS, 1),
        "cli_count_ret_cpu": per(count_ret, CALLS, 1),
        "record_fib_cpu": per(record, 2 * CALLS, 1),
        "uftrace_fib_cpu": None if uftrace is None else per(uftrace, 2 * CALLS, 1),
        "startup_libc": round(startup[0], 3),
        "startup_libc_ret": round(startup_ret[0], 3),
    }
    if as_json:
        print(json.dumps(rows))
        return
    for k, v in rows.items():
        print("%-14s %s" % (k, "null" if v is None else v))
    target_lines(rows, engine_rows(build))


if __name__ == "__main__":
    main()
