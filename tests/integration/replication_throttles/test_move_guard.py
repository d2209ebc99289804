"""A move cannot fill a disk either: Kafka's own reassign tool moves a partition larger than the free space onto a
small volume, as operators and rebalancers run it (without --throttle, or with a high one), beside sidecars at
their default intervals (a storage pass a minute, a replication pass every 10 s).

The guard goes in on the local verdict's path (local_guard.py) as the volume nears the limit; the move goes on
in steps while each pass finds room, and once the free space falls under the guard it is cancelled. The volume
never fills and its log dir never goes offline; the operator runs the move again once the dir has room.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from harness.cluster.kafka_tools import reassign_partitions
from harness.cluster.local_cluster import GENERATIONS, SmallFilesystemUnavailable
from harness.agents.move_guard_lab import (BROKER_PROPERTIES, LIMIT, SLOW_GUARD, SMALL, VOLUME, FreeSpace,
                                    cancelled_in_status, fill, start_guard_fleet)
from harness.agents.replication_checks import broker_configs, create_topic, assert_equal, eventually, lists
from quota_sidecar.decide.cordons import KEY as CORDONED_LOG_DIRS
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS
from quota_sidecar.kafka_clients.admin import ClusterAdmin

from .conftest import ClusterLogs

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]

MiB = 1 << 20
RECORD = 1_000_000
RECORDS = (VOLUME + 40 * MiB) // RECORD  # on broker 1: more than broker 3's whole volume
HIGH_THROTTLE = 1_000_000_000  # what an operator passes to have a throttle "just in case"
HELD_FOR = 12  # s: a replication pass (every 10 s), which keeps the guard


@pytest.fixture
def lab(make_kafka_cluster, pipeline, work_dir, report, unique_name):
    """Make the lab's cluster and fill a topic on broker 1 with more than broker 3's whole volume; then
    lab.fleet(**settings) starts the sidecars, stopped (with clean-up) after the test."""
    fleets = []

    class Lab:
        def __init__(self, generation: str):
            try:
                self.cluster = make_kafka_cluster(brokers=3, small_log_dirs=SMALL, broker_properties=BROKER_PROPERTIES,
                                                  **GENERATIONS[generation])
            except SmallFilesystemUnavailable as unavailable:
                pytest.skip(str(unavailable))
            report.sources.append(ClusterLogs(self.cluster))
            self.topic = f"{unique_name}-moved"
            create_topic(self.cluster, self.topic, {0: [1]})
            fill(self.cluster, self.topic, RECORDS * RECORD, work_dir / f"{self.topic}.log", RECORD)
            self.admin = ClusterAdmin({"bootstrap_servers": self.cluster.bootstrap_servers.split(",")})
            (self.small_dir,) = self.cluster.log_dirs(3)

        def fleet(self, **settings: str):
            return start_guard_fleet(self.cluster, pipeline, work_dir / unique_name, report, fleets, **settings)

        def move(self, *arguments: str) -> None:
            done = reassign_partitions(self.cluster.bootstrap_servers, {(self.topic, 0): [3]}, *arguments)
            assert done.returncode == 0, done.stderr or done.stdout

        def no_log_dir_offline(self) -> None:
            volumes = self.admin.describe_volumes([3], datetime.now(timezone.utc))
            assert not [volume for volume in volumes if volume.error], f"a log dir of broker 3 went offline: {volumes}"

    made = []
    yield lambda generation: made.append(Lab(generation)) or made[-1]
    for fleet in fleets:
        assert fleet.stop() == {1: 0, 2: 0, 3: 0}, "a sidecar failed its clean-up"
    for lab in made:  # nothing of the sidecars' left: the guard's rate went back to what was there
        try:
            eventually(lambda: assert_equal([broker_configs(lab.admin, b) for b in (1, 2, 3)], [{}, {}, {}]), 60)
        finally:  # here, not as a finalizer: those run before this, and a closed admin used again reconnects
            lab.admin.close()


@pytest.mark.parametrize("generation, throttle", [("kraft-4.4", None), ("kraft-4.4", HIGH_THROTTLE),
                                                  ("zookeeper-3.9", None)])
def test_a_move_larger_than_the_free_space_is_held_by_the_guard_before_the_volume_fills(lab, generation, throttle):
    """The guard goes in on the local verdict's path as the move nears the limit, before any replication pass
    could; the move is held there (it goes on in steps while passes find room, see local_guard.py) and the
    volume keeps room. Without the local guard the volume fills within seconds of --execute."""
    lab = lab(generation)
    admin, topic = lab.admin, lab.topic
    tool = ["--throttle", str(throttle)] if throttle else []
    fleet = lab.fleet()
    with FreeSpace(lab.small_dir) as free_space:
        lab.move("--execute", *tool)
        eventually(lambda: assert_equal(broker_configs(admin, 3, (FOLLOWER_RATE,)), {FOLLOWER_RATE: 1}), 30)
        eventually(lambda: _has("0:3", lists(admin, topic)[FOLLOWER_REPLICAS]), 30)
        time.sleep(HELD_FOR)  # what is checked is that the volume keeps room meanwhile
        assert [move.partition for move in admin.list_reassignments()] in ([0], []), "another move appeared"
    assert free_space.lowest > 0, "the volume filled"
    lab.no_log_dir_offline()
    assert "disk_guard: a local dir at or near the limit" in fleet[3].log_path.read_text(), \
        "the guard waited for a pass"
    print(f"\n{generation} throttle={throttle}: lowest free space {free_space.lowest / MiB:.1f} MiB "
          f"(limit {LIMIT / MiB:.0f} MiB)")
    lab.move("--cancel")  # as the operator would: the tool also clears the throttles it set
    eventually(lambda: assert_equal(admin.list_reassignments(), []), 60)


def test_a_move_the_guard_cannot_hold_is_cancelled_once_and_can_run_again(lab):
    """A guard rate an operator chose so that moves slow down rather than stop (20 MB/s): the free space keeps
    falling under it, and the move is cancelled before the volume fills: once, recorded, shown."""
    lab = lab("kraft-4.4")
    admin, topic, small_dir = lab.admin, lab.topic, lab.small_dir
    fleet = lab.fleet(**{"replication.disk.guard.rate.bytes.per.second": str(SLOW_GUARD)})
    with FreeSpace(small_dir) as free_space:
        lab.move("--execute")
        eventually(lambda: assert_equal(admin.list_reassignments(), []), 300)
    assert free_space.lowest > 0, "the volume filled"
    lab.no_log_dir_offline()
    # The controller lists no reassignment a moment before the brokers' metadata has the replicas it went back to.
    eventually(lambda: assert_equal(admin.describe_partitions([topic])[(topic, 0)].replicas, (1,)), 10)  # cancelled
    sidecar = fleet[3]
    warnings = [line for line in sidecar.log_path.read_text().splitlines()
                if "cancelled the moves adding replicas to" in line]
    assert len(warnings) == 1 and f"{topic}-0 (to [3])" in warnings[0], warnings
    (shown,) = eventually(lambda: cancelled_in_status(sidecar), 30)
    assert (shown["topic"], shown["partition"], shown["log_dir"]) == (topic, 0, small_dir), shown
    assert sidecar.metrics()["quota_sidecar_moves_cancelled_total"] == 1
    print(f"\nlowest free space {free_space.lowest / MiB:.1f} MiB (limit {LIMIT / MiB:.0f} MiB)")

    # Once the dir has room and no cordon, the operator runs it again: what is left of the partition fits.
    _delete_records_before(lab.cluster, topic, RECORDS - 40)
    eventually(lambda: assert_equal(admin.describe_configs("broker", [3], [CORDONED_LOG_DIRS])["3"]
                             .get(CORDONED_LOG_DIRS) or "", ""), 180)
    lab.move("--execute")
    eventually(lambda: assert_equal(admin.describe_partitions([topic])[(topic, 0)].replicas, (3,)), 300)
    assert len([line for line in sidecar.log_path.read_text().splitlines()
                if "cancelled the moves adding replicas to" in line]) == 1


def _has(entry: str, entries: set[str]) -> bool:
    assert entry in entries, entries
    return True


def _delete_records_before(cluster, topic: str, offset: int) -> None:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        client.delete_records({TopicPartition(topic, 0): offset})
    finally:
        client.close()
