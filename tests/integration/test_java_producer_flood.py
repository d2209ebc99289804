"""Protection that outruns a producer: Kafka's own Java producer at full speed, the default check interval.

A real `quota-sidecar run` beside broker 3 watches broker 3's log dir, a small tmpfs, with statvfs. The
flood crosses the margin above the limit in a second or two; the next regular pass would come a minute
later. The local watch must start a pass in time: the filesystem never fills, the log dir stays online,
and every record the producer saw acknowledged is read back.

With the aggregator killed (SIGKILL) as the flood begins, the local verdict alone keeps the disk from filling,
the failed polls keep the factor of 0 on its timeline, and the decisions come back once it has restarted.
With the agent beside broker 3 stopped (SIGSTOP), the agent beside broker 1 covers broker 3 (heartbeats,
DescribeLogDirs every cover.interval) and writes the quota.

The full-speed flood runs on Kafka 4.4 in KRaft mode and on Kafka 3.2 in ZooKeeper mode, whose
DescribeLogDirs has no sizes (before KIP-827): there the sidecar knows broker 3's volume only from the znode
it publishes itself (zookeeper.connect), which follows the local watch's samples.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from harness.cluster.disk import DiskSampler
from harness.cluster.kafka_tools import acknowledged_so_far, producer_performance, read_back
from harness.cluster.local_cluster import BEFORE_KIP_827, BEFORE_KIP_827_NAME, GENERATIONS
from harness.agents.sidecar_process import LogLine, SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = pytest.mark.integration
MiB = 1 << 20
# The reserve below the limit: what the producer may still write once it crosses, ~2 s of a full-speed flood.
# The sample that shows the crossing brings the quota without waiting for a pass (0.1-0.2 s after the crossing
# here with the machine's two cores loaded to 9); without the local watch the next pass would come a minute
# later and fill it.
LIMIT = 256 * MiB
FILESYSTEM = LIMIT + 160 * MiB  # a margin a full-speed Java producer crosses in 1.5–5 s on this machine
RECORD = 16 << 10
FLOOD = {"acks": "all", "linger.ms": 5, "batch.size": 256 << 10, "max.in.flight.requests.per.connection": 5,
         "compression.type": "none", "delivery.timeout.ms": 30000, "request.timeout.ms": 20000}


# The generations the full-speed flood runs on: the newest, and the one whose volumes come from znodes only.
FLOODED = {"kraft-4.4": GENERATIONS["kraft-4.4"], BEFORE_KIP_827_NAME: BEFORE_KIP_827}


@pytest.fixture
def flooded_broker(make_kafka_cluster, unique_name, tmp_path, request):
    """Kafka 4.4 KRaft, or the generation the test is parametrized with (indirect)."""
    cluster = make_kafka_cluster(**FLOODED[getattr(request, "param", "kraft-4.4")], small_log_dirs={(3, 0): FILESYSTEM},
                                 broker_properties={"log.segment.bytes": str(32 * MiB), "log.segment.delete.delay.ms": "1000"})
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(unique_name, replica_assignments={0: [3]})])
    return cluster, cluster.log_dirs(3)[0], unique_name


def sidecar_beside_broker_3(cluster, pipeline: dict, small_dir: str, work_dir: Path, **keys) -> SidecarProcess:
    """Default check interval (PT1M); the local watch on broker 3's dir, as a read-only mount would give it.
    On a ZooKeeper-mode cluster the sidecar publishes and reads the znode volumes too."""
    zookeeper = {} if not cluster.zookeeper_mode else {
        "zookeeper.connect": cluster.zookeeper_connect, "storage.cordon.log.dirs": "false"}  # cordons: Kafka >= 4.3
    properties = {"node.id": 3, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
                  PREFIX + "storage.local.log.dirs": small_dir,
                  PREFIX + "storage.per.volume.limit.min.available.bytes": LIMIT,
                  PREFIX + "produce": 1 << 30, **pipeline,
                  **{PREFIX + key: value for key, value in {**zookeeper, **keys}.items()}}
    return SidecarProcess("sidecar-3", work_dir, properties)


def full_speed_until_throttled(sidecar: SidecarProcess, cluster, topic: str, output: Path, started: float) -> LogLine:
    """Kafka's Java producer at full speed until `sidecar` writes the quota of 1 B/s, and 5 s more (what is still
    in flight lands, or not)."""
    producer = producer_performance(cluster.bootstrap_servers, topic, 2 * FILESYSTEM // RECORD, RECORD, -1, output,
                                    reporting_interval_ms=500, **FLOOD)
    try:
        throttled = sidecar.wait_for_line(r"producer_byte_rate: \S+ -> 1$", timeout=120, after=started)
        time.sleep(5)
    finally:
        producer.send_signal(signal.SIGTERM)
        producer.wait(30)
    return throttled


def assert_online_and_every_acknowledged_record_read(cluster, small_dir: str, topic: str, output: Path) -> None:
    with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        [volume] = [v for v in admin.describe_volumes([3], datetime.now(timezone.utc)) if v.log_dir == small_dir]
    assert volume.error is None, f"the log dir went offline: {volume.error}"
    # acks=all on one replica: every acknowledged record is below the high watermark. ProducerPerformance
    # prints its acknowledgements every half second, so its count is a lower bound (short by the last one).
    acknowledged = acknowledged_so_far(output.read_text())
    read, high_watermark = read_back(cluster.bootstrap_servers, topic)
    assert acknowledged > 0 and read == high_watermark >= acknowledged, (read, high_watermark, acknowledged)


@pytest.mark.parametrize("flooded_broker", list(FLOODED), indirect=True)
def test_a_java_producer_at_full_speed_never_fills_the_disk_at_the_default_interval(flooded_broker, pipeline, tmp_path):
    """...and once the topic is deleted, the pass the watch asks for as the dir leaves the limit lifts the throttle."""
    cluster, small_dir, topic = flooded_broker
    sidecar = sidecar_beside_broker_3(cluster, pipeline, small_dir, tmp_path)
    with sidecar:
        sidecar.wait_ready()
        [before] = [v for v in sidecar.status()["volumes"] if v["log_dir"] == small_dir]
        assert before["total_bytes"] > 0, before  # on Kafka 3.2, from the sidecar's own znode
        output = tmp_path / "producer.log"
        with DiskSampler(small_dir, every=0.01) as free:
            started = time.monotonic()
            throttled = full_speed_until_throttled(sidecar, cluster, topic, output, started)
        local = sidecar.first_line(r"pass now: local dir", after=started)
        acknowledged = acknowledged_so_far(output.read_text())
        crossed = free.crossed_at(LIMIT)
        print(("limit never crossed" if crossed is None else f"limit crossed {crossed - started:.2f} s after the flood "
               f"began, the quota written {throttled.at - crossed:+.2f} s from it")
              + f"; lowest free {free.lowest() / MiB:.1f} MiB; at least {acknowledged} records acknowledged")
        assert local is not None, "the pass was not started by the local watch"
        assert free.lowest() > 0, "the filesystem filled up"
        assert_online_and_every_acknowledged_record_read(cluster, small_dir, topic, output)

        deleted = time.monotonic()
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.delete_topics([topic])
        sidecar.wait_for_line(r"producer_byte_rate: 1 -> \d+$", timeout=150, after=deleted)


def test_with_the_aggregator_killed_a_full_speed_flood_is_held_by_the_local_verdict_and_decisions_resume(
        flooded_broker, aggregator, pipeline, tmp_path):
    """The session's aggregator is SIGKILLed as the flood begins and started again from its checkpoint once
    the agent's polls have failed for longer than the validity; the producer floods all along."""
    cluster, small_dir, topic = flooded_broker
    validity = 30
    sidecar = sidecar_beside_broker_3(cluster, pipeline, small_dir, tmp_path, **{
        "storage.check.interval": "PT5S", "throttle.factor.validity.duration": f"PT{validity}S",
        "poll.timeout": "PT3S"})
    with sidecar:
        sidecar.wait_ready()
        eventually(lambda: sidecar.status()["sidecar"]["decided_by"]["aggregator"] == aggregator.name, 60,
                   "a decision of the aggregator")
        killed = aggregator.name
        output = tmp_path / "producer.log"
        outage = []  # (factor, source) as status showed them while the aggregator was down
        with DiskSampler(small_dir, every=0.01) as free:
            started = time.monotonic()
            aggregator.stop(signal.SIGKILL)
            try:
                producer = producer_performance(cluster.bootstrap_servers, topic, 2 * FILESYSTEM // RECORD, RECORD,
                                                -1, output, reporting_interval_ms=500, **FLOOD)
                try:
                    throttled = sidecar.wait_for_line(r"producer_byte_rate: \S+ -> 1$", timeout=120, after=started)
                    # status is published at the end of the pass that wrote the quota
                    eventually(lambda: sidecar.status()["throttle"]["factor"] == 0.0, 30, "the factor of 0 in status")
                    failures = sidecar.metrics()["quota_sidecar_poll_failures_total"]
                    while time.monotonic() < throttled.at + validity + 10:
                        throttle = sidecar.status()["throttle"]
                        outage.append((throttle["factor"], throttle["source"]))
                        time.sleep(0.5)
                    failures = sidecar.metrics()["quota_sidecar_poll_failures_total"] - failures
                finally:
                    producer.send_signal(signal.SIGTERM)
                    producer.wait(30)
            finally:
                restarted = time.monotonic()
                aggregator.start().wait_ready()
        # A new JVM compiles the rules' code on its first micro-batch with rows, as the session's first start does:
        # on a loaded machine that alone can outlast the agent's poll timeout.
        aggregator.warm_up()
        ready = time.monotonic()
        eventually(lambda: sidecar.status()["sidecar"]["decided_by"]["aggregator"] == aggregator.name, validity,
                   "a decision of the restarted aggregator")
        resumed = time.monotonic()
        final = sidecar.status()["throttle"]
        lifted = sidecar.first_line(r"producer_byte_rate: 1 -> ", after=started)
    print(f"aggregator down {restarted - started:.0f} s ({failures:.0f} failed polls), back and warmed up "
          f"{ready - restarted:.0f} s after its start, first decision {resumed - ready:.1f} s later; lowest free {free.lowest() / MiB:.1f} MiB")
    assert aggregator.name != killed and failures >= 3
    assert free.lowest() > 0, "the filesystem filled up"
    assert lifted is None, f"the quota was lifted while the dir stayed at the limit: {lifted.text}"
    assert set(outage) == {(0.0, "last_valid")}, outage  # the local verdict, renewed by every failed poll
    assert final["factor"] == 0.0 and final["source"] == "computed", final  # the dir is still at the limit
    assert_online_and_every_acknowledged_record_read(cluster, small_dir, topic, output)


def test_with_a_lead_time_the_quota_is_in_force_before_a_half_speed_flood_crosses(flooded_broker, pipeline, tmp_path):
    """About 40 MB/s (2,500 records of 16 KiB a second): the margin lasts about 4 s. The local samples make
    the fill rate; a short fill window lets it follow a flood that began a moment ago."""
    cluster, small_dir, topic = flooded_broker
    sidecar = sidecar_beside_broker_3(cluster, pipeline, small_dir, tmp_path, **{
        "storage.per.volume.limit.lead.time": "PT10S", "storage.fill.window": "PT5S"})
    with sidecar:
        sidecar.wait_ready()
        with DiskSampler(small_dir, every=0.01) as free:
            started = time.monotonic()
            producer = producer_performance(cluster.bootstrap_servers, topic, 2 * FILESYSTEM // RECORD, RECORD,
                                            2500, tmp_path / "producer.log", **FLOOD)
            try:
                throttled = sidecar.wait_for_line(r"producer_byte_rate: \S+ -> 1$", timeout=120, after=started)
            finally:
                producer.send_signal(signal.SIGTERM)
                producer.wait(30)
    crossed = free.crossed_at(LIMIT)
    print(f"quota written {throttled.at - started:.2f} s after the flood began; limit crossed: "
          + ("never" if crossed is None else f"{crossed - started:.2f} s"))
    assert crossed is None or throttled.at < crossed, "the quota came after the crossing"


def test_with_its_agent_stopped_the_broker_is_covered_and_a_full_speed_flood_never_fills_the_disk(
        flooded_broker, pipeline, tmp_path):
    """Default settings. The agent beside broker 3 is stopped (SIGSTOP: a long pause; an OOM kill or a restart
    leave its broker alike) before the flood; the agent beside broker 1, which has no local dir of broker 3, sees
    its heartbeats stop and watches broker 3's volume with DescribeLogDirs: the quota lands within a second of
    the crossing. Once broker 3's agent runs again, it is not covered any more."""
    cluster, small_dir, topic = flooded_broker
    beside_3 = sidecar_beside_broker_3(cluster, pipeline, small_dir, tmp_path)
    beside_1 = SidecarProcess("sidecar-1", tmp_path, {
        "node.id": 1, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.per.volume.limit.min.available.bytes": LIMIT, PREFIX + "produce": 1 << 30, **pipeline})
    output = tmp_path / "producer.log"
    with beside_3, beside_1:
        beside_3.wait_ready(), beside_1.wait_ready()
        eventually(lambda: "3" in beside_1.status()["cover"]["agents_heard"], 30, "broker 1's agent hears broker 3's")
        stopped = time.monotonic()
        beside_3.send(signal.SIGSTOP)
        try:
            covering = beside_1.wait_for_line(r"covering broker 3: no heartbeat", timeout=30, after=stopped)
            with DiskSampler(small_dir, every=0.01) as free:
                started = time.monotonic()
                throttled = full_speed_until_throttled(beside_1, cluster, topic, output, started)
        finally:
            beside_3.send(signal.SIGCONT)
        beside_1.wait_for_line(r"not covering broker 3 any more", timeout=30, after=started)
        verdict = beside_1.first_line(r"broker 3's \S+ judged violated in DescribeLogDirs", after=started)
    crossed = free.crossed_at(LIMIT)
    print(f"covering {covering.at - stopped:.1f} s after the stop; the limit crossed {crossed - started:.2f} s after "
          f"the flood began; quota written {throttled.at - crossed:+.2f} s from it; lowest free "
          f"{free.lowest() / MiB:.1f} MiB")
    assert verdict is not None, "the quota was not written by the cover"
    assert throttled.at - crossed < 1.0, f"the quota came {throttled.at - crossed:.2f} s after the crossing"
    assert free.lowest() > 0, "the filesystem filled up"
    assert_online_and_every_acknowledged_record_read(cluster, small_dir, topic, output)


def test_while_the_verdict_of_broker_3s_agent_holds_another_agent_lifts_nothing(flooded_broker, pipeline, tmp_path):
    """Broker 3's agent judges its dir within its reaction time of the limit at the flood's rate and writes 1 B/s
    before the flood crosses; the agent beside broker 1, whose decisions see the volume still above the limit in
    DescribeLogDirs, would lift the quota at its next pass, every pass, and the flood write again each time.
    Broker 3's heartbeat says its verdict holds: broker 1's agent, passing every 2 s, lifts
    nothing then; once the topic is deleted the verdict lets go, and the quota is lifted."""
    cluster, small_dir, topic = flooded_broker
    beside_3 = sidecar_beside_broker_3(cluster, pipeline, small_dir, tmp_path)
    beside_1 = SidecarProcess("sidecar-1", tmp_path, {
        "node.id": 1, PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.per.volume.limit.min.available.bytes": LIMIT, PREFIX + "produce": 1 << 30,
        PREFIX + "storage.check.interval": "PT2S", **pipeline})
    with beside_3, beside_1:
        beside_3.wait_ready(), beside_1.wait_ready()
        eventually(lambda: "3" in beside_1.status()["cover"]["agents_heard"], 30, "broker 1's agent hears broker 3's")
        with DiskSampler(small_dir, every=0.01) as free:
            started = time.monotonic()
            producer = producer_performance(cluster.bootstrap_servers, topic, 2 * FILESYSTEM // RECORD, RECORD, 2500,
                                            tmp_path / "producer.log", **FLOOD)
            try:
                throttled = beside_3.wait_for_line(r"producer_byte_rate: \S+ -> 1$", timeout=120, after=started)
                time.sleep(20)  # ten passes of broker 1's agent
            finally:
                producer.send_signal(signal.SIGTERM)
                producer.wait(30)
        lifted_while_held = beside_1.first_line(r"producer_byte_rate: 1 -> ", after=throttled.at)
        why = beside_3.first_line(r"local dir \S+ (at the limit|within)", after=started)
        print(f"broker 3's verdict ({why.text.split(': quotas')[0] if why else '?'}) {throttled.at - started:.2f} s "
              f"after the flood began; lowest free {free.lowest() / MiB:.1f} MiB (limit {LIMIT / MiB:.0f})")
        assert lifted_while_held is None, f"broker 1's agent lifted the verdict's quota: {lifted_while_held.text}"
        assert beside_1.first_line(r"the local verdict of agent\(s\) \[3\] holds", after=started), \
            "broker 1's agent did not hear that broker 3's verdict holds"
        deleted = time.monotonic()
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.delete_topics([topic])
        let_go = beside_1.wait_for_line(r"no other agent's local verdict holds any more", timeout=120, after=deleted)
        lifted = eventually(lambda: beside_1.first_line(r"producer_byte_rate: 1 -> \d+$", after=deleted)
                            or beside_3.first_line(r"producer_byte_rate: 1 -> \d+$", after=deleted), 60, "the lift")
    print(f"let go {let_go.at - deleted:.1f} s after the deletion, lifted {lifted.at - deleted:.1f} s after it")
