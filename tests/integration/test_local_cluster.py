"""The local Kafka cluster the integration tests run against is a real one, laid out as asked."""

import os
from pathlib import Path

import psutil
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from harness.cluster.kafka_tools import active_controller
from harness.cluster.local_cluster import BEFORE_KIP_827, GENERATIONS, LocalClusterError, LocalKafkaCluster, SmallFilesystemUnavailable
from harness.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.harness]

SMALL_BYTES = 16 << 20


def serving_broker_ids(bootstrap_servers: str) -> list[int]:
    with KafkaAdminClient(bootstrap_servers=bootstrap_servers) as admin:
        brokers = admin.describe_cluster()["brokers"]
    return sorted(broker["broker_id"] for broker in brokers if not broker["is_fenced"])


def create_topic(bootstrap_servers: str, topic: str, replication_factor: int = 3) -> None:
    with KafkaAdminClient(bootstrap_servers=bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication_factor)])


def round_trip(client_config: dict, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce the values, then read as many records back from the start of the topic."""
    producer = KafkaProducer(**client_config)
    try:
        for future in [producer.send(topic, value) for value in values]:
            future.get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        **client_config, auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=30_000
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return [record.value for _, record in zip(values, consumer)]
    finally:
        consumer.close()


def mounts_under(directory: Path) -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(f"{directory}/")]


def processes_using(directory: Path) -> list[psutil.Process]:
    return [
        process for process in psutil.process_iter(["cmdline"])
        if any(str(directory) in argument for argument in process.info["cmdline"] or [])
    ]


def test_the_session_cluster_serves_three_brokers(kafka_cluster):
    assert serving_broker_ids(kafka_cluster.bootstrap_servers) == [1, 2, 3]


def test_records_round_trip_over_plaintext(kafka_cluster, unique_name):
    create_topic(kafka_cluster.bootstrap_servers, unique_name)
    values = [b"one", b"two", b"three"]

    assert round_trip({"bootstrap_servers": kafka_cluster.bootstrap_servers}, unique_name, values) == values


def test_records_round_trip_over_sasl_as_alice(kafka_cluster, unique_name):
    create_topic(kafka_cluster.bootstrap_servers, unique_name)
    values = [b"one", b"two", b"three"]

    assert round_trip(kafka_cluster.cluster.sasl_client_config("alice"), unique_name, values) == values


def test_sasl_refuses_a_wrong_password(kafka_cluster):
    wrong_password = kafka_cluster.cluster.sasl_client_config("alice") | {"sasl_plain_password": "not-alice-secret"}

    with pytest.raises(KafkaError):
        KafkaAdminClient(**wrong_password, bootstrap_timeout_ms=2000).close()


def test_broker_1_reports_two_log_dirs(kafka_cluster):
    with KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers) as admin:
        [broker_1] = admin.describe_log_dirs(brokers=[1])

    reported = sorted(log_dir["log_dir"] for log_dir in broker_1["log_dirs"])
    assert len(reported) == 2
    assert reported == sorted(kafka_cluster.cluster.log_dirs(1))


def test_the_small_log_dir_is_a_size_limited_filesystem(kafka_cluster):
    small_dir = kafka_cluster.require_small_dir()
    stats = os.statvfs(small_dir)
    total_bytes = stats.f_blocks * stats.f_frsize

    assert os.path.ismount(small_dir)
    # tmpfs gives exactly the size asked; the ext4 fallback loses some to its own metadata.
    assert 0.75 * kafka_cluster.small_dir_bytes <= total_bytes <= kafka_cluster.small_dir_bytes
    with KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers) as admin:
        [broker] = admin.describe_log_dirs(brokers=[kafka_cluster.small_dir_broker_id])
    reported = [(log_dir["log_dir"], log_dir["total_bytes"]) for log_dir in broker["log_dirs"]]
    assert reported == [(small_dir, total_bytes)]


def test_a_stopped_broker_leaves_the_cluster_and_comes_back_with_its_data(make_kafka_cluster, unique_name):
    cluster = make_kafka_cluster(brokers=3)
    create_topic(cluster.bootstrap_servers, unique_name)
    partition_dir = Path(cluster.log_dirs(2)[0]) / f"{unique_name}-0"

    cluster.stop_broker(2)
    assert serving_broker_ids(cluster.bootstrap_servers) == [1, 3]

    cluster.start_broker(2)
    assert serving_broker_ids(cluster.bootstrap_servers) == [1, 2, 3]
    assert partition_dir.is_dir()


def test_controllers_alone_elect_another_leader_when_the_active_one_is_killed(make_kafka_cluster, unique_name):
    cluster = make_kafka_cluster(brokers=2, controllers=3)
    create_topic(cluster.bootstrap_servers, unique_name, replication_factor=2)
    killed = active_controller(cluster.bootstrap_servers)
    assert cluster.controller_ids == [101, 102, 103] and killed in cluster.controller_ids

    cluster.kill_broker(killed)
    assert eventually(lambda: active_controller(cluster.bootstrap_servers) != killed, timeout=30)
    assert cluster.exited_brokers() == set()  # killed here: not counted as exited by itself
    assert round_trip({"bootstrap_servers": cluster.bootstrap_servers}, unique_name, [b"a", b"b"]) == [b"a", b"b"]
    assert serving_broker_ids(cluster.bootstrap_servers) == [1, 2]

    cluster.start_broker(killed)
    assert active_controller(cluster.bootstrap_servers) in cluster.controller_ids


def test_stop_leaves_no_process_and_no_mount_behind(make_kafka_cluster):
    try:
        cluster = make_kafka_cluster(brokers=1, small_log_dirs={(1, 0): SMALL_BYTES})
    except SmallFilesystemUnavailable as unavailable:
        pytest.skip(str(unavailable))
    assert len(processes_using(cluster.base_dir)) == 1
    assert mounts_under(cluster.base_dir) == cluster.log_dirs(1)

    cluster.stop()
    cluster.stop()

    assert processes_using(cluster.base_dir) == []
    assert mounts_under(cluster.base_dir) == []
    assert not cluster.base_dir.exists()


def test_a_failed_start_says_why_and_leaves_nothing_behind():
    # The JVM refuses a 1 KiB heap: formatting fails after the small filesystem is mounted.
    cluster = LocalKafkaCluster(brokers=1, small_log_dirs={(1, 0): SMALL_BYTES}, jvm_options=["-Xmx1k"])
    with pytest.raises(LocalClusterError) as failure:
        cluster.start()
    if isinstance(failure.value, SmallFilesystemUnavailable):
        pytest.skip(str(failure.value))

    assert "formatting the storage of broker 1 failed" in str(failure.value)
    assert mounts_under(cluster.base_dir) == []
    assert not cluster.base_dir.exists()


def test_a_missing_classpath_says_to_run_make_kafka(tmp_path):
    cluster = LocalKafkaCluster(brokers=1, classpath_file=tmp_path / "kafka.classpath")

    with pytest.raises(LocalClusterError, match="run `make kafka`"):
        cluster.start()


def test_a_namespace_for_an_unknown_broker_is_refused():
    with pytest.raises(ValueError, match="network_namespaces: broker 4"):
        LocalKafkaCluster(brokers=3, network_namespaces={4: ("elsewhere", "10.231.0.14")})


@pytest.mark.netns
def test_a_broker_in_a_network_namespace_serves_on_its_address(make_kafka_cluster, unique_name):
    from harness.network.netns import TestNetwork, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no network namespaces on this machine: {reason}")
    with TestNetwork([1], rate_bytes_per_sec=50_000_000, subnet=2) as network:
        cluster = make_kafka_cluster(brokers=1, network_namespaces={1: (network.namespace(1), network.ip(1))})
        try:
            assert cluster.bootstrap_servers.startswith(f"{network.ip(1)}:")
            create_topic(cluster.bootstrap_servers, unique_name, replication_factor=1)
            values = [b"through", b"the", b"veth"]
            assert round_trip({"bootstrap_servers": cluster.bootstrap_servers}, unique_name, values) == values
        finally:
            cluster.stop()  # before its namespace goes


# -- ZooKeeper mode --------------------------------------------------------------------------------


def registered_in_zookeeper(cluster: LocalKafkaCluster) -> list[int]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    try:
        return sorted(int(broker_id) for broker_id in client.get_children("/brokers/ids"))
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("generation", [GENERATIONS["zookeeper-3.9"], BEFORE_KIP_827], ids=["3.9", "3.2"])
def test_a_zookeeper_mode_cluster_registers_its_brokers_in_zookeeper_and_serves(make_kafka_cluster, unique_name,
                                                                               generation):
    cluster = make_kafka_cluster(brokers=2, log_dirs={1: 2}, **generation)
    assert cluster.zookeeper_connect.endswith("/kafka")
    assert registered_in_zookeeper(cluster) == [1, 2]
    create_topic(cluster.bootstrap_servers, unique_name, replication_factor=2)
    values = [b"through", b"zookeeper", b"mode"]
    assert round_trip(cluster.sasl_client_config("alice"), unique_name, values) == values
    assert "binding to port" in cluster.zookeeper.log_file.read_text()  # ZooKeeper's own log...
    assert str(cluster.zookeeper.log_file) in cluster.dump_logs()  # ...in failure reports

    cluster.stop_broker(2)
    assert registered_in_zookeeper(cluster) == [1]
    cluster.start_broker(2)
    assert registered_in_zookeeper(cluster) == [1, 2]


def test_a_zookeeper_mode_cluster_leaves_no_process_behind(make_kafka_cluster):
    cluster = make_kafka_cluster(brokers=1, zookeeper=True)
    assert len(processes_using(cluster.base_dir)) == 2  # the broker and the ZooKeeper server

    cluster.stop()

    assert processes_using(cluster.base_dir) == []
    assert not cluster.base_dir.exists()


def test_the_secure_lab_speaks_sasl_ssl_and_mutual_tls_and_only_acls_count(tmp_path, unique_name):
    """StandardAuthorizer with allow.everyone.if.no.acl.found=false: a SCRAM user over SASL_SSL (the broker's
    certificate checked against the lab's CA, host name included) and a client certificate over SSL connect,
    and may do nothing until an ACL says so; Kafka's own kafka-acls grants it over the lab's PLAINTEXT."""
    from kafka.errors import TopicAuthorizationFailedError

    from harness.cluster.kafka_tools import run_tool
    from harness.cluster.secure_lab import SecureLab
    from quota_sidecar.configuration.admin_client import client_kwargs

    security = SecureLab(tmp_path / "tls", scram_users={"quota-sidecar": "s3cret"})
    with LocalKafkaCluster(brokers=1, security=security) as cluster:
        sasl_ssl = client_kwargs(security.sasl_ssl_properties(cluster.secure_bootstrap_servers(), "quota-sidecar"))
        topic = f"{unique_name}-secure"
        with KafkaAdminClient(**sasl_ssl) as admin:
            with pytest.raises(TopicAuthorizationFailedError):
                admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        granted = run_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", cluster.bootstrap_servers,
                           "--add", "--allow-principal", "User:quota-sidecar", "--operation", "CREATE",
                           "--topic", topic)
        assert granted.returncode == 0, granted.stderr or granted.stdout
        with KafkaAdminClient(**sasl_ssl) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])

        mtls = client_kwargs(security.mtls_properties(cluster.secure_bootstrap_servers("SSL"), "lab-client"))
        with KafkaAdminClient(**mtls) as admin:
            assert topic not in admin.list_topics()  # User:lab-client may not even describe it
    assert not list(tmp_path.rglob("*.jks"))  # PEM only
