"""Cordoned log dirs (KIP-1066) on a real Kafka 4.4 cluster: a violating dir is cordoned, new replicas go to the
other dirs, and the entry goes once the dir recovers; an operator's own entry stays throughout."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from harness.waiting import equal, eventually
from quota_sidecar.common import records
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide.cordons import KEY
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.wiring import build_sidecar

pytestmark = pytest.mark.integration
MiB = 1 << 20


def sidecar_of_broker_3(pipeline: dict, bootstrap: str, min_available_bytes: int):
    return build_sidecar(cfg.from_properties({
        cfg.PREFIX + "kafka.admin.bootstrap.servers": bootstrap, cfg.PREFIX + "broker.id": "3",
        cfg.PREFIX + "storage.per.volume.limit.min.available.bytes": str(min_available_bytes), **pipeline}))


def cordoned(admin: ClusterAdmin) -> set[str]:
    """Broker 3's cordoned.log.dirs as the broker itself describes it."""
    value = admin.describe_configs("broker", [3], [KEY])["3"].get(KEY) or ""
    return {entry for entry in value.split(",") if entry}


def replica_dirs(client: KafkaAdminClient, topic: str) -> dict[str, list[int]]:
    """log dir -> the partitions of `topic` it holds on broker 3, as DescribeLogDirs reports them."""
    dirs = client.describe_log_dirs([topic], brokers=[3])[0]["log_dirs"]
    return {d["log_dir"]: sorted(p["partition_index"] for t in d["topics"] for p in t["partitions"]) for d in dirs}


def create_on_broker_3(client: KafkaAdminClient, topic: str, partitions: int) -> None:
    client.create_topics([NewTopic(topic, replica_assignments={p: [3] for p in range(partitions)})])
    client.wait_for_topics([topic], timeout_ms=30000)


def test_cordoning_follows_a_violating_dir_on_kafka_4_4(make_kafka_cluster, pipeline, sidecars, unique_name):
    cluster = make_kafka_cluster(log_dirs={3: 3}, small_log_dirs={(3, 0): 16 * MiB})
    small, free, operators = cluster.log_dirs(3)
    admin = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers})
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        # Without a cordon Kafka spreads new replicas over every dir, the small one included.
        create_on_broker_3(client, f"{unique_name}-before", partitions=3)
        eventually(lambda: replica_dirs(client, f"{unique_name}-before")[small], 15, "a replica in the small dir")
        admin.incremental_alter_configs("broker", 3, {KEY: ("APPEND", operators)})  # the operator's own entry

        first = sidecar_of_broker_3(pipeline, cluster.bootstrap_servers, min_available_bytes=32 * MiB)  # 16 MiB violates
        sidecars.append(first)
        decision = first.run_pass()
        reported = [v.log_dir for v in decision.volumes if v.broker_id == 3 and v.total_bytes <= 16 * MiB]
        assert [v["log_dir"] for v in decision.violations] == reported == [small], decision.error
        equal(lambda: cordoned(admin), {small, operators})  # the path exactly as DescribeLogDirs reported it
        described = client.describe_log_dirs([], brokers=[3])[0]["log_dirs"]
        assert {d["log_dir"] for d in described if d.get("is_cordoned")} == {small, operators}
        assert first.snapshot().cordons.by_sidecar == (small,)

        create_on_broker_3(client, f"{unique_name}-after", partitions=4)

        def placed() -> tuple[list[int], ...]:  # the broker creates the logs a moment after the topic
            found = replica_dirs(client, f"{unique_name}-after")
            return found[free], found[small], found[operators]

        equal(placed, ([0, 1, 2, 3], [], []))

        # The dir recovers (the limit is lowered) under a restarted sidecar: it knows its entry from its record.
        first.close()
        sidecars.remove(first)
        second = sidecar_of_broker_3(pipeline, cluster.bootstrap_servers, min_available_bytes=1 * MiB)
        sidecars.append(second)
        assert second.run_pass().violations == ()
        equal(lambda: cordoned(admin), {operators})
        assert records.cordoned(records.parse(second.store.read_all()), 3) == {}
        assert second.snapshot().cordons.in_force == (operators,)
    finally:
        client.close()
        admin.close()
