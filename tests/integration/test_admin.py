"""admin.py and cluster_store.py: every call against a real cluster."""

from __future__ import annotations

import logging
import socket
import threading
from contextlib import contextmanager
from datetime import datetime, timezone

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from harness.cluster.kafka_tools import elect_preferred_leader, reassign_partitions
from harness.waiting import equal, eventually
from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.common.errors import AdminError, PermanentAdminError, RetryableAdminError, UnknownTopicError
from quota_sidecar.common.observation import Reassignment
from quota_sidecar.configuration.admin_client import client_kwargs
from quota_sidecar.observe.admin import ClusterAdmin

pytestmark = pytest.mark.integration
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'


@pytest.fixture(scope="module")
def admin(kafka_cluster):
    with ClusterAdmin(client_kwargs({"bootstrap.servers": kafka_cluster.bootstrap_servers})) as cluster_admin:
        yield cluster_admin


def kafka_io_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("kafka-io")]


def test_live_broker_ids(admin, kafka_cluster):
    assert admin.live_broker_ids() == sorted(kafka_cluster.cluster.broker_ids)


def test_describe_volumes_reports_every_dir_of_every_broker(admin, kafka_cluster):
    cluster = kafka_cluster.cluster
    now = datetime.now(timezone.utc)
    volumes = admin.describe_volumes(admin.live_broker_ids(), now)
    assert sorted((v.broker_id, v.log_dir) for v in volumes) == sorted(
        (broker, log_dir) for broker in cluster.broker_ids for log_dir in cluster.log_dirs(broker))
    assert len(cluster.log_dirs(1)) == 2  # the JBOD broker
    for volume in volumes:
        assert volume.usable and volume.error is None and volume.observed_at == now
        assert volume.total_bytes > 0 and 0 < volume.available_bytes <= volume.total_bytes
    if kafka_cluster.small_dir is not None:  # sizes are those of each dir's own filesystem
        (small,) = [volume for volume in volumes if volume.log_dir == kafka_cluster.small_dir]
        assert 0 < small.total_bytes < min(volume.total_bytes for volume in volumes if volume != small)


def test_a_broker_not_in_the_cluster_fails_the_poll(admin):
    with pytest.raises(RetryableAdminError, match="DescribeLogDirs to broker 999 failed"):
        admin.describe_volumes([*admin.live_broker_ids(), 999], datetime.now(timezone.utc))


def test_a_stopped_broker_fails_the_poll(make_kafka_cluster):
    cluster = make_kafka_cluster(brokers=2)
    with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}, retry_deadline=1) as admin:
        brokers = admin.live_broker_ids()
        cluster.stop_broker(2)
        # The sidecar asks every broker it saw a moment ago: one that went away fails the poll.
        with pytest.raises(RetryableAdminError, match="DescribeLogDirs to broker 2 failed"):
            admin.describe_volumes(brokers, datetime.now(timezone.utc))
        assert admin.live_broker_ids() == [1]
        cluster.start_broker(2)
        equal(admin.live_broker_ids, [1, 2])
        assert {volume.broker_id for volume in admin.describe_volumes([1, 2], datetime.now(timezone.utc))} == {1, 2}


def test_an_unreachable_cluster_is_retryable_and_leaks_no_thread():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    threads_before = len(kafka_io_threads())
    admin = ClusterAdmin({"bootstrap_servers": f"127.0.0.1:{port}", "bootstrap_timeout_ms": 500}, retry_deadline=0)
    with pytest.raises(RetryableAdminError, match=rf"cannot reach any bootstrap server 127.0.0.1:{port} \(connection refused\)"):
        admin.live_broker_ids()
    admin.close()
    assert len(kafka_io_threads()) == threads_before


def test_user_quotas_round_trip(admin, unique_name):
    alice, bob = f"{unique_name}-alice", f"{unique_name}-bob"
    default_before = admin.describe_user_quotas([None])[None]
    others_on_default = {key: value for key, value in default_before.items() if key != "request_percentage"}
    try:
        admin.alter_user_quotas({None: {"request_percentage": 42.0},
                                 alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}})
        equal(lambda: admin.describe_user_quotas([None, alice, bob]), {
            None: {**others_on_default, "request_percentage": 42.0},
            alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            bob: {},
        })
        admin.alter_user_quotas({None: {"request_percentage": None}, alice: {"producer_byte_rate": None}})
        equal(lambda: admin.describe_user_quotas([None, alice]),
                   {None: others_on_default, alice: {"consumer_byte_rate": 2048.0}})
    finally:
        admin.alter_user_quotas({None: {"request_percentage": default_before.get("request_percentage")},
                                 alice: {"producer_byte_rate": None, "consumer_byte_rate": None}})
    equal(lambda: admin.describe_user_quotas([alice]), {alice: {}})


def test_user_quotas_are_the_user_only_entity(admin, kafka_cluster, unique_name):
    """A quota on (user, client-id) is not the user's own quota: the match is strict."""
    carol, servers = unique_name, kafka_cluster.bootstrap_servers
    set_user_client_quota(servers, carol, "app", 5.0)
    try:
        equal(lambda: quota_entities_naming(servers, carol), [[("user", carol), ("client-id", "app")]])
        assert admin.describe_user_quotas([carol]) == {carol: {}}
    finally:
        set_user_client_quota(servers, carol, "app", None)


def test_every_entity_with_a_user_is_read_at_once_and_none_without(admin, kafka_cluster, unique_name):
    """What a pass reads to find the tenants: (user, client id) with either a default, and the user alone;
    a client id alone never applies while a user entity has the key, so it is not among them."""
    carol, app, lone, servers = unique_name, f"{unique_name}-app", f"{unique_name}-lone", kafka_cluster.bootstrap_servers
    wanted = {(carol, "app"): 5.0, (None, app): 6.0, (carol, None): 7.0, carol: 8.0}
    try:
        admin.alter_user_quotas({entity: {"producer_byte_rate": rate} for entity, rate in wanted.items()})
        set_user_client_quota(servers, None, lone, 9.0)  # the client id alone
        eventually(lambda: all(entity in admin.describe_user_quotas() for entity in wanted)
                   and any((("client-id", lone),) == tuple(parts) for parts, _ in quota_entities(servers)), 15)
        found = admin.describe_user_quotas()
        assert {entity: found[entity] for entity in wanted} == {
            entity: {"producer_byte_rate": rate} for entity, rate in wanted.items()}
        assert not [entity for entity in found if lone in str(entity)]
    finally:
        admin.alter_user_quotas({entity: {"producer_byte_rate": None} for entity in wanted})
        set_user_client_quota(servers, None, lone, None)


def set_user_client_quota(bootstrap_servers: str, user: str | None, client_id: str, rate: float | None) -> None:
    """The (user, client id) entity; user None: the client id alone."""
    entry = AlterClientQuotasRequest.EntryData
    user_part = [] if user is None else [entry.EntityData(entity_type="user", entity_name=user)]
    response = send_raw(bootstrap_servers, AlterClientQuotasRequest(entries=[entry(
        entity=[*user_part, entry.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[entry.OpData(key="producer_byte_rate", value=rate or 0.0, remove=rate is None)])]))
    assert [result.error_code for result in response.entries] == [0]


def quota_entities(bootstrap_servers: str) -> list[tuple[list, list]]:
    """Every quota entity, as a non-strict DescribeClientQuotas with no component finds them: (parts, values)."""
    response = send_raw(bootstrap_servers, DescribeClientQuotasRequest(components=[], strict=False))
    return [([(part.entity_type, part.entity_name) for part in entry.entity], entry.values)
            for entry in response.entries]


def quota_entities_naming(bootstrap_servers: str, user: str) -> list[list[tuple[str, str]]]:
    """Every quota entity with this user in it, as a non-strict DescribeClientQuotas finds them."""
    component = DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=0, match=user)
    response = send_raw(bootstrap_servers, DescribeClientQuotasRequest(components=[component], strict=False))
    return [sorted(((part.entity_type, part.entity_name) for part in entry.entity), reverse=True)
            for entry in response.entries]


def send_raw(bootstrap_servers: str, request):
    """A request ClusterAdmin has no call for, sent with kafka-python's own admin client."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        return client._manager.run(client._manager.send, request)
    finally:
        client.close()


def test_an_invalid_quota_is_a_permanent_error_naming_the_user(admin, unique_name):
    dave = unique_name
    with pytest.raises(PermanentAdminError, match=f"AlterClientQuotas for user '{dave}' failed: .*bogus_rate"):
        admin.alter_user_quotas({dave: {"bogus_rate": 1.0}})


def test_topic_configs_append_and_subtract_keep_other_entries(admin, unique_name):
    topic = unique_name
    assert admin.create_topic(topic, partitions=2, replication_factor=1)
    assert admin.create_topic(topic, partitions=2, replication_factor=1) is False
    key = "leader.replication.throttled.replicas"
    equal(lambda: admin.describe_configs("topic", [topic]), {topic: {}})  # defaults are not "set"
    admin.incremental_alter_configs("topic", topic, {key: ("SET", "1:101")})  # someone else's entry
    admin.incremental_alter_configs("topic", topic, {key: ("APPEND", "0:1,0:2"), "retention.ms": ("SET", "600000")})
    equal(lambda: items(admin.describe_configs("topic", [topic], [key])[topic].get(key)), {"1:101", "0:1", "0:2"})
    assert admin.describe_configs("topic", [topic])[topic]["retention.ms"] == "600000"
    admin.incremental_alter_configs("topic", topic, {key: ("SUBTRACT", "0:1,0:2"), "retention.ms": ("DELETE", None)})
    equal(lambda: admin.describe_configs("topic", [topic]), {topic: {key: "1:101"}})
    admin.incremental_alter_configs("topic", topic, {key: ("DELETE", None)})
    equal(lambda: admin.describe_configs("topic", [topic]), {topic: {}})


def items(value: str | None) -> set[str]:
    return set(value.split(",")) if value else set()


def test_a_missing_topic_is_a_typed_permanent_error(admin):
    with pytest.raises(UnknownTopicError, match="no-such-topic") as raised:
        admin.describe_configs("topic", ["no-such-topic"])
    assert isinstance(raised.value, PermanentAdminError)  # not retried: a deleted topic does not come back
    assert admin.describe_partitions(["no-such-topic"]) == {}


def test_broker_configs_round_trip(admin):
    broker = admin.live_broker_ids()[0]
    key = "follower.replication.throttled.rate"
    with broker_configs_restored(admin, broker, [key]):
        admin.incremental_alter_configs("broker", broker, {key: ("SET", "12345")})
        equal(lambda: admin.describe_configs("broker", [broker], [key]), {str(broker): {key: "12345"}})
        assert key not in admin.describe_configs("broker", [""])[""]  # not a default of all brokers
        admin.incremental_alter_configs("broker", broker, {key: ("DELETE", None)})
        equal(lambda: admin.describe_configs("broker", [broker], [key]), {str(broker): {}})


def test_an_invalid_config_is_a_permanent_error(admin):
    broker = admin.live_broker_ids()[0]
    with pytest.raises(PermanentAdminError, match=f"IncrementalAlterConfigs of broker '{broker}' failed"):
        admin.incremental_alter_configs("broker", broker, {"leader.replication.throttled.rate": ("APPEND", "5")})


@contextmanager
def broker_configs_restored(admin, broker, keys):
    before = admin.describe_configs("broker", [broker], keys)[str(broker)]
    try:
        yield
    finally:
        admin.incremental_alter_configs("broker", broker, {
            key: ("SET", before[key]) if key in before else ("DELETE", None) for key in keys})


def test_a_throttled_reassignment_is_listed_until_cancelled(admin, kafka_cluster, unique_name):
    topic = unique_name
    admin.create_topic(topic, partitions=1, replication_factor=1)
    brokers = admin.live_broker_ids()
    produce(kafka_cluster.bootstrap_servers, topic, megabytes=3)
    source = next(broker for broker in brokers if (topic, 0) in admin.describe_replica_sizes(broker, {topic: [0]}))
    destination = next(broker for broker in brokers if broker != source)
    assert admin.describe_replica_sizes(source, {topic: [0]})[(topic, 0)] > 3_000_000
    assert admin.describe_replica_sizes(destination, {topic: [0]}) == {}

    rates = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"]
    with broker_configs_restored(admin, source, rates), broker_configs_restored(admin, destination, rates):
        # 1 byte/s each way: the move cannot finish while the test looks at it.
        admin.incremental_alter_configs("broker", source, {"leader.replication.throttled.rate": ("SET", "1")})
        admin.incremental_alter_configs("broker", destination, {"follower.replication.throttled.rate": ("SET", "1")})
        admin.incremental_alter_configs("topic", topic, {
            "leader.replication.throttled.replicas": ("SET", f"0:{source}"),
            "follower.replication.throttled.replicas": ("SET", f"0:{destination}")})
        admin.alter_reassignments({(topic, 0): [source, destination]})
        moving = Reassignment(topic, 0, replicas=(source, destination), adding=(destination,), removing=())
        equal(lambda: [r for r in admin.list_reassignments() if r.topic == topic], [moving])
        assert admin.describe_replica_sizes(destination, {topic: [0]}).get((topic, 0), 0) < 3_000_000
        # The destination fetches, out of sync, from the leader: what the runner measures and throttles.
        partition = admin.describe_partitions([topic, "no-such-topic"])[(topic, 0)]
        assert (partition.leader, set(partition.replicas), partition.isr) == (source, {source, destination}, (source,))
        assert (topic, 0) in admin.describe_partitions(None)

        admin.alter_reassignments({(topic, 0): None})
        equal(lambda: [r for r in admin.list_reassignments() if r.topic == topic], [])
        admin.alter_reassignments({(topic, 0): None})  # cancelling what no longer moves is fine
    admin.incremental_alter_configs("topic", topic, {"leader.replication.throttled.replicas": ("DELETE", None),
                                                     "follower.replication.throttled.replicas": ("DELETE", None)})


def produce(bootstrap_servers: str, topic: str, megabytes: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks=1, linger_ms=20)
    try:
        payload = b"x" * 10_000
        for _ in range(megabytes * 100):
            producer.send(topic, payload)
        producer.flush(timeout=60)
    finally:
        producer.close()


def test_sasl_plain(kafka_cluster, caplog):
    assert kafka_cluster.users["alice"] == "alice-secret"  # as in PLAIN_JAAS
    props = {"bootstrap.servers": kafka_cluster.sasl_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}
    caplog.set_level(logging.DEBUG)
    with ClusterAdmin(client_kwargs(props)) as admin:
        brokers = admin.live_broker_ids()
        assert brokers == sorted(kafka_cluster.cluster.broker_ids)
        assert {volume.broker_id for volume in admin.describe_volumes(brokers, datetime.now(timezone.utc))} == set(brokers)
    wrong = ClusterAdmin({**client_kwargs(props), "sasl_plain_password": "not-alices-password",
                          "bootstrap_timeout_ms": 2000}, retry_deadline=0)
    # kafka-python retries a failed SASL handshake until bootstrap times out: it surfaces as a timeout.
    with pytest.raises(AdminError) as raised:
        wrong.live_broker_ids()
    wrong.close()
    assert "not-alices-password" not in str(raised.value)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Bootstrap complete" in logged  # kafka-python's INFO records are there...
    assert "alice-secret" not in logged and "not-alices-password" not in logged  # ...its request dumps are not


def test_a_store_read_whose_position_leaves_the_log_starts_over_rather_than_end_early(kafka_cluster, unique_name):
    """A removed override must not come back (after broker restarts, say). A read that meets a
    log no longer holding its position (a fetch out of range, a truncation found by KIP-320) read from the
    beginning again: kafka-python's default policy jumped to the end instead, and the read ended with the
    override's record read and its tombstone, further on, not. The fault here: DeleteRecords moves the log's start
    past the read's position between two of its fetches (the topic allows it: compact,delete)."""
    topic, override, filler = unique_name, "override/broker/2", b"x" * 1024
    config = client_kwargs({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    kafka_admin = KafkaAdminClient(**config)
    try:
        kafka_admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact,delete"})])
        with ClusterStore(config, topic=topic) as store:
            store.put(override, {"rate": 2_000_002})
            store.write_many({f"filler/{n}": {"pad": filler.decode()} for n in range(3000)})  # a fetch: 1 MiB
            store.delete(override)
            consumer = store._ready_consumer()
            poll, cut = consumer.poll, []

            def poll_then_move_the_log_start(*args, **kwargs):
                batches = poll(*args, **kwargs)
                if batches and not cut:
                    cut.append(kafka_admin.delete_records({TopicPartition(topic, 0): 2500}))
                return batches

            consumer.poll = poll_then_move_the_log_start
            records = store.read_all()
    finally:
        kafka_admin.close()
    assert cut, "the log's start was not moved during the read"
    assert override not in records and len(records) == 501, sorted(records)[:3]


def test_a_store_read_after_its_topics_leader_moved_ends_within_its_deadline(admin, kafka_cluster, unique_name):
    """kafka-python 3.0.12 asks ListOffsets of the leader it last knew again and again without refreshing its
    metadata (NOT_LEADER_OR_FOLLOWER is retried, not a reason for a refresh): after the records topic's leader
    moved, every agent's read would wait out its deadline, and the local verdict could not write. The leader
    moved with Kafka's own tools; the next read must not wait it out."""
    topic = unique_name
    config = client_kwargs({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    with ClusterStore({**config, "request_timeout_ms": 8000}, topic=topic) as store:
        store.put("override/global", {"rate": 10})
        assert store.read_all() == {"override/global": {"rate": 10}}  # its consumer knows the leader now
        [(key, partition)] = admin.describe_partitions([topic]).items()
        rotated = [*partition.replicas[1:], partition.replicas[0]]
        done = reassign_partitions(kafka_cluster.bootstrap_servers, {key: rotated}, "--execute")
        assert done.returncode == 0, done.stderr or done.stdout
        eventually(lambda: admin.list_reassignments() == [], 60, "the replicas rotated")
        elect_preferred_leader(kafka_cluster.bootstrap_servers, topic, 0)
        eventually(lambda: admin.describe_partitions([topic])[key].leader == rotated[0], 30, "the leader moved")
        assert store.read_all() == {"override/global": {"rate": 10}}


def test_cluster_store_records_are_shared_and_survive(admin, kafka_cluster, unique_name):
    topic = unique_name
    config = client_kwargs({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    with ClusterStore(config, topic=topic) as store:
        assert store.read_all() == {}
        store.put("quota/alice", {"replaced": None})
        store.put("override/global", {"rate": 10})
        store.put("quota/alice", {"replaced": 2048.0})
        store.delete("override/global")
        store.delete("never/written")
        assert store.read_all() == {"quota/alice": {"replaced": 2048.0}}
        with ClusterStore(config, topic=topic) as other:
            assert other.read_all() == {"quota/alice": {"replaced": 2048.0}}
            other.put("override/broker/1", {"rate": 5})
        assert store.read_all() == {"quota/alice": {"replaced": 2048.0}, "override/broker/1": {"rate": 5}}

    assert admin.describe_configs("topic", [topic]) == {topic: {"cleanup.policy": "compact"}}
    holders = [broker for broker in admin.live_broker_ids() if admin.describe_replica_sizes(broker, {topic: [0]})]
    assert len(holders) == min(3, len(kafka_cluster.cluster.broker_ids))
