"""A producer the sidecar throttled sends again by itself when the throttle lifts (decide/descent.py).

Broker 3's only log dir is a small tmpfs, most of it another topic's data; Kafka's own Java producer writes at a
steady 2 MiB/s, and the volume is soon within the descent's horizon of the hard limit. The sidecar (default descent
settings, its local watch on) lowers the default user's producer quota in steps to the floor; then room returns (the
other topic deleted) and the throttle lifts. The producer is stopped once it is back: ProducerPerformance then sends
what it is behind its rate at full speed, which would fill the volume again. Kafka's throttle time is (observed - quota) / quota x window, and neither
the broker nor the Java client shortens one already given, so only short throttles all the way down let the
producer come back. What the broker accepts is read as the partition's end offset every half second.
"""

from __future__ import annotations

import contextlib
import signal
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from harness.cluster.disk import free_bytes
from harness.clients.end_offsets import EndOffsets
from harness.cluster.kafka_tools import producer_performance
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = pytest.mark.integration
MiB = 1 << 20
FILESYSTEM, HARD, ROOM = 512 * MiB, 32 * MiB, 340 * MiB  # the descent's horizon (74 s here) from the start
RECORD = 16 << 10
RATE = 128  # records/s: 2 MiB/s
FLOOR = 26_214  # produce.floor's default
STEADY = {"acks": "all", "linger.ms": 5, "batch.size": 64 << 10, "compression.type": "none"}


def test_a_java_producer_throttled_down_to_the_floor_sends_again_within_30_s_of_the_lift(
        make_kafka_cluster, pipeline, unique_name, tmp_path):
    cluster = make_kafka_cluster(small_log_dirs={(3, 0): FILESYSTEM},
                                 broker_properties={"log.segment.bytes": str(16 * MiB), "file.delete.delay.ms": "500"})
    small_dir, topic, room = cluster.log_dirs(3)[0], unique_name, unique_name + "-room"
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, replica_assignments={0: [3]}) for name in (topic, room)])
    filler = producer_performance(cluster.bootstrap_servers, room, ROOM // RECORD, RECORD, -1, tmp_path / "fill.log",
                                  **STEADY)
    assert filler.wait(300) == 0, (tmp_path / "fill.log").read_text()[-2000:]

    sidecar = SidecarProcess("sidecar-3", tmp_path, {
        "node.id": 3, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.per.volume.limit.min.available.bytes": HARD,
        PREFIX + "storage.local.log.dirs": small_dir, PREFIX + "storage.check.interval": "PT1S", **pipeline})
    with sidecar, ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin, \
            EndOffsets(cluster.bootstrap_servers, topic) as offsets:
        sidecar.wait_ready()

        def producer_quota() -> float | None:
            return admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE)

        producer = producer_performance(cluster.bootstrap_servers, topic, 10 ** 7, RECORD, RATE,
                                        tmp_path / "producer.log", **STEADY)
        try:
            first_step = eventually(lambda: producer_quota() is not None and time.monotonic(), 180,
                                    "the descent's first step")
            eventually(lambda: (producer_quota() or FLOOR + 1) <= FLOOR, 300,
                       f"the producer quota down to the floor ({FLOOR} B/s)")
            at_floor = time.monotonic()
            lowest_free = free_bytes(small_dir)
            time.sleep(5)
            admin.delete_topic(room)
            lifted = eventually(lambda: producer_quota() is None and time.monotonic(), 90, "the throttle lifted")
            with contextlib.suppress(AssertionError):
                eventually(lambda: _first_time_at(list(offsets.samples), lifted, 0.9 * RATE), 32, "the rate back")
        finally:
            producer.send_signal(signal.SIGTERM)
            producer.wait(30)
    samples = list(offsets.samples)
    rate = RATE * RECORD
    longest_silence = _longest_silence([(at, offset) for at, offset in samples if first_step <= at <= at_floor])
    back_at = _first_time_at(samples, lifted, 0.9 * RATE)
    print(f"descent {at_floor - first_step:.0f} s, longest silence {longest_silence:.1f} s, lowest free "
          f"{lowest_free / MiB:.0f} MiB; {back_at - lifted if back_at else None} s from the lift to 90 % of "
          f"{rate / MiB:.0f} MiB/s")
    assert back_at is not None and back_at - lifted <= 30, \
        f"90 % of the producer's rate {'not back in 30 s' if back_at is None else f'back {back_at - lifted:.0f} s'} " \
        "after the lift"
    assert longest_silence <= 30, f"the producer was silent {longest_silence:.0f} s in the descent"
    assert lowest_free > HARD, "the hard limit was reached: the descent began too late"


def _longest_silence(samples: list[tuple[float, int]]) -> float:
    """The longest time the end offset stood still."""
    longest, grew_at, last = 0.0, None, None
    for at, offset in samples:
        if offset != last:
            grew_at, last = at, offset
        longest = max(longest, at - grew_at)
    return longest


def _first_time_at(samples: list[tuple[float, int]], after: float, records_per_second: float) -> float | None:
    """The first moment after `after` from which the next two seconds take at least that rate."""
    for i, (at, offset) in enumerate(samples):
        if at < after:
            continue
        later = next(((t, o) for t, o in samples[i:] if t >= at + 2.0), None)
        if later is not None and (later[1] - offset) / (later[0] - at) >= records_per_second:
            return at
    return None
