"""The local watch's verdict on the real session cluster: a dir of the sidecar's own broker that its statvfs sample
shows at the hard limit gets its quota before the pass reads every broker's volumes and asks Spark."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient

from harness.cluster.kafka_tools import fill
from harness.waiting import eventually, within
from quota_sidecar.act.cluster_store import RACE_SECONDS
from quota_sidecar.common.errors import AdminError, RetryableAdminError
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide import quotas
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.observe.admin import ClusterAdmin
from quota_sidecar.pipeline.topics import OBSERVATIONS_TOPIC
from quota_sidecar.pipeline.transport import end_offsets
from quota_sidecar.serve import status
from quota_sidecar.serve.metrics import registry_for
from quota_sidecar.wiring import build_sidecar

pytestmark = pytest.mark.integration
P = cfg.PREFIX
MiB = 1 << 20
PRODUCE_RATE = 5_000_000


def test_a_local_dir_at_the_limit_has_its_quota_in_force_before_the_volumes_are_read(kafka_cluster, pipeline, sidecars,
                                                                                     unique_name, caplog):
    small_dir = kafka_cluster.require_small_dir()
    broker = kafka_cluster.small_dir_broker_id
    free = os.statvfs(small_dir).f_bavail * os.statvfs(small_dir).f_frsize
    limit = free - 4 * MiB  # crossed by the 8 MiB written below
    sidecar = build_sidecar(cfg.from_properties({
        P + "kafka.admin.bootstrap.servers": kafka_cluster.bootstrap_servers, P + "poll.timeout": "PT60S",
        P + "broker.id": str(broker), P + "storage.local.log.dirs": small_dir, P + "produce": str(PRODUCE_RATE),
        P + "storage.per.volume.limit.min.available.bytes": str(limit), **pipeline}))
    sidecars.append(sidecar)
    first = sidecar.run_pass()  # confirms the dir: the broker reports the same filesystem
    assert first.throttle_factor == 1.0 and first.error is None, first

    try:
        fill(kafka_cluster.bootstrap_servers, unique_name, broker, 8)
        sidecar.watch.sample()  # the watch's next round, without its thread
        assert sidecar.watch.at_limit == [small_dir], "8 MiB written did not bring the small dir to the limit"

        in_force_when_read = []
        describe_volumes = sidecar.admin.describe_volumes

        def probed(*args, **kwargs):  # a probe around the real call: the quota the cluster has by then (a broker
            # answering the describe may lag the controller briefly; the volumes are read only after the wait)
            def throttled():
                return sidecar.admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE) == 1.0
            in_force_when_read.append(bool(within(throttled, 5.0)))
            return describe_volumes(*args, **kwargs)

        sidecar.admin.describe_volumes = probed
        with caplog.at_level("INFO", logger="quota_sidecar.act.local_verdict"):
            decision = sidecar.run_pass()
    finally:
        _delete(kafka_cluster, unique_name)

    assert in_force_when_read == [True], "the quota of a dir at the limit waited for the cluster's volumes"
    assert f"local dir {small_dir} at the limit in its statvfs sample" in caplog.text
    assert decision.throttle_factor == 0.0 and [v["log_dir"] for v in decision.violations] == [small_dir]
    # The last resort said once (the verdict's write, then the pass's), in status and in the metrics.
    said = [record.getMessage() for record in caplog.records if record.name == "quota_sidecar.act.last_resort"]
    assert len(said) == 1 and said[0].startswith(
        "the hard limit: producer quota 1 B/s on <default user> (every principal without a quota of its own)"), said
    shown = status.render(status.build(sidecar.snapshot(), datetime.now(timezone.utc), mode="running"))
    assert "LAST RESORT: producers of <default user> (every principal without a quota of its own)" in shown
    assert registry_for(sidecar.snapshot).get_sample_value("quota_sidecar_last_resort") == 1


def test_another_sidecars_decision_from_an_earlier_look_does_not_lift_the_verdict(kafka_cluster, pipeline, sidecars,
                                                                                  unique_name, caplog):
    """The race `make demo` lost: a sidecar of another broker looks at the cluster before the small dir crosses the
    limit, and while it waits for the aggregator's answer (a factor of 1) the small dir's sidecar writes its verdict
    of 1 B/s. The answer, older than the verdict, must not write the producer quota back."""
    small_dir = kafka_cluster.require_small_dir()
    broker = kafka_cluster.small_dir_broker_id
    other = next(b for b in kafka_cluster.cluster.broker_ids if b != broker)
    free = os.statvfs(small_dir).f_bavail * os.statvfs(small_dir).f_frsize
    limit = free - 4 * MiB  # crossed by the 8 MiB written below, also if an earlier test's deleted topic goes meanwhile
    mebibytes = 8 + -(-_pending_deletion_bytes(small_dir) // MiB)

    def sidecar_of(broker_id: int, **local):
        sidecar = build_sidecar(cfg.from_properties({
            P + "kafka.admin.bootstrap.servers": kafka_cluster.bootstrap_servers, P + "poll.timeout": "PT60S",
            P + "broker.id": str(broker_id), P + "produce": str(PRODUCE_RATE),
            P + "storage.per.volume.limit.min.available.bytes": str(limit), **local, **pipeline}))
        sidecars.append(sidecar)
        return sidecar

    watching = sidecar_of(broker, **{P + "storage.local.log.dirs": small_dir})
    late = sidecar_of(other)
    assert watching.run_pass().throttle_factor == 1.0  # confirms the dir
    decide = late.decider.decide

    def decide_then_cross(observation):  # the other sidecar's decision is made; the crossing comes before its writes
        decision = decide(observation)
        assert decision.throttle_factor == 1.0, decision
        fill(kafka_cluster.bootstrap_servers, unique_name, broker, mebibytes)
        watching.watch.sample()
        assert watching.run_pass().throttle_factor == 0.0
        return decision

    late.decider.decide = decide_then_cross
    try:
        with caplog.at_level("INFO", logger="quota_sidecar.act.quota_writes"):
            late.run_pass()
        assert late.admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE) == 1.0, \
            "a decision made before the verdict wrote the producer quota back"
        assert "kept, not" in caplog.text
        late.decider.decide = decide
        assert late.run_pass().throttle_factor == 0.0  # a look after the crossing sees the dir at the limit
    finally:
        _delete(kafka_cluster, unique_name)


def test_an_agent_held_at_the_limit_publishes_small_observations_onto_a_bounded_topic(kafka_cluster, pipeline,
                                                                                      sidecars):
    """With a volume held at the limit, its agent passes several times a second: every sample of its local watch
    (ten a second) of the fill window in each observation, onto every broker's disk, would let the pipeline's topic,
    whose writes no quota holds back, fill the disk the agent protects. A volume's history keeps a dozen points a
    window, observations are gzipped, and the topic has a bound."""
    small_dir = kafka_cluster.require_small_dir()
    broker = kafka_cluster.small_dir_broker_id
    free = os.statvfs(small_dir).f_bavail * os.statvfs(small_dir).f_frsize
    sidecar = build_sidecar(cfg.from_properties({
        P + "kafka.admin.bootstrap.servers": kafka_cluster.bootstrap_servers, P + "poll.timeout": "PT60S",
        P + "broker.id": str(broker), P + "storage.local.log.dirs": small_dir, P + "produce": str(PRODUCE_RATE),
        P + "storage.per.volume.limit.min.available.bytes": str(free + 64 * MiB), **pipeline}))  # at it already
    sidecars.append(sidecar)
    start = end_offsets({"bootstrap_servers": kafka_cluster.bootstrap_servers}, OBSERVATIONS_TOPIC)
    on_disk = _observations_on_disk(kafka_cluster)
    sidecar.watch.start()
    try:
        for _ in range(40):  # passes at the pace of a dir at the limit: each asks the aggregator
            assert sidecar.run_pass().throttle_factor == 0.0
    finally:
        sidecar.watch.stop()

    published = _observations_since(kafka_cluster, start, f"/{broker}")
    written = _observations_on_disk(kafka_cluster) - on_disk
    rows = {}
    for row in published[-1]["volumes"]["rows"]:
        rows[row["log_dir"]] = rows.get(row["log_dir"], 0) + 1
    print(f"{written / len(published):.0f} bytes an observation on disk; rows of each volume in the last: {rows}")
    assert len(published) == 40 and max(rows.values()) <= 13, rows  # a dozen points a window, and the newest
    assert written / len(published) < 1500, f"{written / len(published):.0f} bytes an observation on disk"
    with ClusterAdmin({"bootstrap_servers": kafka_cluster.bootstrap_servers}) as admin:
        configs = admin.describe_configs("topic", [OBSERVATIONS_TOPIC])[OBSERVATIONS_TOPIC]
    assert {key: configs.get(key) for key in ("retention.bytes", "segment.bytes", "segment.ms")} == {
        "retention.bytes": str(8 * MiB), "segment.bytes": str(MiB), "segment.ms": "600000"}


def test_a_quota_whose_record_was_written_but_not_its_value_is_still_the_sidecars(kafka_cluster, sidecars):
    """An agent cut off with its broker writes the record of the default user's 1 B/s, its producer gives up, and
    the value is never written, though the record landed; the flooded broker's agent then finds the lift's rate in
    force under a record saying 1 B/s, and taking it for someone else's change it would write no verdict. A record
    keeps the value its write changes too: still in force, the write did not happen, and the target is still the
    sidecars'."""
    sidecar = build_sidecar(cfg.from_properties({
        P + "kafka.admin.bootstrap.servers": kafka_cluster.bootstrap_servers, P + "broker.id": "1",
        P + "produce": str(PRODUCE_RATE), P + "storage.per.volume.limit.min.available.bytes": str(MiB)}))
    sidecars.append(sidecar)
    writer = sidecar.quota_writer

    def default_user_rate():
        return sidecar.admin.describe_user_quotas([None]).get(None, {}).get(PRODUCE)

    writer.apply(quotas.wanted(sidecar.config.quotas, 1.0), sidecar.read_records(), seen_at=_now())
    assert eventually(lambda: default_user_rate() == PRODUCE_RATE, timeout=10)
    time.sleep(RACE_SECONDS + 1)  # that write long past: not a race between two sidecars' writes

    def records_written_then_the_values_timed_out(writes):  # fault injection: a cut-off agent's lost request
        raise RetryableAdminError("AlterClientQuotas timed out (injected)")

    writer._alter_quotas = records_written_then_the_values_timed_out
    with pytest.raises(AdminError):
        writer.apply(quotas.wanted(sidecar.config.quotas, 0.0), sidecar.read_records(), seen_at=_now())
    del writer._alter_quotas  # the real AlterClientQuotas again
    assert default_user_rate() == PRODUCE_RATE

    writer.apply(sidecar.decider.judged_locally(_now()), sidecar.read_records(), seen_at=_now())  # the verdict
    assert eventually(lambda: default_user_rate() == 1.0, timeout=10), "the verdict's quota was not written"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _observations_since(kafka_cluster, start: dict[int, int], key_suffix: str) -> list[dict]:
    """The observations published since `start` ({partition: offset}) under a key ending in `key_suffix` (an
    agent's), oldest first."""
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap_servers, consumer_timeout_ms=5000,
                             enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(OBSERVATIONS_TOPIC, partition) for partition in start])
        for partition, offset in start.items():
            consumer.seek(TopicPartition(OBSERVATIONS_TOPIC, partition), offset)
        found = [message for message in consumer if message.key.decode().endswith(key_suffix)]
    finally:
        consumer.close()
    return [json.loads(message.value) for message in sorted(found, key=lambda m: m.timestamp)]


def _observations_on_disk(kafka_cluster) -> int:
    """The bytes of the observations topic's log segments in broker 1's log dirs: what its replicas take."""
    return sum(segment.stat().st_size for log_dir in kafka_cluster.cluster.log_dirs(1)
               for segment in Path(log_dir).glob(f"{OBSERVATIONS_TOPIC}-*/*.log"))


def _pending_deletion_bytes(log_dir: str) -> int:
    """What the broker frees on its own soon: the files of deleted partitions (`*-delete`) not yet removed."""
    return sum(f.stat().st_size for d in Path(log_dir).glob("*-delete") for f in d.iterdir())


def _delete(kafka_cluster, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
