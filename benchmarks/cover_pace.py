"""What covering a broker whose agent is down costs, at several paces (cover.interval).

The covering agent asks the covered broker, and only it, for its volumes with DescribeLogDirs (an empty topic
list) every cover.interval (observe/cover_watch.py), through its ClusterAdmin. Measured on a local 3-broker
cluster holding the given number of partitions, for `--seconds` at each pace, broker 3 covered:

- the request's wall time (median, p99) and the answer's bytes (kafka-python's bytes-received sensor);
- CPU: this process's (the agent's side: the request, the judgement) and the covered broker's JVM (psutil),
  in percent of one core over the run, less the same broker idle for as long (its own background work);
- the heartbeats: the size of one beat as it is sent.

    .venv/bin/python benchmarks/cover_pace.py [--partitions 1000] [--paces 0.5,0.2,0.1,0.05] [--seconds 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime, timezone

import psutil
from common import (LoadWatch, Result, create_topics, print_result, provenance, raise_file_limit, table,
                    this_command)
from poll_cost import ReceivedBytes, TOPIC_PARTITIONS

from harness.cluster.local_cluster import LocalKafkaCluster
from quota_sidecar.pipeline import messages
from quota_sidecar.kafka_clients.admin import ClusterAdmin

TITLE = "Covering a broker whose agent is down"  # its subsection of "## Disk protection" in docs/benchmarks.md
COVERED = 3


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)


def at_pace(admin: ClusterAdmin, received: ReceivedBytes, broker: psutil.Process, pace: float, seconds: float) -> dict:
    """DescribeLogDirs of the covered broker every `pace` seconds for `seconds`, as the cover watch sends it."""
    times, sizes = [], []
    agent_before, broker_before, started = time.process_time(), cpu_seconds(broker), time.monotonic()
    due = started
    while (now := time.monotonic()) < started + seconds:
        if now < due:
            time.sleep(due - now)
        before, sent = received(), time.perf_counter()
        admin.describe_volumes([COVERED], datetime.now(timezone.utc))
        times.append(time.perf_counter() - sent)
        sizes.append(received() - before)
        due += pace
    elapsed = time.monotonic() - started
    return {"requests": len(times), "median_ms": statistics.median(times) * 1000,
            "p99_ms": sorted(times)[int(0.99 * (len(times) - 1))] * 1000, "bytes": statistics.median(sizes),
            "agent_cpu": (time.process_time() - agent_before) / elapsed,
            "broker_cpu": (cpu_seconds(broker) - broker_before) / elapsed}


def idle_cpu(broker: psutil.Process, seconds: float) -> float:
    before, started = cpu_seconds(broker), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(broker) - before) / (time.monotonic() - started)


def run(partitions: int, paces: list[float], seconds: float) -> Result:
    raise_file_limit()
    rows = []
    with LoadWatch() as load, LocalKafkaCluster(brokers=3) as cluster, \
            ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers, "request_timeout_ms": 30_000}) as admin:
        for first in range(0, partitions, TOPIC_PARTITIONS):
            create_topics(cluster.bootstrap_servers, {f"bench-{first:05d}": {
                "num_partitions": min(TOPIC_PARTITIONS, partitions - first), "replication_factor": 1}})
        received = ReceivedBytes(admin)
        broker = psutil.Process(cluster._nodes[COVERED].process.pid)
        at_pace(admin, received, broker, 0.1, 3.0)  # warm-up
        idle = idle_cpu(broker, seconds)
        for pace in paces:
            figures = at_pace(admin, received, broker, pace, seconds)
            print(f"  every {pace:g} s: {figures}", flush=True)
            rows.append([f"{pace:g} s", f"{figures['requests'] / seconds:.1f}", f"{figures['median_ms']:.1f} ms",
                         f"{figures['p99_ms']:.1f} ms", f"{figures['bytes']:.0f} B",
                         f"{100 * figures['agent_cpu']:.1f} %", f"{100 * (figures['broker_cpu'] - idle):.1f} %"])
    beat = len(messages.encode(messages.heartbeat("x" * 22, 300, datetime.now(timezone.utc))))
    markdown = "\n\n".join([
        f"DescribeLogDirs (empty topic list) of one broker at each pace for {seconds:g} s, as the covering agent "
        f"sends it (`ClusterAdmin.describe_volumes([3])`), on a local 3-broker cluster holding {partitions:,} "
        "partitions (replication factor 1). CPU in percent of one core over the run: the agent's (this "
        f"process), the covered broker's JVM less its own idle background work ({100 * idle:.1f} % over as "
        "long, measured before).",
        table(["cover.interval", "requests/s", "wall time, median", "p99", "answer", "agent CPU",
               "broker CPU (above idle)"], rows),
        f"A heartbeat is {beat} bytes as sent (a 22-character cluster id, broker 300), every cover.after / 4 "
        "(0.5 s by default) from every agent into one partition that every agent reads: N agents write 2N beats a "
        f"second and read 2N each, {2 * 30 * beat / 1024:.1f} KiB/s written at 30 agents and "
        f"{2 * 300 * beat / 1024:.0f} KiB/s at 300, each agent reading as much.",
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--paces", default="0.5,0.2,0.1,0.05", help="comma-separated cover.interval seconds")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    print_result(run(args.partitions, [float(p) for p in args.paces.split(",")], args.seconds))


if __name__ == "__main__":
    main()
