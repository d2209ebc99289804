"""The soft zone on a real cluster: midway between the soft and the hard limit, producers get half of `produce`.

Broker 3's only log dir is a tmpfs filled to midway between the limits before the sidecar starts; then
Kafka's own producer sends at full speed, and what the broker accepts (the partition's end offset, read
every half second) is measured against the quota the sidecar scaled, as the slope after the quota's first
window: a quota lets about ten seconds of its rate through at once, then holds (harness/clients/quota_window.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from harness.cluster.disk import free_bytes
from harness.clients.end_offsets import EndOffsets
from harness.cluster.kafka_tools import producer_performance
from harness.clients.quota_window import BAND, QUOTA_WINDOW_SECONDS, slope
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = pytest.mark.integration
MiB = 1 << 20
FILESYSTEM, HARD, SOFT = 512 * MiB, 32 * MiB, 352 * MiB
PRODUCE_RATE = 2 * MiB  # bytes/s per principal and broker, before scaling
RECORD = 16 << 10
MEASURED = 14  # s of the held rate, after the quota's first window
FLOOD = {"acks": "all", "linger.ms": 5, "batch.size": 64 << 10, "compression.type": "none"}


def test_midway_between_the_limits_a_producer_gets_about_half_its_quota(make_kafka_cluster, pipeline, unique_name,
                                                                      tmp_path):
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
        PREFIX + "produce": PRODUCE_RATE, PREFIX + "storage.check.interval": "PT1S", **pipeline})
    with sidecar, ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        sidecar.wait_ready()
        quota = eventually(lambda: admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE), 60,
                           "a scaled producer quota")
        expected_factor = (free_bytes(small_dir) - HARD) / (SOFT - HARD)
        assert quota == pytest.approx(PRODUCE_RATE * expected_factor, rel=0.1)
        with EndOffsets(cluster.bootstrap_servers, topic) as offsets:
            producer = producer_performance(cluster.bootstrap_servers, topic, 10 ** 6, RECORD, -1,
                                            tmp_path / "producer.log", **FLOOD)
            try:
                started = eventually(lambda: offsets.first_growth(), 60, "the producer's first records")
                time.sleep(QUOTA_WINDOW_SECONDS + MEASURED)
                quota_after = admin.describe_user_quotas([None])[None][PRODUCE]
            finally:
                producer.send_signal(signal.SIGTERM)
                producer.wait(30)
    held = [(at - started, offset * RECORD) for at, offset in offsets.samples
            if at - started >= QUOTA_WINDOW_SECONDS + 1]
    accepted = slope(held)
    scaled = (quota + quota_after) / 2  # the factor falls a little as the producer fills the disk
    print(f"quota {quota:.0f} -> {quota_after:.0f} B/s (factor about {scaled / PRODUCE_RATE:.2f}); "
          f"accepted {accepted:.0f} B/s over {held[-1][0] - held[0][0]:.0f} s")
    assert 0.3 < scaled / PRODUCE_RATE < 0.7, "not midway between the limits"
    assert BAND[0] * scaled <= accepted <= BAND[1] * scaled, \
        f"accepted {accepted:.0f} B/s under a quota of {scaled:.0f} B/s (load average {os.getloadavg()[0]:.1f})"
