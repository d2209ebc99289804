"""A copy between a broker's own log dirs cannot fill a disk either (AlterReplicaLogDirs, JBOD): Kafka's reassign
tool moves a partition larger than the free space from the broker's large dir into its small one (a `log_dirs`
target, the broker unchanged), beside a sidecar at its default intervals.

Kafka throttles such copies by one broker rate, `replica.alter.log.dirs.io.max.bytes.per.second`, with no list of
replicas. The guard writes it on the local verdict's path as the small dir nears the limit, and every pass keeps it
while the dir is at risk; a guard that cannot hold sends the copy back to the dir the replica is in (Kafka drops
the copy), as `kafka-reassign-partitions --cancel` does. Without the guard the copy fills the dir within a second
and Kafka takes the whole dir offline.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from harness.cluster.kafka_tools import reassign_partitions
from harness.cluster.local_cluster import GENERATIONS, SmallFilesystemUnavailable
from harness.agents.move_guard_lab import (BROKER_PROPERTIES, LIMIT, SLOW_GUARD, VOLUME, FreeSpace, cancelled_in_status,
                                    fill, start_guard_fleet)
from harness.agents.replication_checks import broker_configs, create_topic, assert_equal, eventually
from quota_sidecar.act.replication import DIR_COPY_GUARD
from quota_sidecar.decide.cordons import KEY as CORDONED_LOG_DIRS
from quota_sidecar.decide.throttles import DIR_COPY_RATE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

from .conftest import ClusterLogs

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]

MiB = 1 << 20
RECORD = 1_000_000
RECORDS = (VOLUME + 40 * MiB) // RECORD  # in the large dir: more than the small dir's whole volume
HIGH_THROTTLE = 1_000_000_000  # the tool's --replica-alter-log-dirs-throttle "just in case"
HELD_FOR = 12  # s: a replication pass (every 10 s), which keeps the guard
BROKER = 1


@pytest.fixture
def lab(make_kafka_cluster, pipeline, work_dir, report, unique_name):
    """One broker with two log dirs, the second a small filesystem, and a topic filled in the first with more than
    the second holds; then lab.fleet(**settings) starts its sidecar, stopped (with clean-up) after the test."""
    fleets, made = [], []

    class Lab:
        def __init__(self, generation: str):
            try:
                self.cluster = make_kafka_cluster(brokers=1, log_dirs={BROKER: 2}, small_log_dirs={(BROKER, 1): VOLUME},
                                                  broker_properties=BROKER_PROPERTIES, **GENERATIONS[generation])
            except SmallFilesystemUnavailable as unavailable:
                pytest.skip(str(unavailable))
            report.sources.append(ClusterLogs(self.cluster))
            self.admin = ClusterAdmin({"bootstrap_servers": self.cluster.bootstrap_servers.split(",")})
            self.large_dir, self.small_dir = self.cluster.log_dirs(BROKER)
            self.topic = f"{unique_name}-copied"
            create_topic(self.cluster, self.topic, {0: [BROKER]})
            self.move(self.large_dir, "--execute")  # a new replica may land in either dir: in the large one first
            eventually(lambda: assert_equal(self.current_dir(), self.large_dir), 60)
            fill(self.cluster, self.topic, RECORDS * RECORD, work_dir / f"{self.topic}.log", RECORD)

        def fleet(self, **settings: str):
            return start_guard_fleet(self.cluster, pipeline, work_dir / unique_name, report, fleets, **settings)

        def move(self, log_dir: str, *arguments: str) -> None:
            done = reassign_partitions(self.cluster.bootstrap_servers, {(self.topic, 0): [BROKER]}, *arguments,
                                       log_dirs={(self.topic, 0): [log_dir]})
            assert done.returncode == 0, done.stderr or done.stdout

        def current_dir(self) -> str | None:
            assert not self.admin.describe_dir_moves(BROKER), "a copy between the dirs is under way"
            return self.admin.describe_replicas(BROKER, {self.topic: [0]})[(self.topic, 0)][0]

        def no_log_dir_offline(self) -> None:
            volumes = self.admin.describe_volumes([BROKER], datetime.now(timezone.utc))
            assert not [volume for volume in volumes if volume.error], f"a log dir went offline: {volumes}"

    yield lambda generation: made.append(Lab(generation)) or made[-1]
    for fleet in fleets:
        assert fleet.stop() == {BROKER: 0}, "the sidecar failed its clean-up"
    for lab in made:  # nothing of the sidecar's left: the guard's rate went back to what was there
        try:
            eventually(lambda: assert_equal(broker_configs(lab.admin, BROKER, (DIR_COPY_RATE,)), {}), 60)
        finally:
            lab.admin.close()


@pytest.mark.parametrize("generation, throttle", [("kraft-4.4", None), ("zookeeper-3.9", HIGH_THROTTLE)])
def test_a_copy_between_dirs_larger_than_the_free_space_is_held_by_the_guard_before_the_volume_fills(
        lab, generation, throttle):
    """The guard writes the broker's copy rate from the local path as the small dir nears the limit (over the
    tool's own rate when it set one); the copy is held there and the dir keeps room."""
    lab = lab(generation)
    admin, topic = lab.admin, lab.topic
    tool = ["--replica-alter-log-dirs-throttle", str(throttle)] if throttle else []
    fleet = lab.fleet()
    with FreeSpace(lab.small_dir) as free_space:
        lab.move(lab.small_dir, "--execute", *tool)
        eventually(lambda: assert_equal(broker_configs(admin, BROKER, (DIR_COPY_RATE,)), {DIR_COPY_RATE: 1}), 30)
        time.sleep(HELD_FOR)  # what is checked is that the dir keeps room meanwhile
        assert list(admin.describe_dir_moves(BROKER)) == [(topic, 0)], "the copy ended or was sent back"
    assert free_space.lowest > 0, "the small dir filled"
    lab.no_log_dir_offline()
    assert DIR_COPY_GUARD in fleet[BROKER].log_path.read_text(), "the guard waited for a pass"
    print(f"\n{generation} throttle={throttle}: lowest free space {free_space.lowest / MiB:.1f} MiB "
          f"(limit {LIMIT / MiB:.0f} MiB)")
    lab.move(lab.small_dir, "--cancel")  # as the operator would: the tool sends the copy back, clears its throttles
    eventually(lambda: assert_equal(lab.current_dir(), lab.large_dir), 60)


def test_a_copy_between_dirs_the_guard_cannot_hold_is_sent_back_once_and_can_run_again(lab):
    """A guard rate chosen so that copies slow down rather than stop (20 MB/s): the free space keeps falling under
    it, and the copy is sent back to the large dir before the small one fills: once, recorded, shown."""
    lab = lab("kraft-4.4")
    admin, topic = lab.admin, lab.topic
    fleet = lab.fleet(**{"replication.disk.guard.rate.bytes.per.second": str(SLOW_GUARD)})
    with FreeSpace(lab.small_dir) as free_space:
        lab.move(lab.small_dir, "--execute")
        eventually(lambda: assert_equal(admin.describe_dir_moves(BROKER), {}), 300)
    assert free_space.lowest > 0, "the small dir filled"
    lab.no_log_dir_offline()
    assert lab.current_dir() == lab.large_dir, "the copy was not sent back"
    sidecar = fleet[BROKER]
    warnings = [line for line in sidecar.log_path.read_text().splitlines()
                if "cancelled the moves adding replicas to" in line]
    assert len(warnings) == 1 and f"{topic}-0 (from {lab.large_dir})" in warnings[0], warnings
    (shown,) = eventually(lambda: cancelled_in_status(sidecar), 30)
    assert (shown["topic"], shown["log_dir"], shown["from_log_dir"]) == (topic, lab.small_dir, lab.large_dir), shown
    assert sidecar.metrics()["quota_sidecar_moves_cancelled_total"] == 1
    print(f"\nlowest free space {free_space.lowest / MiB:.1f} MiB (limit {LIMIT / MiB:.0f} MiB)")

    # Once what is left of the partition fits and the dir is no longer cordoned, the operator runs it again.
    client = KafkaAdminClient(bootstrap_servers=lab.cluster.bootstrap_servers)
    try:
        client.delete_records({TopicPartition(topic, 0): RECORDS - 40})
    finally:
        client.close()
    eventually(lambda: assert_equal(admin.describe_configs("broker", [BROKER], [CORDONED_LOG_DIRS])[str(BROKER)]
                             .get(CORDONED_LOG_DIRS) or "", ""), 180)
    lab.move(lab.small_dir, "--execute")
    eventually(lambda: assert_equal(lab.current_dir(), lab.small_dir), 300)
    assert len([line for line in sidecar.log_path.read_text().splitlines()
                if "cancelled the moves adding replicas to" in line]) == 1
