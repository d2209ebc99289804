"""The history and the capacity report on a real cluster: an agent beside a broker whose log dir fills
in retention's sawtooth while it grows underneath, the aggregator appending what the agent observes to its
history, and `quota-sidecar report --json` giving that growth.

The broker's one log dir is a small filesystem holding two topics Kafka's ProducerPerformance writes: `cycling`
(retention.bytes 8 MiB in 2 MiB segments at 0.5 MB/s, the broker checking retention every second: a 4-second sawtooth)
and `growing` (no retention): the disk's net growth is `growing`'s, measured from its segments' sizes. The
pipeline (observations, decisions) is on the session's cluster, so that its topics do not grow the small disk.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from harness.spark.aggregator import Aggregator
from harness.cluster.disk import replica_bytes
from harness.cluster.kafka_tools import producer_performance
from harness.agents.sidecar_process import EXECUTABLE, SidecarProcess
from quota_sidecar.configuration.properties import PREFIX

pytestmark = [pytest.mark.integration, pytest.mark.capacity]
MiB = 1 << 20
FLOW_SECONDS = 120.0
DAY = 86400.0
# The forecast's own error on this history: the peaks' regression over some 30 cycles, against the slope of
# `growing`'s segments over the same time (what else grows on the disk: indexes, the records topic, is small).
TOLERANCE = 0.15


def test_the_history_holds_the_observations_and_the_report_gives_the_growth_under_the_sawtooth(
        make_kafka_cluster, kafka_cluster, unique_name, tmp_path):
    watched = make_kafka_cluster(brokers=1, small_log_dirs={(1, 0): 256 * MiB}, broker_properties={
        "log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "0", "file.delete.delay.ms": "0"})
    small_dir = watched.log_dirs(1)[0]
    pipeline = {"pipeline.bootstrap.servers": kafka_cluster.bootstrap_servers,
                **{f"pipeline.{kind}.topic": f"{unique_name}-{kind}" for kind in ("observations", "decisions",
                                                                                 "heartbeats")}}
    history = tmp_path / "history"
    with KafkaAdminClient(bootstrap_servers=watched.bootstrap_servers) as admin:
        admin.create_topics([
            NewTopic("cycling", 1, 1, topic_configs={"retention.bytes": str(8 * MiB), "segment.bytes": str(2 * MiB)}),
            NewTopic("growing", 1, 1, topic_configs={"retention.ms": "-1", "segment.bytes": str(2 * MiB)})])
    aggregator = Aggregator(kafka_cluster.bootstrap_servers, tmp_path / "aggregator", **pipeline, **{
        "history.location": history, "history.interval": "PT5S"})
    agent = SidecarProcess("agent", tmp_path, {
        "node.id": 1, PREFIX + "kafka.admin.bootstrap.servers": watched.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT1S", PREFIX + "storage.local.log.dirs": small_dir,
        PREFIX + "storage.per.volume.limit.min.available.bytes": str(16 * MiB),
        **{PREFIX + key: value for key, value in pipeline.items()}})
    with aggregator, agent:
        agent.wait_ready()
        producers = [producer_performance(watched.bootstrap_servers, topic, 10**9, 1000, rate,
                                          tmp_path / f"{topic}.log") for topic, rate in (("cycling", 500),
                                                                                         ("growing", 100))]
        try:
            time.sleep(10)  # both producers flowing
            first = (time.monotonic(), replica_bytes(small_dir, "growing", 0))
            time.sleep(FLOW_SECONDS)
            last = (time.monotonic(), replica_bytes(small_dir, "growing", 0))
        finally:
            for producer in producers:
                producer.send_signal(signal.SIGTERM)
                producer.wait(30)
        time.sleep(10)  # the last append
    true_growth = (last[1] - first[1]) / (last[0] - first[0]) * DAY

    assert any(history.rglob("*.parquet")), "the aggregator appended nothing to the history"
    done = subprocess.run([str(EXECUTABLE), "report", "--history", str(history), "--since", "ALL", "--json", "-",
                           "--out", str(tmp_path / "report"),
                           "--set", f"storage.per.volume.limit.min.available.bytes={16 * MiB}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [volume] = [v for v in json.loads(done.stdout)["volumes"] if v["log_dir"] == small_dir]
    print(f"growth {volume['growth_bytes_per_day'] / 1e6:.0f} MB/day by {volume['method']} over "
          f"{volume['cycles']} cycles ({volume['observations']} observations); growing's own "
          f"{true_growth / 1e6:.0f} MB/day; band {volume['growth_band_bytes_per_day']}")
    assert volume["broker"] == 1 and volume["observations"] >= FLOW_SECONDS / 2  # about one a second
    assert volume["method"] == "peaks" and volume["cycles"] >= 10, volume  # the sawtooth seen as such
    assert volume["growth_bytes_per_day"] == pytest.approx(true_growth, rel=TOLERANCE), volume
    assert volume["filling"] and volume["limit_at"] is not None
