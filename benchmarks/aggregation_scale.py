"""One micro-batch of the aggregator at scale: 10^3 to 10^6 volume observations decided in one job.

The observations are what agents publish (quota_sidecar.pipeline.messages.observation): clusters of 50
brokers × 10 log dirs, one agent's observation per cluster, each volume with one measurement (its newest; an
agent's observation also carries the fill window's older ones, which multiply the rows alike). They are
written as JSON lines to a file and read as Spark's Kafka source hands a micro-batch to the query (a `value`
column, and the record's key and place), then spark_jobs.aggregation.decide (the same code the streaming query
runs on each micro-batch), executed in full into Spark's `noop` sink. Wall time per micro-batch after one
unmeasured round, in the aggregator's embedded session (`local[1]`) and with `spark.url=local[2]`.

    .venv/bin/python benchmarks/aggregation_scale.py [--sizes 1000,10000,100000,1000000] [--runs 3]
        [--masters embedded,local[2]]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from common import LoadWatch, per_master, Result, Stats, cell, print_result, provenance, table, this_command

from quota_sidecar.pipeline.messages import observation

TITLE = "Aggregator micro-batch at scale"
BROKERS, DIRS = 50, 10
LIMITS = {"min_available_bytes": 24 << 20}
AT = datetime(2026, 11, 27, tzinfo=timezone.utc)


def write_observations(path: Path, volumes: int) -> int:
    """JSON lines of volumes // (BROKERS × DIRS) clusters' observations; how many observations."""
    clusters = max(1, volumes // (BROKERS * DIRS))
    with path.open("w") as file:
        for cluster in range(clusters):
            rows = [{"broker_id": broker, "log_dir": f"/var/lib/kafka/data-{d}", "total_bytes": 1 << 40,
                     "available_bytes": (1 << 39) - (cluster * 7 + broker * 3 + d) * (1 << 20), "usable": True,
                     "at_seconds": 0.0}
                    for broker in range(1, BROKERS + 1) for d in range(DIRS)][:volumes]
            file.write(json.dumps(observation(f"cluster-{cluster:05d}", 1, AT, rows, LIMITS)) + "\n")
    return clusters


def child(master: str, sizes: list[int], runs: int) -> None:
    """In a fresh process per master: each size's micro-batches timed; JSON on stdout."""
    from spark_jobs import aggregation, session

    spark = session.aggregator_session(None if master == "embedded" else master, "quota-sidecar-benchmark")
    work = Path(tempfile.mkdtemp(prefix="aggregation-scale-"))
    figures = {}
    for size in sizes:
        path = work / f"observations-{size}.json"
        observations = write_observations(path, size)
        batch = spark.read.text(str(path)).selectExpr(  # the columns of Spark's Kafka source that decide reads
            "CAST(NULL AS BINARY) AS key", "value", "'observations' AS topic", "0 AS partition",
            "monotonically_increasing_id() AS offset").cache()
        batch.count()  # in memory, as a micro-batch's Kafka rows are once fetched
        seconds = []
        for index in range(runs + 1):
            started = time.perf_counter()
            aggregation.decide(batch, "benchmark", lambda decided: decided.write.format("noop").mode("overwrite")
                               .save())
            if index:
                seconds.append(time.perf_counter() - started)
        batch.unpersist()
        path.unlink()
        figures[size] = {"observations": observations, "seconds": seconds}
    session.stop_sessions()
    print(json.dumps(figures))


def run(sizes: list[int], runs: int, masters: list[str]) -> Result:
    with LoadWatch() as load:
        results = per_master(__file__, masters, "--sizes", ",".join(map(str, sizes)), "--runs", str(runs))
    rows = []
    for size in sizes:
        row = [f"{size:,}", f"{results[masters[0]][size]['observations']:,}"]
        row += [cell(Stats.of(results[master][size]["seconds"]), "s") for master in masters]
        rows.append(row)
    lines = [table(["volume observations", "observations (clusters)", *(f"decided, {m}" for m in masters)], rows),
             "", f"{BROKERS} brokers × {DIRS} dirs a cluster, one measurement a volume; {runs} micro-batches each "
             "after one unmeasured.", "", provenance(this_command(), load)]
    return Result(TITLE, "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--masters", default="embedded,local[2]")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.child:
        child(args.child, sizes, args.runs)
    else:
        print_result(run(sizes, args.runs, args.masters.split(",")))


if __name__ == "__main__":
    main()
