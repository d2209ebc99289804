"""Observation published → decision back at the agent, through a warm aggregator, beside today's decision in
the agent's own embedded Spark, on the same volumes.

One local broker holds the pipeline's topics; `quota-sidecar aggregate` (embedded Spark) decides. The agent's
end is quota_sidecar.pipeline.transport.Pipeline, as `run` uses it: each question publishes one observation (3 brokers ×
2 log dirs, 10 measurements each in the fill window: 60 rows) and waits for the decision naming it. After
WARM_UP unmeasured questions, `--questions` measured ones, one every `--every` seconds (an agent asks once
per pass). Before the questions, the aggregator at rest for `--idle` seconds: the CPU it and the broker spend
while nobody asks (the streaming query looks for new observations all the same). Then the same rows through
spark_jobs.volume_violations.decide on an embedded session in this process: what every sidecar does today.
With `--standalone N`, the aggregator's micro-batches run on a Spark standalone cluster of N Workers (Spark's own
Master and Workers, tests/harness/spark/standalone.py) instead of its embedded Spark.

    .venv/bin/python benchmarks/aggregation_latency.py [--questions 60] [--every 0.25] [--idle 30] [--standalone 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import MiB, LoadWatch, Result, cpu_seconds, print_result, provenance, table, this_command

from harness.cluster.local_cluster import LocalKafkaCluster
from harness.agents.sidecar_process import SidecarProcess
from harness.spark.standalone import StandaloneSpark
from quota_sidecar.common.errors import DecisionFailed
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.pipeline.transport import Pipeline

TITLE = "Aggregator latency"
WARM_UP = 5
LIMITS = {"min_available_bytes": 24 * MiB}


def rows() -> list[dict]:
    """3 brokers × 2 dirs, each with 10 measurements one second apart, filling at 1 MiB/s."""
    return [{"broker_id": broker, "log_dir": f"/var/lib/kafka/data-{d}", "total_bytes": 500 << 30,
             "available_bytes": ((100 + broker) << 30) + seconds * MiB, "usable": True, "at_seconds": float(seconds)}
            for broker in (1, 2, 3) for d in (0, 1) for seconds in range(-9, 1)]


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def through_the_aggregator(questions: int, every: float, idle: float,
                           workers: int = 0) -> tuple[list[float], dict[str, float]]:
    """The latencies of the measured questions, and the share of a core the aggregator (its driver) and the broker
    took at rest after the warm-up; `workers`: on a standalone cluster of that many Workers, else embedded."""
    work = Path(tempfile.mkdtemp(prefix="aggregation-latency-"))
    cluster = LocalKafkaCluster(brokers=1).start()
    spark = StandaloneSpark(work / "spark", workers=workers).start() if workers else None
    aggregator = SidecarProcess("aggregator", work, {
        PREFIX + "pipeline.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "aggregator.checkpoint.location": work / "checkpoint",
        **({PREFIX + "spark.url": spark.url} if spark else {})}, command="aggregate").start()
    pipeline = Pipeline({"bootstrap_servers": cluster.bootstrap_servers}, lambda: "benchmark", 1, timeout=30.0)
    try:
        aggregator.wait_for_line("deciding for the agents of", 240)
        measured = []
        for index in range(WARM_UP + questions):
            asked = time.perf_counter()
            try:
                pipeline.judge_volumes(rows(), LIMITS)
            except DecisionFailed:
                if index >= WARM_UP:
                    raise
                continue  # a question asked while the query was still starting
            if index == WARM_UP - 1:
                at_rest = _at_rest({"aggregator": aggregator.process.pid,
                                    "broker": cluster._nodes[1].process.pid}, idle)
            if index >= WARM_UP:
                measured.append(time.perf_counter() - asked)
            time.sleep(every)
        return measured, at_rest
    finally:
        pipeline.close()
        aggregator.stop()
        if spark:
            spark.stop()
        cluster.stop()


def _at_rest(pids: dict[str, int], seconds: float) -> dict[str, float]:
    before, started = {name: cpu_seconds([pid]) for name, pid in pids.items()}, time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return {name: (cpu_seconds([pid]) - before[name]) / elapsed for name, pid in pids.items()}


def in_this_process(questions: int, every: float) -> list[float]:
    from spark_jobs import session, volume_violations

    spark = session.get_session(None, "quota-sidecar-benchmark")
    measured = []
    for index in range(WARM_UP + questions):
        asked = time.perf_counter()
        volume_violations.decide(spark, rows(), LIMITS)
        if index >= WARM_UP:
            measured.append(time.perf_counter() - asked)
        time.sleep(every)
    session.stop_sessions()
    return measured


def run(questions: int, every: float, idle: float, workers: int) -> Result:
    with LoadWatch() as load:
        aggregated, at_rest = through_the_aggregator(questions, every, idle, workers)
        local = in_this_process(questions, every)
    where = f" on a standalone cluster of {workers} Workers" if workers else ""
    lines = [table(["decided", "median", "p95", "max", "n"], [
        [name, f"{statistics.median(values):.3f} s", f"{p95(values):.3f} s", f"{max(values):.3f} s", len(values)]
        for name, values in ((f"by the aggregator{where} (published → decision read)", aggregated),
                             ("in the agent's own embedded Spark (today)", local))])]
    lines += ["", f"{len(rows())} rows an observation, one every {every} s. At rest ({idle:g} s without a question, "
              f"after the warm-up): the aggregator {at_rest['aggregator']:.0%} of a core, the pipeline's broker "
              f"{at_rest['broker']:.0%}.", "",
              provenance(this_command(), load)]
    return Result(TITLE, "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--every", type=float, default=0.25, help="seconds between two questions")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds at rest, measured before the questions")
    parser.add_argument("--standalone", type=int, default=0, metavar="WORKERS",
                        help="the aggregator on a Spark standalone cluster of this many Workers (0: embedded)")
    args = parser.parse_args()
    print_result(run(args.questions, args.every, args.idle, args.standalone))


if __name__ == "__main__":
    main()
