"""The Spark part of a poll: spark_jobs.volume_violations.decide, embedded and over Spark Connect.

Each measurement runs in a fresh Python process (`--child URL`), as a sidecar does after it starts:

- cold start: importing spark_jobs (pyspark), get_session() (embedded: launches the JVM and a
  local[1] SparkContext; Connect: opens a session on the already running server) and the first
  decide() on 3 volumes;
- warm: decide() on 3, 30 and 300 volumes, taking turns, after 3 unmeasured rounds; wall time per
  decision, and the CPU time the process and its children (the embedded driver's JVM) spent on them,
  which does not depend on how busy the machine is.

The Spark Connect server is a local one (harness.spark.connect_server, local[1], 512 MiB driver) started
once for all Connect runs; its own start-up time is reported too.

    .venv/bin/python benchmarks/spark_decision.py [--runs 3] [--decisions 20]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import psutil
from common import (MiB, LoadWatch, Result, Stats, cell, connect_server, print_result, provenance, table, this_command,
                    uptime)

TITLE = "Spark decision"  # its subsection of "## Disk protection" in docs/benchmarks.md

SIZES = (3, 30, 300)
WARM_UP = 3  # unmeasured rounds of decisions before the measured ones
PARAMS = {"min_available_bytes": 24 * MiB, "min_available_ratio": None}


def volumes(count: int) -> list[dict]:
    """`count` volumes, two log dirs per broker, the last one violating the limit."""
    return [{"broker_id": index // 2 + 1, "log_dir": f"/var/lib/kafka/data-{index % 2}", "total_bytes": 500 << 30,
             "available_bytes": (12 * MiB if index == count - 1 else (100 + index) << 30), "usable": True,
             "at_seconds": 0.0} for index in range(count)]


def child(url: str, decisions: int) -> None:
    """One fresh process: cold start, then warm decisions; prints JSON."""
    started = time.perf_counter()
    from spark_jobs import session, volume_violations

    imported = time.perf_counter()
    spark = session.get_session(url or None, app_name="quota-sidecar-benchmark")
    connected = time.perf_counter()
    factor, _ = volume_violations.decide(spark, volumes(3), PARAMS)
    first = time.perf_counter()
    assert factor == 0.0, factor
    warm = {size: [] for size in SIZES}
    cpu_before = None
    for index in range(WARM_UP + decisions):  # the sizes take turns: none gets a warmer JVM than another
        if index == WARM_UP:
            cpu_before = cpu_seconds()
        for size in SIZES:
            before = time.perf_counter()
            factor, judged = volume_violations.decide(spark, volumes(size), PARAMS)
            if index >= WARM_UP:
                warm[size].append(time.perf_counter() - before)
            assert factor == 0.0 and len(judged) == size
    cpu = (cpu_seconds() - cpu_before) / (decisions * len(SIZES))
    session.stop_sessions()
    print(json.dumps({"import": imported - started, "session": connected - imported, "first": first - connected,
                      "warm": warm, "cpu": cpu}))


def cpu_seconds() -> float:
    """User and system CPU of this process and every process it started (the embedded Spark JVM)."""
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def fresh_process(url: str, decisions: int) -> dict:
    command = [sys.executable, __file__, "--child", url, "--decisions", str(decisions)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{command} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(label: str, url: str, runs: int, decisions: int) -> list[object]:
    results = []
    for run in range(runs):
        results.append(fresh_process(url, decisions))
        figures = results[-1]
        print(f"  {label} run {run + 1}: cold {figures['import'] + figures['session'] + figures['first']:.1f} s, "
              f"warm 3 volumes {Stats.of(figures['warm']['3']).text('s', digits=3)}, load {uptime()}", flush=True)
    cold = Stats.of(r["import"] + r["session"] + r["first"] for r in results)
    return [label, cell(cold, "s", digits=1), cell(Stats.of(r["session"] for r in results), "s", digits=1),
            cell(Stats.of(r["first"] for r in results), "s", digits=1),
            *[cell(Stats.of(t for r in results for t in r["warm"][str(size)]), "ms", 1e-3, 0) for size in SIZES],
            cell(Stats.of(r["cpu"] for r in results), "ms", 1e-3, 0)]


def run(runs: int = 3, decisions: int = 20) -> Result:
    rows = []
    with LoadWatch() as load:
        rows.append(measure("embedded (`local[1]`, 512 MiB driver)", "", runs, decisions))
        started = time.perf_counter()
        with connect_server() as server:
            server_start = time.perf_counter() - started
            print(f"  Spark Connect server started in {server_start:.1f} s", flush=True)
            rows.append(measure(f"Spark Connect (local server, started in {server_start:.0f} s, n=1)", server.url,
                                runs, decisions))
    markdown = "\n\n".join([
        "`spark_jobs.volume_violations.decide` (one Spark job: the factor and the judged rows), each run in "
        f"a fresh Python process, {runs} processes per mode. **Cold start**: import of `spark_jobs` (pyspark) + "
        "`get_session()` + the first `decide()` on 3 volumes. **Warm**: per decision, "
        f"{decisions} per size and process (the sizes taking turns) after {WARM_UP} unmeasured rounds, pooled "
        "over the processes, median (min–max). **CPU per warm decision**: user + system time of the process and "
        "its children (the embedded driver's JVM; a Connect server's work is not in it) over the warm "
        "decisions, divided by their number, median over the processes. The Connect server is local (`harness.spark.connect_server`, "
        "`local[1]`, 512 MiB driver), started once and shared by the Connect runs: the first Connect process "
        "after its start pays the server's own warm-up (its first queries), the later ones do not.",
        table(["Spark", "cold start", "of which get_session()", "of which first decide()",
               *[f"warm, {size} volumes" for size in SIZES], "CPU per warm decision"], rows),
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per mode")
    parser.add_argument("--decisions", type=int, default=20, help="measured warm decisions per size and process")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)  # internal: one measuring process
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.decisions)
    else:
        print_result(run(args.runs, args.decisions))


if __name__ == "__main__":
    main()
