"""Kafka's own Java producer against the protection: does the throttle land before the disk fills?

Per run: a fresh 1-broker cluster (a run without protection in time takes its log dir offline), its
only log dir on a tmpfs of LIMIT + MARGIN; `quota-sidecar run` beside it (a subprocess,
`min.available.bytes` = LIMIT, `produce` 1 GiB/s so that factor 0 means 1 B/s) at a check interval, with
or without the local watch; one `quota-sidecar aggregate` decides for the agents of every run
(common.aggregator_running: its pipeline a 1-broker cluster of its own, off the flooded volume); then
ProducerPerformance (16 KiB records, acks=all, 5 requests in flight) at full speed (`--throughput -1`) or
at 40 MB/s into a one-partition topic there. statvfs of the dir every 10 ms; the sidecar's /metrics every
0.1 s for the wall time of each pass. The local watch is off, on, or on with a lead time
(`storage.per.volume.limit.lead.time` PT10S, `storage.fill.window` PT5S).
(one_run can also make the producer a tenant with a producer rate of its own: tenant_verdict.py.)
Per run:

- crossing: the first sample with available bytes <= LIMIT;
- quota written: the time stamp of the sidecar's line `producer_byte_rate: ... -> 1`, minus the crossing
  (negative: before it, as a lead time can make it);
- stalled: the first sample after which free space drops less than 1 MiB in the next 2 s, minus the
  crossing; none when the filesystem filled first;
- lowest free space, and whether the log dir went offline (the broker reports it so, or shut down);
- the wall time of the passes from the flood's start to the quota.

    .venv/bin/python benchmarks/java_flood.py [--intervals PT1S,PT10S,PT1M] [--watch off,on,lead] [--runs 1]
        [--speeds 'full speed,40 MB/s'] [--producer-nice 0]
"""

from __future__ import annotations

import argparse
import re
import signal
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from common import MiB, LoadWatch, PassWatch, Result, Stats, aggregator_running, cell, create_topics, print_result, \
    provenance, sidecar_properties, sidecar_running, table, this_command
from harness.cluster.disk import DiskSampler
from harness.cluster.kafka_tools import kafka_configs, producer_performance
from harness.cluster.local_cluster import DEFAULT_USERS, LocalKafkaCluster
from quota_sidecar.common.errors import AdminError
from quota_sidecar.kafka_clients.admin import ClusterAdmin

TITLE = "Throttle latency against Kafka's Java producer"
LIMIT, MARGIN = 256 * MiB, 160 * MiB
RECORD = 16 << 10
SPEEDS = {"full speed": -1, "40 MB/s": 40_000_000 / RECORD}
WATCH = {"off": {"storage.local.watch.interval": "PT0S"}, "on": {},
         "lead": {"storage.per.volume.limit.lead.time": "PT10S", "storage.fill.window": "PT5S"}}
WATCH_NAMES = {"off": "off", "on": "on", "lead": "on, lead time PT10S"}
# tenant -> (principal, client id, kafka-configs' entity, the sidecar's label of it); None: the default user
TENANTS = {"none": None,
           "user": ("alice", "alice-app", ["--entity-type", "users", "--entity-name", "alice"], "User:alice"),
           "user + client id": ("bob", "bob-app", ["--entity-type", "users", "--entity-name", "bob", "--entity-type",
                                                   "clients", "--entity-name", "bob-app"], "User:bob client-id bob-app")}
FLOOD = {"acks": "all", "linger.ms": 5, "batch.size": 256 << 10, "max.in.flight.requests.per.connection": 5,
         "compression.type": "none", "delivery.timeout.ms": 30000, "request.timeout.ms": 20000}


def stalled_at(samples: list[tuple[float, int]], after: float) -> float | None:
    """The first sample time >= after from which free space falls less than 1 MiB in the next 2 s."""
    for index, (at, free) in enumerate(samples):
        if at < after:
            continue
        later = [f for t, f in samples[index:] if t <= at + 2.0]
        if samples[-1][0] >= at + 2.0 and free - min(later) < MiB:
            return at
    return None


def one_run(interval: str, watch: str, speed: float, work_dir: Path, pipeline: dict, niceness: int = 0,
            tenant: str = "none") -> dict:
    """One flood; `pipeline`: the agent's properties that reach the aggregator (Aggregator.agent_properties);
    `tenant` (of TENANTS) makes the producer a principal with a producer rate of its own."""
    with LocalKafkaCluster(brokers=1, small_log_dirs={(1, 0): LIMIT + MARGIN}) as cluster:
        small_dir = cluster.log_dirs(1)[0]
        create_topics(cluster.bootstrap_servers, {"flood": {"assignments": {0: [1]}}})
        client, throttled = as_tenant(cluster, TENANTS[tenant])
        keys = {"storage.check.interval": interval, "storage.per.volume.limit.min.available.bytes": LIMIT,
                "produce": 1 << 30, "storage.local.log.dirs": small_dir, **WATCH[watch]}
        properties = {"node.id": 1, **sidecar_properties(cluster.bootstrap_servers, **keys), **pipeline}
        with sidecar_running(properties, work_dir, name=f"sidecar-{interval}-{watch}") as sidecar:
            sidecar.wait_for_polls(2, timeout=300)
            with DiskSampler(small_dir, every=0.01) as disk, PassWatch(sidecar, every=0.1) as passes:
                first_pass = int(sidecar.metrics()["quota_sidecar_polls_total"]) + 1
                started = time.monotonic()
                producer = producer_performance(client.pop("bootstrap.servers"), "flood",
                                                4 * (LIMIT + MARGIN) // RECORD, RECORD, speed,
                                                work_dir / "producer.log", niceness, **FLOOD, **client)
                try:
                    deadline = started + 120
                    # Until the limit is crossed, or (a lead time) the quota came first and held for 5 s.
                    while (crossed := disk.crossed_at(LIMIT)) is None and time.monotonic() < deadline:
                        quota = sidecar.first_line(throttled, after=started)
                        if quota is not None and time.monotonic() > quota.at + 5:
                            break
                        time.sleep(0.05)
                    written = sidecar.first_line(throttled, after=started)
                    while written is None and time.monotonic() < deadline and disk.lowest() > 0:
                        time.sleep(0.1)
                        written = sidecar.first_line(throttled, after=started)
                    last_pass = max(list(passes.durations), default=0)
                    time.sleep(4)
                finally:
                    producer.send_signal(signal.SIGTERM)
                    producer.wait(30)
        try:  # a broker whose only log dir went offline shuts down
            with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
                offline = any(v.error for v in admin.describe_volumes([1], datetime.now(timezone.utc)))
        except AdminError:
            offline = True
    samples = list(disk.samples)
    stalled = None if crossed is None else stalled_at(samples, crossed)
    return {"crossing": None if crossed is None else crossed - started,
            "written": None if written is None or crossed is None else written.at - crossed,
            "written_from_start": None if written is None else written.at - started,
            "stalled": None if stalled is None or disk.lowest() == 0 else stalled - crossed,
            "lowest": disk.lowest(), "offline": offline,
            "passes": [seconds for number, seconds in passes.durations.items() if first_pass <= number <= last_pass]}


def run(intervals=("PT1S", "PT10S", "PT1M"), watches=("off", "on", "lead"), runs: int = 1, niceness: int = 0,
        speeds: tuple[str, ...] = tuple(SPEEDS)) -> Result:
    rows, every_run = [], []
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="bench-java-flood-") as work_dir, \
            aggregator_running() as aggregator:
        for speed_name, speed in ((name, SPEEDS[name]) for name in speeds):
            for interval in intervals:
                for watch in watches:
                    results = [one_run(interval, watch, speed, Path(work_dir), aggregator.agent_properties, niceness)
                               for _ in range(runs)]
                    for r in results:
                        every_run.append([speed_name, f"`{interval}`", WATCH_NAMES[watch], seconds(r["crossing"]),
                                          written_text(r), seconds(r["stalled"]), lowest_text(r["lowest"]),
                                          "**yes**" if r["offline"] else "no", cell(Stats.of(r["passes"]), "s")])
                        print("  ", *every_run[-1], flush=True)
                    rows.append([speed_name, f"`{interval}`", WATCH_NAMES[watch],
                                 cell(Stats.of(r["written"] for r in results if r["written"] is not None), "s"),
                                 f"{sum(before_crossing(r) for r in results)} of {runs}",
                                 f"{sum(r['written_from_start'] is None for r in results)} of {runs}",
                                 lowest_text(min(r['lowest'] for r in results)),
                                 f"{sum(r['offline'] for r in results)} of {runs}",
                                 cell(Stats.of(p for r in results for p in r["passes"]), "s")])
    markdown = "\n\n".join([
        f"A 1-broker cluster per run, its log dir on a {(LIMIT + MARGIN) // MiB} MiB tmpfs, "
        f"`min.available.bytes` = {LIMIT // MiB} MiB; `quota-sidecar run` beside it, decided for by one "
        "`quota-sidecar aggregate` (its pipeline a 1-broker cluster of its own, the same for every run); Kafka's "
        "ProducerPerformance (16 KiB records, acks=all, up to 5 requests in flight, 256 KiB batches) into a "
        "one-partition topic there. The local watch off, on (default `PT0.1S`), or on with a lead time "
        "(`storage.per.volume.limit.lead.time=PT10S`, `storage.fill.window=PT5S`). **Crossing**: flood start → "
        "free space at the limit (statvfs every 10 ms). **Quota written**: crossing → the sidecar's log line "
        "`producer_byte_rate: … -> 1` of the producer's entity (the default user's, or a tenant's own) (negative: before the crossing; \"no crossing\": the quota came first, and the "
        "free space never fell to the limit). **Stalled**: crossing → free space falls "
        "< 1 MiB in the next 2 s (– when the disk filled). **Offline**: the log dir went offline (the broker "
        "reports it so, or shut down with it). **Passes**: wall time of each pass from the flood's start to the "
        f"quota (the sidecar's /metrics every 0.1 s). {runs} run(s) per line of the first table, median "
        "(min–max); every run in the second."
        + (f" The producer runs at nice {niceness}: on this 2-core machine it shares the cores with the broker and "
           "the sidecar, where in production it runs on another machine; niced, it still floods at full speed "
           "on the CPU they leave." if niceness else ""),
        table(["producer", "check interval", "local watch", "quota written after the crossing",
               "written before the crossing", "never written",
               "lowest free", "offline", "passes during the flood"], rows),
        table(["producer", "check interval", "local watch", "crossing", "quota written", "stalled",
               "lowest free", "offline", "passes"], every_run),
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def lowest_text(lowest: int) -> str:
    """The lowest free space, and how far past the limit the producer got (the target: at most 1 MiB)."""
    past = max(0, LIMIT - lowest) / MiB
    return f"{lowest / MiB:.1f} MiB ({past:.2f} MiB past the limit)"


def as_tenant(cluster: LocalKafkaCluster, tenant) -> tuple[dict, str]:
    """The producer's connection settings, and the sidecar's line that throttles it; a tenant's quota is set."""
    if tenant is None:
        return {"bootstrap.servers": cluster.bootstrap_servers}, r"quota <default user> producer_byte_rate: \S+ -> 1$"
    user, client_id, entity, label = tenant
    kafka_configs(cluster.bootstrap_servers, "--alter", *entity, "--add-config", "producer_byte_rate=1000000000")
    login = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
             f'password="{DEFAULT_USERS[user]}";')
    return ({"bootstrap.servers": cluster.sasl_bootstrap_servers, "client.id": client_id,
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": login},
            rf"quota {re.escape(label)} producer_byte_rate: \S+ -> 1$")


def before_crossing(result: dict) -> bool:
    """The quota was written and the limit crossed after it, or never."""
    return result["written_from_start"] is not None and (result["written"] is None or result["written"] < 0)


def written_text(result: dict) -> str:
    if result["crossing"] is None and result["written_from_start"] is not None:
        return f"no crossing ({result['written_from_start']:+.2f} s from the flood's start)"
    return seconds(result["written"])


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="PT1S,PT10S,PT1M", help="comma-separated ISO-8601 check intervals")
    parser.add_argument("--watch", default="off,on,lead", help="comma-separated: off, on, lead (on with a lead time)")
    parser.add_argument("--runs", type=int, default=1, help="runs per producer, interval and watch")
    parser.add_argument("--producer-nice", type=int, default=0,
                        help="run the producer at this niceness (as if on another machine: the sidecar's CPU first)")
    parser.add_argument("--speeds", default=",".join(SPEEDS), help=f"comma-separated, of: {', '.join(SPEEDS)}")
    args = parser.parse_args()
    print_result(run(tuple(args.intervals.split(",")), tuple(args.watch.split(",")), args.runs, args.producer_nice,
                     tuple(args.speeds.split(","))))


if __name__ == "__main__":
    main()
