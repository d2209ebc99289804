"""Disk-full protection end to end, on a real Kafka cluster: volumes -> Spark factor -> client quotas."""

from __future__ import annotations

import os
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from harness.cluster import kafka_tools
from harness.cluster.local_cluster import GENERATIONS
from harness.waiting import eventually
from quota_sidecar.common import records
from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide.quotas import PRODUCE, UNLIMITED
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.wiring import build_sidecar

pytestmark = pytest.mark.integration
P = cfg.PREFIX
MiB = 1 << 20


def sidecar_on(pipeline: dict, bootstrap: str, **props):
    # A long poll deadline: these tests are about decisions, and their first polls share two cores with
    # three brokers and the aggregator (tests/test_failing_well.py holds polls to short deadlines).
    properties = {P + "kafka.admin.bootstrap.servers": bootstrap, P + "storage.check.interval": "PT1S",
                  P + "poll.timeout": "PT60S", **pipeline, **{P + key: str(value) for key, value in props.items()}}
    return build_sidecar(cfg.from_properties(properties))


def producer_rate_becomes(admin, expected: float | None, entity=None, timeout: float = 10) -> None:
    """A quota write lands on the controller first; a broker answering a describe may lag it briefly."""
    wait_for(lambda: admin.describe_user_quotas([entity]).get(entity, {}).get(PRODUCE) == expected, timeout,
             f"producer_byte_rate of {entity or 'the default user'} to become {expected}")


def wait_for(condition, timeout: float, what: str, every: float = 0.5, passes: PassLoop | None = None):
    """condition()'s first truthy value; a failed pass of `passes` ends the wait at once."""
    def check():
        if passes is not None:
            passes.check()
        return condition()

    return eventually(check, timeout, what, every=every, retry_on=())


def create_topic(bootstrap: str, name: str, replica: int) -> None:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        client.create_topics([NewTopic(name, replica_assignments={0: [replica]})])
        client.wait_for_topics([name], timeout_ms=30000)
    finally:
        client.close()


def test_volumes_of_every_broker_are_read_jbod_included(pipeline, kafka_cluster, sidecars):
    sidecar = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, **{"storage.per.volume.limit.min.available.bytes": 0})
    sidecars.append(sidecar)
    decision = sidecar.run_pass()
    dirs = {(v.broker_id, v.log_dir) for v in decision.volumes}
    expected = {(b, d) for b in kafka_cluster.cluster.broker_ids for d in kafka_cluster.cluster.log_dirs(b)}
    assert dirs == expected and len([d for d in dirs if d[0] == 1]) == 2
    assert all(v.usable and v.total_bytes > 0 and 0 < v.available_bytes <= v.total_bytes for v in decision.volumes)
    assert (decision.throttle_factor, decision.source, decision.active_brokers) == (1.0, "computed", 3)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_flooding_producer_is_throttled_before_the_disk_fills_and_keeps_its_records(pipeline, make_kafka_cluster, sidecars,
                                                                                     unique_name, generation):
    """On Kafka 4.4 KRaft and 3.9 ZooKeeper mode through DescribeLogDirs. (Kafka 3.2, whose DescribeLogDirs has
    no sizes, is flooded by Kafka's own Java producer in test_java_producer_flood.py.)"""
    cluster = make_kafka_cluster(**GENERATIONS[generation], small_log_dirs={(3, 0): 48 * MiB},
                                 broker_properties={"log.segment.delete.delay.ms": "1000"})
    small_dir = cluster.log_dirs(3)[0]
    topic = unique_name
    create_topic(cluster.bootstrap_servers, topic, replica=3)
    sidecar = sidecar_on(pipeline, cluster.bootstrap_servers, produce=4 * MiB,
                         **{"storage.per.volume.limit.min.available.bytes": 16 * MiB})
    sidecars.append(sidecar)
    first = sidecar.run_pass()
    assert first.error is None and any(v.log_dir == small_dir and v.usable for v in first.volumes), first
    with PassLoop(sidecar) as passes:
        flood = Flood(cluster.bootstrap_servers, topic, watch_dir=small_dir)
        try:
            flood.start()
            wait_for(lambda: sidecar.decider.factor.factor == 0.0, 240, "the throttle to engage", passes=passes)
            producer_rate_becomes(sidecar.admin, 1.0)
            acked_when_throttled = flood.acked_bytes
            time.sleep(6)
            lowest_free = min(flood.free_samples)
            stalled = flood.acked_bytes - acked_when_throttled
        finally:
            flood.stop()
        assert os.statvfs(small_dir).f_bavail > 0 and lowest_free > 2 * MiB, "the small filesystem filled up"
        assert stalled < 4 * MiB, f"the producer went on at full speed: {stalled} bytes in 6 s after the throttle"
        assert not [v for v in sidecar.decider.last.volumes if v.error], "a log dir went offline"
        acked = set(flood.acked)
        assert acked, "nothing was acknowledged"
        missing = acked - read_back(cluster.bootstrap_servers, topic)
        assert not missing, f"{len(missing)} acknowledged records were lost"

        delete_topic(cluster.bootstrap_servers, topic)
        wait_for(lambda: sidecar.decider.factor.factor == 1.0, 90, "the throttle to lift once space is free",
                 passes=passes)
        producer_rate_becomes(sidecar.admin, 4 * MiB)


def test_stopped_broker_counts_until_validity_then_the_fallback_applies(pipeline, make_kafka_cluster, sidecars):
    cluster = make_kafka_cluster(small_log_dirs={(3, 0): 16 * MiB})
    sidecar = sidecar_on(pipeline, cluster.bootstrap_servers, produce=1000,
                         **{"storage.per.volume.limit.min.available.bytes": 32 * MiB,  # broker 3 violates
                            "throttle.factor.validity.duration": "PT20S", "throttle.factor.fallback": "0.5"})
    sidecars.append(sidecar)
    assert sidecar.run_pass().throttle_factor == 0.0
    cluster.stop_broker(3)
    # Until the controller fences it, broker 3 is listed but does not answer: those polls fail.
    kept = wait_for(lambda: (d := sidecar.run_pass()).error is None and d, 30, "a pass without broker 3", every=1)
    assert (kept.throttle_factor, kept.source) == (0.0, "computed")
    assert any(v.broker_id == 3 and v.observed_at < kept.at for v in kept.volumes), "broker 3's volumes still count"
    fallback = wait_for(lambda: (d := sidecar.run_pass()).source == "fallback" and d, 40, "the fallback", every=1)
    assert fallback.throttle_factor == 0.5 and "absent" in fallback.error
    producer_rate_becomes(sidecar.admin, 500.0)
    assert sidecar.counters.fallback_applied == 1
    cluster.start_broker(3)
    back = wait_for(lambda: (d := sidecar.run_pass()).source == "computed" and d, 60, "broker 3 to return", every=1)
    assert back.throttle_factor == 0.0
    producer_rate_becomes(sidecar.admin, 1.0)


def test_a_quota_an_operator_changed_during_a_throttle_is_not_overwritten_at_the_lift(pipeline, kafka_cluster, sidecars,
                                                                                    caplog):
    throttling = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, produce=4 * MiB,
                            **{"storage.per.volume.limit.min.available.ratio": 0.9999})  # every volume violates
    sidecars.append(throttling)
    assert throttling.run_pass().throttle_factor == 0.0
    producer_rate_becomes(throttling.admin, 1.0)
    throttling.admin.alter_user_quotas({None: {PRODUCE: 2000.0}})  # an operator lets producers through by hand
    producer_rate_becomes(throttling.admin, 2000.0)
    lifting = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, produce=4 * MiB,
                         **{"storage.per.volume.limit.min.available.bytes": 0})
    sidecars.append(lifting)
    try:
        with caplog.at_level("INFO", logger="quota_sidecar.act.quota_writes"):
            assert lifting.run_pass().throttle_factor == 1.0
            assert lifting.run_pass().throttle_factor == 1.0
        assert lifting.admin.describe_user_quotas([None])[None][PRODUCE] == 2000.0, "the lift overwrote it"
        assert [r.message for r in caplog.records if "changed by someone else" in r.message] == [
            "quota <default user> producer_byte_rate: 2000 in force, changed by someone else since the sidecar "
            "wrote 1: left alone until the sidecar lets go of it"]
    finally:
        lifting.admin.alter_user_quotas({None: {PRODUCE: None}})


def test_two_sidecars_writing_the_quota_at_once_leave_it_to_no_one_else(pipeline, kafka_cluster, sidecars, caplog):
    """The race `make demo` once lost: one sidecar records its throttle and writes it; another records its lift,
    and its write is overtaken by the first's. The value in force (1) is then not the record's (the lift), yet it
    is the sidecars' own: a sidecar that lifts must write the lift, not leave the quota to "someone else"."""
    throttling = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, produce=4 * MiB,
                            **{"storage.per.volume.limit.min.available.ratio": 0.9999})  # every volume violates
    sidecars.append(throttling)
    assert throttling.run_pass().throttle_factor == 0.0
    producer_rate_becomes(throttling.admin, 1.0)
    lifting = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, produce=4 * MiB,
                         **{"storage.per.volume.limit.min.available.bytes": 0})
    sidecars.append(lifting)
    # The other sidecar's record of its lift, whose write of the value the throttle's overtook.
    lifting.store.put(records.key(records.QUOTA, None, PRODUCE),
                      records.Owned(None, 4.0 * MiB, seen_at=time.time()).stored())
    with caplog.at_level("INFO", logger="quota_sidecar.act.quota_writes"):
        assert lifting.run_pass().throttle_factor == 1.0
    producer_rate_becomes(lifting.admin, 4.0 * MiB)
    assert "changed by someone else" not in caplog.text


class FaultInjectingAdmin:
    """Fault injection: DescribeLogDirs fails while `failing` is set; everything else is the real admin.
    A real cluster cannot be made to time out on one request on demand."""

    def __init__(self, admin: ClusterAdmin):
        self.admin, self.failing = admin, False

    def describe_volumes(self, broker_ids, now):
        if self.failing:
            raise RetryableAdminError("DescribeLogDirs timed out (injected)")
        return self.admin.describe_volumes(broker_ids, now)

    def __getattr__(self, name):
        return getattr(self.admin, name)


def test_poll_failures_outlasting_validity_apply_the_fallback(pipeline, kafka_cluster, sidecars):
    sidecar = sidecar_on(pipeline, kafka_cluster.bootstrap_servers, produce=2000,
                         **{"storage.per.volume.limit.min.available.bytes": 0,
                            "throttle.factor.validity.duration": "PT3S", "throttle.factor.fallback": "0"})
    sidecars.append(sidecar)
    sidecar.observer.admin = faulty = FaultInjectingAdmin(sidecar.admin)  # the pass's reads of the cluster
    assert sidecar.run_pass().source == "computed"
    faulty.failing = True
    assert sidecar.run_pass().source == "last_valid"
    producer_rate_becomes(faulty, 2000.0)
    time.sleep(3.5)
    fallback = sidecar.run_pass()
    assert (fallback.throttle_factor, fallback.source) == (0.0, "fallback")
    assert "injected" in fallback.error
    producer_rate_becomes(faulty, 1.0)
    faulty.failing = False
    assert sidecar.run_pass().source == "computed"
    producer_rate_becomes(faulty, 2000.0)


def test_excluded_principal_keeps_full_speed_while_others_are_throttled(pipeline, kafka_cluster, sidecars, unique_name,
                                                                       tmp_path):
    """...and a client that names itself as the sidecar's clients do (client.id=quota-sidecar) under a principal
    of its own is throttled like any other: the sidecar, connected as User:admin, is exempt as that user alone."""
    users = kafka_cluster.users
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="{users["admin"]}";')
    # The sidecar itself connects over SASL: the kafka.admin.* pass-through carries the security settings.
    sidecar = sidecar_on({P + "pipeline.bootstrap.servers": kafka_cluster.sasl_bootstrap_servers},
                         kafka_cluster.sasl_bootstrap_servers,
                         **{"kafka.admin.security.protocol": "SASL_PLAINTEXT", "kafka.admin.sasl.mechanism": "PLAIN",
                            "kafka.admin.sasl.jaas.config": jaas,
                            "storage.per.volume.limit.min.available.ratio": 1.0,  # every volume violates
                            "excluded.principal.name.list": "User:alice"})
    sidecars.append(sidecar)
    decision = sidecar.run_pass()
    assert decision.throttle_factor == 0.0
    producer_rate_becomes(sidecar.admin, UNLIMITED, entity="alice")
    topic = unique_name
    create_topic(kafka_cluster.bootstrap_servers, topic, replica=1)
    alice = acked_bytes_in(kafka_cluster.cluster.sasl_client_config("alice"), topic, seconds=8)
    bob = acked_bytes_in(kafka_cluster.cluster.sasl_client_config("bob"), topic, seconds=8)
    assert alice >= 2 * MiB, f"alice (excluded) was slowed down: {alice} bytes in 8 s"
    assert bob < alice / 10, f"bob was not throttled: {bob} bytes against alice's {alice}"
    bob_as_the_sidecar = java_acked_bytes_in(kafka_cluster, "bob", topic, 8, tmp_path / "bob-as-the-sidecar.log",
                                             **{"client.id": "quota-sidecar"})
    assert bob_as_the_sidecar < alice / 10, \
        f"bob, naming himself quota-sidecar, was not throttled: {bob_as_the_sidecar} bytes against alice's {alice}"
    in_force = sidecar.admin.describe_user_quotas([("admin", "quota-sidecar"), (None, "quota-sidecar")])
    assert in_force == {("admin", "quota-sidecar"): {PRODUCE: UNLIMITED}, (None, "quota-sidecar"): {}}, in_force


# ---------------------------------------------------------------- helpers


class PassFailed(RuntimeError):
    pass


class PassLoop:
    """The sidecar's passes, one a second in a thread as `run` makes them; the first that raises is kept."""

    def __init__(self, sidecar):
        self.sidecar, self.failure = sidecar, None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sidecar-passes", daemon=True)

    def __enter__(self) -> PassLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stopped.set()
        self.thread.join(30)

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.sidecar.run_pass()
            except Exception as error:  # kept for check(): the test fails now, not at its timeout
                self.failure = error
                return
            self.stopped.wait(1.0)

    def check(self) -> None:
        if self.failure is not None:
            raise PassFailed(f"a pass of the sidecar failed: {self.failure!r}") from self.failure


# Bounded waits: a throttled batch expires instead of keeping close() (and the test) waiting.
BOUNDED_PRODUCER = {"acks": "all", "linger_ms": 5, "max_block_ms": 1000, "request_timeout_ms": 10000,
                    "delivery_timeout_ms": 15000}
MAX_PENDING = 64


class Flood:
    """A producer sending numbered 16 KiB records as fast as it is allowed, keeping the numbers the brokers
    acknowledged and sampling the free space of the directory it fills."""

    def __init__(self, bootstrap: str, topic: str, watch_dir: str):
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, batch_size=64 * 1024, **BOUNDED_PRODUCER)
        self.topic, self.watch_dir = topic, watch_dir
        self.acked: set[int] = set()
        self.acked_bytes, self.free_samples, self.pending = 0, [], 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.lock = threading.Lock()

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopped.set()
        self.thread.join(30)
        close_quietly(self.producer)

    def _acked(self, number: int, size: int) -> None:
        with self.lock:
            self.acked.add(number)
            self.acked_bytes += size
            self.pending -= 1

    def _failed(self, _error) -> None:
        with self.lock:
            self.pending -= 1

    def _run(self):
        payload, number, sampled = os.urandom(16 * 1024), 0, 0.0
        while not self.stopped.is_set():
            if time.monotonic() - sampled > 0.2:
                stats = os.statvfs(self.watch_dir)
                self.free_samples.append(stats.f_bavail * stats.f_frsize)
                sampled = time.monotonic()
            if self.pending >= MAX_PENDING:  # kafka-python 3 has no buffer limit: keep at most ~1 MiB queued
                time.sleep(0.01)
                continue
            with self.lock:
                self.pending += 1
            future = self.producer.send(self.topic, key=str(number).encode(), value=payload)
            future.add_callback(lambda _m, n=number: self._acked(n, len(payload)))
            future.add_errback(self._failed)
            number += 1


def acked_bytes_in(client_config: dict, topic: str, seconds: float) -> int:
    """Bytes acknowledged within `seconds` to a producer that keeps at most MAX_PENDING records queued."""
    producer = KafkaProducer(**client_config, **BOUNDED_PRODUCER)
    payload, counts, deadline = os.urandom(32 * 1024), {"acked": 0, "pending": 0}, time.monotonic() + seconds

    def done(acked: bool):
        counts["pending"] -= 1
        counts["acked"] += len(payload) if acked else 0

    try:
        while time.monotonic() < deadline:
            if counts["pending"] >= MAX_PENDING:
                time.sleep(0.01)
                continue
            counts["pending"] += 1
            future = producer.send(topic, payload)
            future.add_callback(lambda _m: done(True))
            future.add_errback(lambda _e: done(False))
        return counts["acked"]  # what was acknowledged within the time, not what a flush adds afterwards
    finally:
        close_quietly(producer)


def java_acked_bytes_in(kafka_cluster, user: str, topic: str, seconds: float, log_file, **properties) -> int:
    """Bytes Kafka's ProducerPerformance, at full speed as `user` over SASL, had acknowledged after `seconds`."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{user}" password="{kafka_cluster.users[user]}";')
    record = 1000
    producer = kafka_tools.producer_performance(
        kafka_cluster.sasl_bootstrap_servers, topic, 10**9, record, -1, log_file, reporting_interval_ms=1000,
        **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas, **properties})
    try:
        time.sleep(seconds)
    finally:
        producer.kill()
        producer.wait(10)
    return kafka_tools.acknowledged_so_far(log_file.read_text()) * record


def close_quietly(producer: KafkaProducer) -> None:
    """Throttled batches expire after the delivery timeout (uncounted), so the close completes."""
    producer.close(timeout=BOUNDED_PRODUCER["delivery_timeout_ms"] / 1000 + 10)


def read_back(bootstrap: str, topic: str) -> set[int]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000, fetch_max_bytes=8 * MiB)
    try:
        return {int(record.key) for record in consumer}
    finally:
        consumer.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        client.delete_topics([topic])
    finally:
        client.close()
