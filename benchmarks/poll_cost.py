"""What one poll costs the sidecar and the cluster, at 100 and at 10,000 partitions.

A poll is what the sidecar sends every check interval to see the volumes, through its own
quota_sidecar.kafka_clients.admin.ClusterAdmin: DescribeCluster (the live brokers), then DescribeLogDirs with an
empty topic list to every live broker at once. Measured on a local 3-broker cluster holding the given
number of partitions (replication factor 1, topics of up to 500 partitions, spread by Kafka):

- wall time of live_broker_ids() + describe_volumes();
- response bytes as read off the sockets by the admin client (kafka-python's bytes-received sensor with
  a running total added: the response frames, size prefix and header included, TCP/IP headers not);
- for contrast, DescribeLogDirs with a NULL topic list (every partition of every log dir) to every
  broker: its wall time and response bytes. That is the request the sidecar does not send.

    .venv/bin/python benchmarks/poll_cost.py [--partitions 100,10000] [--polls 20]
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone

from kafka.metrics.stats import Total
from kafka.protocol.admin import DescribeLogDirsRequest

from common import (LoadWatch, Result, Stats, cell, create_topics, print_result, provenance, raise_file_limit,
                    table, this_command, uptime)
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from harness.cluster.local_cluster import LocalKafkaCluster

TITLE = "Poll cost"  # its subsection of "## Disk protection" in docs/benchmarks.md

TOPIC_PARTITIONS = 500  # partitions per topic; one topic of 500 partitions is 501 KRaft records, well in bounds
# Thousands of empty partitions: no retention check every second (the test setting) over all of them.
BROKER_PROPERTIES = {"log.retention.check.interval.ms": "300000"}
GROW_TIMEOUT = 300.0


class ReceivedBytes:
    """Bytes an admin client has read off all its sockets since this counter was made, via its own metrics.

    Reaches into ClusterAdmin's and kafka-python's internals, as the NULL-list request below does: fine for
    a benchmark, never for the sidecar.
    """

    def __init__(self, admin: ClusterAdmin):
        admin.live_broker_ids()  # connects: the sensor exists once a connection does
        metrics = admin._connected()._metrics
        name = metrics.metric_name("bytes-received-total", "quota-sidecar-benchmark")
        metrics.get_sensor("bytes-received").add(name, Total())
        self._metric = metrics.metrics[name]

    def __call__(self) -> float:
        return self._metric.value()


async def _describe_all_partitions(admin: ClusterAdmin, broker_ids: list[int]) -> list:
    """DescribeLogDirs with a NULL topic list to every broker at once (as describe_volumes sends [])."""
    calls = [admin._manager.call_soon(admin._send(DescribeLogDirsRequest(topics=None, min_version=4),
                                                  f"DescribeLogDirs (all partitions) to broker {broker}",
                                                  node_id=broker))
             for broker in broker_ids]
    return [await call for call in calls]


def describe_all_partitions(admin: ClusterAdmin, broker_ids: list[int]) -> int:
    """Sends the NULL-topic-list request; returns how many partition replicas the answers list."""
    responses = admin._call("DescribeLogDirs (all partitions)", _describe_all_partitions, admin, broker_ids)
    return sum(len(topic.partitions) for response in responses for result in response.results
               for topic in result.topics)


def grow_to(cluster: LocalKafkaCluster, admin: ClusterAdmin, partitions: int, created: int) -> int:
    """Create topics until the cluster has `partitions` partitions; wait until the brokers host them all."""
    while created < partitions:
        count = min(TOPIC_PARTITIONS, partitions - created)
        create_topics(cluster.bootstrap_servers, {f"bench-{created:05d}": {"num_partitions": count,
                                                                           "replication_factor": 1}})
        created += count
    deadline = time.monotonic() + GROW_TIMEOUT
    brokers = admin.live_broker_ids()
    while (hosted := describe_all_partitions(admin, brokers)) < partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the brokers host {hosted} of {partitions} partitions after {GROW_TIMEOUT:.0f}s")
        time.sleep(2)
    return created


def measure(admin: ClusterAdmin, received: ReceivedBytes, polls: int) -> dict:
    times, cluster_times, cluster_bytes, log_dirs_times, log_dirs_bytes = [], [], [], [], []
    null_times, null_bytes = [], []
    for poll in range(polls + 2):  # the first two warm up
        before, started = received(), time.perf_counter()
        brokers = admin.live_broker_ids()
        middle, between = received(), time.perf_counter()
        volumes = len(admin.describe_volumes(brokers, datetime.now(timezone.utc)))
        ended, after = time.perf_counter(), received()
        if poll >= 2:
            times.append(ended - started)
            cluster_times.append(between - started)
            log_dirs_times.append(ended - between)
            cluster_bytes.append(middle - before)
            log_dirs_bytes.append(after - middle)
    for poll in range(max(3, polls // 4) + 1):  # slower and bigger: fewer of them, the first warms up
        before, started = received(), time.perf_counter()
        hosted = describe_all_partitions(admin, brokers)
        if poll:
            null_times.append(time.perf_counter() - started)
            null_bytes.append(received() - before)
    return {"brokers": len(brokers), "volumes": volumes, "hosted": hosted, "poll": Stats.of(times),
            "cluster_time": Stats.of(cluster_times), "cluster_bytes": Stats.of(cluster_bytes),
            "log_dirs_time": Stats.of(log_dirs_times), "log_dirs_bytes": Stats.of(log_dirs_bytes),
            "null_time": Stats.of(null_times), "null_bytes": Stats.of(null_bytes), "load": uptime()}


def run(partition_counts: tuple[int, ...] = (100, 10_000), polls: int = 20) -> Result:
    raise_file_limit()
    rows, notes = [], []
    with LoadWatch() as load, LocalKafkaCluster(brokers=3, broker_properties=BROKER_PROPERTIES) as cluster, \
            ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers, "request_timeout_ms": 60_000}) as admin:
        received = ReceivedBytes(admin)
        created = 0
        for partitions in sorted(partition_counts):
            started = time.monotonic()
            try:
                created = grow_to(cluster, admin, partitions, created)
            except Exception as error:  # say exactly why, and keep what was measured below
                notes.append(f"{partitions:,} partitions could not be reached: {error}")
                print(f"  {notes[-1]}", flush=True)
                break
            grown = time.monotonic() - started
            figures = measure(admin, received, polls)
            print(f"  {partitions:,} partitions (created in {grown:.0f} s): "
                  f"poll {figures['poll'].text('s', digits=3)}, "
                  f"DescribeLogDirs [] {figures['log_dirs_bytes'].text('B', digits=0)}, "
                  f"NULL {figures['null_bytes'].text('B', digits=0)}, load {figures['load']}", flush=True)
            rows.append([f"{partitions:,}", f"{figures['brokers']} / {figures['volumes']}",
                         cell(figures["poll"], "ms", 1e-3, 1), cell(figures["cluster_time"], "ms", 1e-3, 1),
                         cell(figures["cluster_bytes"], "B", digits=0), cell(figures["log_dirs_time"], "ms", 1e-3, 1),
                         cell(figures["log_dirs_bytes"], "B", digits=0), cell(figures["null_time"], "ms", 1e-3, 1),
                         cell(figures["null_bytes"], "B", digits=0), f"{figures['hosted']:,}",
                         f"{grown:.0f} s", figures["load"].split()[0]])
    markdown = "\n\n".join([
        "One poll as the sidecar makes it (`ClusterAdmin.live_broker_ids()` + `describe_volumes()`: "
        "DescribeCluster, then DescribeLogDirs with an **empty** topic list to every live broker at once), "
        f"{polls} polls after 2 warm-up ones, median (min–max), on a local 3-broker cluster holding the given "
        f"number of partitions (replication factor 1, topics of up to {TOPIC_PARTITIONS} partitions). Response "
        "bytes: what the admin client read off its sockets (kafka-python's `bytes-received` sensor with a "
        "running total added; frames with size prefix and header, no TCP/IP headers), summed over the three "
        "brokers. For contrast, DescribeLogDirs with a **NULL** topic list (every partition of every log dir), "
        "which the sidecar does not send. Kafka's broker builds any DescribeLogDirs answer by grouping all its "
        "logs by dir and topic and filtering them against the requested partitions (`ReplicaManager."
        "describeLogDirs`), an empty list included: the `[]` response stays the same size, but the broker's "
        "work still grows with the partitions it hosts.",
        table(["partitions", "brokers / log dirs", "poll wall time", "of which DescribeCluster",
               "DescribeCluster response", "of which DescribeLogDirs `[]`", "DescribeLogDirs `[]` responses",
               "DescribeLogDirs NULL wall time", "DescribeLogDirs NULL responses",
               "partitions listed by NULL", "time to create them", "1-min load"], rows),
        *notes,
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100,10000", help="comma-separated partition counts")
    parser.add_argument("--polls", type=int, default=20)
    args = parser.parse_args()
    print_result(run(tuple(int(count) for count in args.partitions.split(",")), args.polls))


if __name__ == "__main__":
    main()
