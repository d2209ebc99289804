"""The soft zone on a real cluster: midway between the soft and the hard limit, producers get half of `produce`.

Broker 3's only log dir is a tmpfs filled to midway between the limits before the sidecar starts; then
Kafka's own producer sends at full speed, and what the broker accepts (the partition's end offset, read
over several seconds) is measured against the quota the sidecar scaled.
"""

from __future__ import annotations

import signal
import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness.disk import free_bytes
from harness.kafka_tools import producer_performance
from harness.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.admin import ClusterAdmin
from quota_sidecar.properties import PREFIX
from quota_sidecar.quotas import PRODUCE

pytestmark = pytest.mark.integration
MiB = 1 << 20
FILESYSTEM, HARD, SOFT = 512 * MiB, 32 * MiB, 352 * MiB
PRODUCE_RATE = 2 * MiB  # bytes/s per principal and broker, before scaling
RECORD = 16 << 10
FLOOD = {"acks": "all", "linger.ms": 5, "batch.size": 64 << 10, "compression.type": "none"}


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partition = TopicPartition(topic, 0)
        return consumer.end_offsets([partition])[partition]
    finally:
        consumer.close()


def test_midway_between_the_limits_a_producer_gets_about_half_its_quota(make_kafka_cluster, unique_name, tmp_path):
    cluster = make_kafka_cluster(small_log_dirs={(3, 0): FILESYSTEM},
                                 broker_properties={"log.segment.bytes": str(32 * MiB)})
    small_dir, topic = cluster.log_dirs(3)[0], unique_name
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [3]})])
    midway = (HARD + SOFT) // 2
    to_fill = (free_bytes(small_dir) - midway) // RECORD
    filler = producer_performance(cluster.bootstrap_servers, topic, to_fill, RECORD, -1, tmp_path / "fill.log",
                                  **FLOOD)
    assert filler.wait(300) == 0, (tmp_path / "fill.log").read_text()[-2000:]

    sidecar = SidecarProcess("sidecar-3", tmp_path, {
        "node.id": 3, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.per.volume.limit.min.available.bytes": HARD,
        PREFIX + "storage.per.volume.soft.limit.min.available.bytes": SOFT,
        PREFIX + "produce": PRODUCE_RATE, PREFIX + "storage.check.interval": "PT1S"})
    with sidecar, ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        sidecar.wait_ready()
        quota = eventually(lambda: admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE), 60,
                           "a scaled producer quota")
        expected_factor = (free_bytes(small_dir) - HARD) / (SOFT - HARD)
        assert quota == pytest.approx(PRODUCE_RATE * expected_factor, rel=0.1)
        producer = producer_performance(cluster.bootstrap_servers, topic, 10 ** 6, RECORD, -1,
                                        tmp_path / "producer.log", **FLOOD)
        try:
            time.sleep(4)  # past the first quota window, where a burst gets through before throttling
            first, started = end_offset(cluster.bootstrap_servers, topic), time.monotonic()
            time.sleep(10)
            last, ended = end_offset(cluster.bootstrap_servers, topic), time.monotonic()
            quota_after = admin.describe_user_quotas([None])[None][PRODUCE]
        finally:
            producer.send_signal(signal.SIGTERM)
            producer.wait(30)
    accepted = (last - first) * RECORD / (ended - started)
    scaled = (quota + quota_after) / 2  # the factor falls a little as the producer fills the disk
    print(f"quota {quota:.0f} -> {quota_after:.0f} B/s (factor about {scaled / PRODUCE_RATE:.2f}); "
          f"accepted {accepted:.0f} B/s")
    assert 0.3 < scaled / PRODUCE_RATE < 0.7, "not midway between the limits"
    assert accepted == pytest.approx(scaled, rel=0.3)
