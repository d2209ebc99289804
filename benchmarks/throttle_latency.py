"""How long a flooding producer goes on at full speed once a volume crosses the limit.

A local 3-broker cluster, broker 3's only log dir on a 96 MiB tmpfs. `quota-sidecar run` (a subprocess, as
deployed; one `quota-sidecar aggregate` decides for it, common.aggregator_running) watches it with
min.available.bytes = 86 MiB and no `produce` (unlimited producers until the factor is 0, then 1 B/s). This
process floods a one-partition topic on broker 3 (16 KiB records, acks=all) and samples statvfs of the log
dir every 50 ms. Per run:

- crossing: the first statvfs sample with available bytes <= the limit;
- quota written: the time stamp of the sidecar's log line `producer_byte_rate: none -> 1`, logged
  once AlterClientQuotas returned (the controller committed it; brokers apply it as they replay the
  metadata log);
- throttled: the first instant t >= crossing such that every 1 s window [u, u + 1 s) with u in
  [t, t + 5 s] holds less than 64 KiB of acknowledged records (the acknowledged rate stays below
  64 KiB/s for 5 s; that is < 5% of the unthrottled rate here);
- latency: throttled - crossing.

Then the topic is deleted, the sidecar lifts the throttle, and the next run starts on a new topic,
(run index / runs) x the check interval later, so that the crossings fall at points spread over the
sidecar's cycle rather than always just after a pass.

    .venv/bin/python benchmarks/throttle_latency.py [--runs N] [--intervals PT1S,PT10S]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import (KiB, MiB, Flood, LoadWatch, PassWatch, Result, SidecarProcess, Stats, aggregator_running, cell,
                    create_topics, delete_topics, flood_producer, print_result, provenance, sidecar_properties, table,
                    sidecar_running, this_command, uptime)
from quota_sidecar.configuration.properties import duration
from harness.cluster.disk import DiskSampler, free_bytes
from harness.cluster.local_cluster import LocalKafkaCluster

TITLE = "Throttle latency"  # its subsection of "## Disk protection" in docs/benchmarks.md

SMALL_BROKER = 3
SMALL_FS = 96 * MiB
# 10 MiB below what the empty filesystem has free: a few seconds of flooding to the crossing, then room
# for 20 s or more of flooding at the few MiB/s this producer manages (one 48 KiB request in flight,
# CRC-32C in pure Python) before the disk is full.
LIMIT = SMALL_FS - 10 * MiB
THRESHOLD = 64 * KiB  # acknowledged bytes in a 1 s window below which the producer counts as throttled
WINDOW, STAY = 1.0, 5.0
PRE_WINDOW = 2.0  # seconds before the crossing over which the unthrottled rate is measured
BROKER_PROPERTIES = {"log.segment.delete.delay.ms": "1000"}


def throttled_at(flood: Flood, start: float, end: float, step: float = 0.02) -> float | None:
    """The first t >= start from which every 1 s window starting in [t, t + STAY] is below THRESHOLD."""
    slow_since = None
    u = start
    while u + WINDOW <= end:
        if flood.acked_bytes(u, u + WINDOW) >= THRESHOLD:
            slow_since = None
        elif slow_since is None:
            slow_since = u
        elif u - slow_since >= STAY:
            return slow_since
        u += step
    return None


def one_run(cluster: LocalKafkaCluster, sidecar: SidecarProcess, topic: str, delay: float, timeout: float) -> dict:
    """One flood; it starts `delay` seconds after the call, which sets where in the sidecar's cycle it falls."""
    time.sleep(delay)
    small_dir = cluster.log_dirs(SMALL_BROKER)[0]
    deadline = time.monotonic() + 60
    while free_bytes(small_dir) <= LIMIT + 8 * MiB:  # the previous run's topic may still be being deleted
        if time.monotonic() > deadline:
            raise TimeoutError(f"{small_dir}: only {free_bytes(small_dir)} bytes free after a minute")
        time.sleep(0.2)
    create_topics(cluster.bootstrap_servers, {topic: {"assignments": {0: [SMALL_BROKER]}}})
    with DiskSampler(small_dir) as disk, flood_producer(cluster.bootstrap_servers, topic) as flood:
        started = time.monotonic()
        while (crossed := disk.crossed_at(LIMIT)) is None:
            if flood.failure or time.monotonic() > started + 60:
                raise RuntimeError(f"the limit was not crossed within 60 s (producer: {flood.failure!r})")
            time.sleep(0.05)
        written = sidecar.wait_for_line(r"producer_byte_rate: \S+ -> 1$", timeout, after=started)
        time.sleep(max(0.0, written.at + STAY + WINDOW + 4.0 - time.monotonic()))
        ended = time.monotonic()
    throttled = throttled_at(flood, crossed, ended)
    lowest = disk.lowest()
    delete_topics(cluster.bootstrap_servers, [topic])
    sidecar.wait_for_line(r"producer_byte_rate: 1 -> none$", timeout, after=ended)  # lifted
    return {
        "pre_rate": flood.acked_bytes(crossed - PRE_WINDOW, crossed) / PRE_WINDOW,
        "written": written.at - crossed,
        "latency": None if throttled is None else throttled - crossed,
        "after_write": None if throttled is None else throttled - written.at,
        "throttled_rate": None if throttled is None else flood.acked_bytes(throttled, throttled + STAY) / STAY,
        "lowest_free": lowest,
        "load": uptime(),
    }


def measure(interval: str, runs: int, cluster: LocalKafkaCluster, work_dir: Path,
            pipeline: dict) -> tuple[list[dict], list[float]]:
    """The runs' figures, and the wall time of every sidecar pass meanwhile; `pipeline`: the sidecar's
    properties that reach the aggregator."""
    seconds = duration(interval).total_seconds()
    properties = sidecar_properties(cluster.bootstrap_servers, **{
        "storage.check.interval": interval, "storage.per.volume.limit.min.available.bytes": LIMIT})
    with sidecar_running({**properties, **pipeline}, work_dir, name=f"sidecar-{interval}") as sidecar:
        sidecar.wait_for_polls(2, timeout=300)
        results = []
        with PassWatch(sidecar) as passes:
            for run in range(runs):
                # Each run begins right after the previous one saw the throttle lift, i.e. right after a
                # pass: without a delay every crossing would fall at the same point of the sidecar's cycle.
                result = one_run(cluster, sidecar, f"flood-{interval.lower()}-{run}", delay=run * seconds / runs,
                                 timeout=seconds + 90)
                print(f"  {interval} run {run + 1}: {describe(result)}", flush=True)
                results.append(result)
    return results, list(passes.durations.values())


def describe(result: dict) -> str:
    latency = "not throttled" if result["latency"] is None else f"{result['latency']:.2f} s"
    return (f"latency {latency}, quota written after {result['written']:.2f} s, unthrottled "
            f"{result['pre_rate'] / MiB:.2f} MiB/s, lowest free {result['lowest_free'] / MiB:.1f} MiB, "
            f"load {result['load']}")


def run(runs: int = 4, intervals: tuple[str, ...] = ("PT1S", "PT10S")) -> Result:
    rows, run_rows = [], []
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="bench-throttle-") as work_dir, \
            aggregator_running() as aggregator, \
            LocalKafkaCluster(brokers=3, small_log_dirs={(SMALL_BROKER, 0): SMALL_FS},
                              broker_properties=BROKER_PROPERTIES) as cluster:
        for interval in intervals:
            results, passes = measure(interval, runs, cluster, Path(work_dir), aggregator.agent_properties)

            def stats(key):
                return Stats.of(r[key] for r in results if r[key] is not None)

            not_throttled = sum(r["latency"] is None for r in results)
            rows.append([f"`{interval}`", cell(stats("latency"), "s") + (f"; {not_throttled} run(s) not throttled"
                                                                         if not_throttled else ""),
                         cell(stats("written"), "s"), cell(Stats.of(passes), "s"), cell(stats("after_write"), "s"),
                         cell(stats("pre_rate"), "MiB/s", MiB), cell(stats("throttled_rate"), "KiB/s", KiB, 1),
                         f"{min(r['lowest_free'] for r in results) / MiB:.1f} MiB"])
            run_rows += [[f"`{interval}`", index + 1, seconds(r["latency"]), seconds(r["written"]),
                          seconds(r["after_write"]), f"{r['pre_rate'] / MiB:.2f} MiB/s", r["load"]]
                         for index, r in enumerate(results)]
    markdown = "\n\n".join([
        f"Limit crossed → producer throttled, `quota-sidecar run` as a subprocess (decided for by one "
        "`quota-sidecar aggregate`, its pipeline a 1-broker cluster of its own), "
        f"{runs} runs per check interval, median (min–max). Broker {SMALL_BROKER}'s only log dir on a "
        f"{SMALL_FS // MiB} MiB tmpfs, `min.available.bytes={LIMIT}` (10 MiB below the empty filesystem's "
        "free space), no `produce` (so 1 B/s at factor 0, unlimited before); one producer (this process, "
        "kafka-python, 16 KiB records in 48 KiB requests, acks=all, one request in flight, 5 s delivery "
        "timeout) floods a one-partition topic there. Each run starts when the previous one has seen the "
        "throttle lift (right after a pass) plus (run index / runs) × the check interval, so that the "
        "crossings fall at points spread over the sidecar's cycle. **Crossing**: first statvfs sample "
        "(every 50 ms) with "
        "available <= limit. **Quota written**: time stamp of the sidecar's log line `producer_byte_rate: "
        "none -> 1`, logged once AlterClientQuotas returned (the controller has committed the quota; each "
        "broker applies it when it replays the metadata log). **Throttled**: the first instant from which "
        f"every 1 s window of the next {STAY:.0f} s holds less than {THRESHOLD // KiB} KiB of acknowledged "
        "records (acknowledged rate < 64 KiB/s). **Latency** = throttled − crossing. **Sidecar pass**: wall "
        "time of every pass (read its records, DescribeCluster + DescribeLogDirs, the aggregator's decision, read "
        "and write quotas) during the runs, from its `/metrics`; a pass starts one check interval after the "
        "previous one ended, so crossing → quota written is the wait for the next pass (0 to interval + "
        "pass) plus that pass. **Throttled rate**: what this producer still got acknowledged under the "
        "1 B/s quota in the 5 s after (one request now and then gets through; its size and the delivery "
        "timeout set that rate, not the sidecar).",
        table(["check interval", "latency", "crossing → quota written", "sidecar pass (all passes)",
               "quota written → throttled", "unthrottled rate", f"throttled rate ({STAY:.0f} s after)",
               "lowest free space"], rows),
        "Every run:",
        table(["check interval", "run", "latency", "crossing → quota written", "quota written → throttled",
               "unthrottled rate", "load average (1, 5, 15 min) after the run"], run_rows),
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--intervals", default="PT1S,PT10S", help="comma-separated ISO-8601 check intervals")
    args = parser.parse_args()
    print_result(run(args.runs, tuple(args.intervals.split(","))))


if __name__ == "__main__":
    main()
