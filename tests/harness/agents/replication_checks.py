"""What the replication-throttle tests (tests/integration/replication_throttles/) share: the sidecars' settings,
the real CLI, and reading what the cluster and the sidecars' records hold (the lab: not installed).

Every check here is for `eventually()`: it fails with an AssertionError until the cluster holds what a test wants.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from harness import waiting
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.agents.sidecar_process import EXECUTABLE, SidecarFleet, SidecarProcess
from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from quota_sidecar.kafka_clients.admin import ClusterAdmin

PREFIX = "client.quota.callback.static."
TOKEN = "replication-test-token"
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
# The tests' sidecars: rates between the floor and 90 % (the default max percent) of the capacity,
# wherever in that range this host's network use puts them. Either way a 3 MiB partition takes a minute.
CAPACITY, MIN_RATE = 40_000, 10_000
MAX_RATE = CAPACITY * 90 // 100
MOVE_BYTES = 3 << 20
# A throttled fetch brings at most this much of a partition before the quota is checked again (KIP-73
# is optimistic; Kafka's default is 1 MiB): a throttled move advances in small steps.
BROKER_PROPERTIES = {"replica.fetch.max.bytes": str(64 << 10)}
REACTION = 150  # s: a few passes of every sidecar, on 2 cores shared with other clusters


# ---------------------------------------------------------------- sidecar processes


def fleet_of(cluster: LocalKafkaCluster, pipeline: dict, work_dir: Path, report, **settings: str) -> SidecarFleet:
    """One sidecar per broker, all with the same settings, their logs in a failed test's report."""
    fleet = SidecarFleet(cluster.broker_ids, work_dir,
                         lambda broker: sidecar_properties(cluster, broker, pipeline, settings))
    report.sources += list(fleet)
    return fleet


def sidecar_properties(cluster: LocalKafkaCluster, broker: int, pipeline: dict, settings: dict) -> dict[str, str]:
    return {
        "node.id": str(broker),
        PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT3S",  # with replication passes in between
        PREFIX + "replication.check.interval": "PT1S",
        PREFIX + "storage.per.volume.limit.min.available.bytes": "1",
        PREFIX + "api.token": TOKEN,
        **pipeline,
        PREFIX + "replication.capacity.bytes.per.second": str(CAPACITY),
        PREFIX + "replication.min.rate.bytes.per.second": str(MIN_RATE),
        PREFIX + "replication.network.window": "PT5S",
        **{PREFIX + key.replace("_", "."): value for key, value in settings.items()},
    }


def cli(*args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "QUOTA_SIDECAR_API_TOKEN"}
    if token is not None:
        env["QUOTA_SIDECAR_API_TOKEN"] = token
    return subprocess.run([str(EXECUTABLE), *args], capture_output=True, text=True, env=env, timeout=120)


# ---------------------------------------------------------------- what the cluster holds


def eventually(check, timeout: float = REACTION):
    """check()'s result once it stops failing; after `timeout` seconds its last failure is the test's."""
    return waiting.eventually(lambda: [check()], timeout, retry_on=(AssertionError, RetryableAdminError))[0]


def lists(admin: ClusterAdmin, topic: str) -> dict[str, set[str]]:
    """The topic's throttled-replica lists in force; an empty list for a key unset or set to ''."""
    found = admin.describe_configs("topic", [topic], [LEADER_REPLICAS, FOLLOWER_REPLICAS])[topic]
    return {key: {entry for entry in (found.get(key) or "").split(",") if entry}
            for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}


def broker_configs(admin: ClusterAdmin, broker: int, keys=RATE_KEYS) -> dict[str, int]:
    """The given keys set dynamically on the broker itself."""
    found = admin.describe_configs("broker", [broker], list(keys))[str(broker)]
    return {key: int(value) for key, value in found.items() if value is not None}


def sidecar_records(store: ClusterStore) -> dict[tuple, dict]:
    """What the sidecars remember having written (list entries, broker configs), from their cluster store."""
    records = {}
    for key, value in store.read_all().items():
        kind, *target = json.loads(key)
        if kind in ("entries", "config"):
            records[(kind, *target)] = value
    return records


def assert_throttled(admin: ClusterAdmin, broker: int, key: str) -> None:
    """The broker has this one rate key set, to a rate the sidecars' settings allow."""
    rates = broker_configs(admin, broker)
    assert list(rates) == [key] and MIN_RATE <= rates[key] <= MAX_RATE, (broker, rates)


def own_status(sidecar: SidecarProcess) -> dict:
    """The status row of the sidecar's own broker."""
    (row,) = sidecar.status()["replication"]["brokers"]
    return row


def create_topic(cluster: LocalKafkaCluster, name: str, assignments: dict[int, list[int]]) -> None:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        client.create_topics([NewTopic(name, replica_assignments=assignments)])
    finally:
        client.close()


def delete_topic(cluster: LocalKafkaCluster, name: str) -> None:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        client.delete_topics([name])
    finally:
        client.close()


def produce(cluster: LocalKafkaCluster, topic: str, partitions, size: int = MOVE_BYTES) -> None:
    """`size` bytes of incompressible 16 KiB records into each partition."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=20,
                             batch_size=64 << 10)
    try:
        record = os.urandom(16 << 10)
        for partition in partitions:
            for _ in range(size // len(record)):
                producer.send(topic, record, partition=partition)
        producer.flush(timeout=120)
    finally:
        producer.close()


@contextmanager
def broker_down(cluster: LocalKafkaCluster, broker: int):
    """The broker is stopped inside the block and serving again after it."""
    cluster.stop_broker(broker)
    try:
        yield
    finally:
        cluster.start_broker(broker)


def moving(admin: ClusterAdmin, topic: str) -> list[int]:
    return [move.partition for move in admin.list_reassignments() if move.topic == topic]


# ---------------------------------------------------------------- helpers for eventually()


def assert_equal(actual, expected):
    """`actual` if it equals `expected`: the check of eventually(lambda: assert_equal(read(), expected)), whose
    failure then names both."""
    assert actual == expected, f"{actual!r} != {expected!r}"
    return actual
