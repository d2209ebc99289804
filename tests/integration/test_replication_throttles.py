"""Replication throttles end to end: a real `quota-sidecar run` process beside each broker of a real cluster.

What the running sidecars must do (KIP-73 throttled replicas, kafka-kit autothrottle rates):
- a reassignment started with the Admin API gets Kafka's lists (sources = replicas minus adding in the
  leader list, adding in the follower list) and a rate on each source and destination; entries and rates
  someone else set survive; everything the sidecars set is gone once the move is over, also when a
  sidecar was restarted, crashed or cleaned up in the middle of it;
- overrides set through one sidecar's API, or `quota-sidecar throttle`, take effect on every broker and
  survive restarts; changes without the token are refused;
- the disk guard pauses a move into a nearly full volume; KIP-956 remote quotas are set and cleaned up;
- `status --direct` reads the cluster and writes nothing; `run --cleanup` leaves the cluster as it found it,
  but for a value someone changed after the sidecar wrote it (on Kafka 3.9 in ZooKeeper mode too, with the
  znode volumes and the records in ZooKeeper).

A move on loopback is over in well under a second unless it is throttled from its first fetch, and a
sidecar throttles a move only once it has seen it. So each test holds its move with one broker down:
the destination (for the disk guard: the source) is stopped before the reassignment starts and started
again once the sidecars of the running brokers have written their side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from harness import waiting
from harness.connect_server import ConnectServer
from harness.kafka_tools import reassign_partitions
from harness.local_cluster import (BEFORE_KIP_827, BEFORE_KIP_827_NAME, GENERATIONS, LocalKafkaCluster,
                                   SmallFilesystemUnavailable)
from harness.sidecar_process import EXECUTABLE, SidecarFleet, SidecarProcess, http
from harness.zookeeper_server import children
from quota_sidecar.admin import ClusterAdmin
from quota_sidecar.cluster_store import ClusterStore
from quota_sidecar.cordons import KEY as CORDONED
from quota_sidecar.errors import RetryableAdminError
from quota_sidecar.observation import UNLIMITED
from quota_sidecar.properties import SIDECAR_CLIENT_ID
from quota_sidecar.quotas import PRODUCE
from quota_sidecar.zookeeper_session import ZooKeeperSession
from quota_sidecar.zookeeper_store import ZooKeeperStore
from quota_sidecar.znode_volumes import VOLUMES_PATH
from quota_sidecar.throttles import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, REMOTE_COPY,
                                     REMOTE_FETCH, RULE_REASONS)

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]

PREFIX = "client.quota.callback.static."
TOKEN = "replication-test-token"
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
# The module's sidecars: rates between the floor and 90 % (the default max percent) of the capacity,
# wherever in that range this host's network use puts them. Either way a 3 MiB partition takes a minute.
CAPACITY, MIN_RATE = 40_000, 10_000
MAX_RATE = CAPACITY * 90 // 100
MOVE_BYTES = 3 << 20
# A throttled fetch brings at most this much of a partition before the quota is checked again (KIP-73
# is optimistic; Kafka's default is 1 MiB): a throttled move advances in small steps.
BROKER_PROPERTIES = {"replica.fetch.max.bytes": str(64 << 10)}
REACTION = 150  # s: a few passes of every sidecar, on 2 cores shared with other clusters


# ---------------------------------------------------------------- sidecar processes


def fleet_of(cluster: LocalKafkaCluster, spark_url: str, work_dir: Path, report, **settings: str) -> SidecarFleet:
    """One sidecar per broker, all with the same settings, their logs in a failed test's report."""
    fleet = SidecarFleet(cluster.broker_ids, work_dir,
                         lambda broker: sidecar_properties(cluster, broker, spark_url, settings))
    report.sources += list(fleet)
    return fleet


def sidecar_properties(cluster: LocalKafkaCluster, broker: int, spark_url: str, settings: dict) -> dict[str, str]:
    return {
        "node.id": str(broker),
        PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT3S",  # with replication passes in between
        PREFIX + "replication.check.interval": "PT1S",
        PREFIX + "storage.per.volume.limit.min.available.bytes": "1",
        PREFIX + "api.token": TOKEN,
        PREFIX + "spark.url": spark_url,
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


# ---------------------------------------------------------------- fixtures


class _FailureReport:
    """Puts the sidecar logs, and the broker logs of this module's cluster, into a failed test's report."""

    def __init__(self):
        self.sources: list = []  # anything with report_section() -> (title, text)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if report.failed:
            report.sections += [source.report_section() for source in self.sources]
        return report


class _ClusterLogs:
    def __init__(self, cluster: LocalKafkaCluster):
        self.cluster = cluster

    def report_section(self) -> tuple[str, str]:
        return f"Kafka broker logs ({self.cluster.base_dir})", self.cluster.dump_logs()


@pytest.fixture(scope="module", autouse=True)
def report(request):
    plugin = _FailureReport()
    request.config.pluginmanager.register(plugin, f"{__name__}.report")
    yield plugin
    request.config.pluginmanager.unregister(plugin)


@pytest.fixture(autouse=True)
def _test_logs(report):
    """Logs a test adds to the report stay until its own report is made, then go."""
    kept = list(report.sources)
    yield
    report.sources[:] = kept


@pytest.fixture(scope="module")
def spark_url():
    """One Spark Connect server for every sidecar of the module, instead of an embedded Spark in each."""
    with ConnectServer() as server:
        yield server.url


@pytest.fixture(scope="module")
def work_dir():
    with tempfile.TemporaryDirectory(prefix="replication-throttles-") as path:
        yield Path(path)


# Every generation a test of this module may run on (the module's cluster fixture's parameter).
MATRIX = {**GENERATIONS, BEFORE_KIP_827_NAME: BEFORE_KIP_827}


def pytest_generate_tests(metafunc):
    """Tests marked both_generations run on Kafka 3.9 in ZooKeeper mode too, and with before_kip_827=True on
    Kafka 3.2 as well (its moves and rates need nothing DescribeLogDirs' sizes give); the others on KRaft only.
    The module's cluster and sidecars are made once per generation and shared by its tests.

    The tests that hold a move with its destination down cannot run on ZooKeeper mode: its controller
    refuses a reassignment onto a broker that is not alive (KRaft takes a fenced one). The move there is
    held by Kafka's own tool and its --throttle instead."""
    if "cluster" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("both_generations")
        generations = ["kraft-4.4"] if marker is None else [
            *GENERATIONS, *([BEFORE_KIP_827_NAME] if marker.kwargs.get("before_kip_827") else [])]
        metafunc.parametrize("cluster", generations, indirect=True, scope="module")


@pytest.fixture(scope="module")
def cluster(report, request):
    """Brokers 1, 2, 3 for the module's tests; each test works in topics of its own."""
    with LocalKafkaCluster(brokers=3, broker_properties=BROKER_PROPERTIES, **MATRIX[request.param]) as cluster:
        report.sources.append(_ClusterLogs(cluster))
        yield cluster


@pytest.fixture(scope="module")
def fleet(cluster, spark_url, work_dir, report):
    fleet = fleet_of(cluster, spark_url, work_dir, report).start()
    # A first poll may fail while Spark warms up on a loaded machine; a move started then can be over (the
    # reassign tool's at 1 MB/s takes seconds) before any sidecar saw it. Tests start once every one passed.
    waiting.eventually(lambda: all(sidecar.status()["throttle"]["last_success"] for sidecar in fleet.sidecars.values()),
                       180, "a successful poll of every sidecar")
    yield fleet
    assert fleet.stop() == {1: 0, 2: 0, 3: 0}, "a sidecar failed its clean-up at the end of the module"


@pytest.fixture(scope="module")
def admin(cluster):
    with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")}) as admin:
        yield admin


@pytest.fixture(scope="module")
def store(cluster, fleet):
    with ClusterStore({"bootstrap_servers": cluster.bootstrap_servers.split(",")}) as store:
        yield store


@pytest.fixture
def settled(fleet, admin, store):
    """Every sidecar running; after the test no move, no override and no rate left for the next one."""
    yield fleet
    admin.alter_reassignments({(move.topic, move.partition): None for move in admin.list_reassignments()})
    for key in store.read_all():
        if json.loads(key)[0] == "override":
            store.delete(key)
    for sidecar in fleet.sidecars.values():
        if sidecar.process is None or sidecar.process.poll() is not None:
            sidecar.stop()
            sidecar.start(cleanup=True).wait_ready()
    try:
        eventually(lambda: _equal(sidecar_records(store), {}))  # at once, unless the test failed
    finally:  # rates a failed test set as an operator
        for broker in fleet.sidecars:
            admin.incremental_alter_configs("broker", broker, {key: ("DELETE", None) for key in RATE_KEYS})


# ---------------------------------------------------------------- tests


def test_disk_guard_pauses_a_move_into_a_nearly_full_volume_and_remote_quotas_come_and_go(
        make_kafka_cluster, spark_url, work_dir, report, unique_name, request):
    """Broker 2's only log dir is a 32 MiB filesystem with less than the 24 MiB the limit wants free.
    (Three brokers: stopping one of two would leave the KRaft quorum without a majority.)

    A move into it gets follower rate 1 (the guard) from its first fetch and stays where it is while the
    source would send megabytes a second; once space is freed the guard lifts and the move completes.
    KIP-956 quotas: set on both brokers, the copy quota lifted on the violating one, and on clean-up
    removed, or put back to what an operator had set.

    Cordoning is off here: on Kafka 4.3+ a sidecar cordons the violating dir, and Kafka then refuses a move
    into a broker whose every dir is cordoned. The guard is for moves that started before the dir
    violated, brokers older than 4.3, and the opt-out.
    """
    try:
        cluster = make_kafka_cluster(brokers=3, small_log_dirs={(2, 0): 32 << 20},
                                     broker_properties={**BROKER_PROPERTIES, "file.delete.delay.ms": "1000"})
    except SmallFilesystemUnavailable as unavailable:
        pytest.skip(str(unavailable))
    limit = 24 << 20
    moved, filler = f"{unique_name}-moved", f"{unique_name}-filler"
    create_topic(cluster, moved, {0: [1]})
    create_topic(cluster, filler, {0: [2]})
    produce(cluster, moved, [0])
    produce(cluster, filler, [0], size=12 << 20)  # before the sidecars: their quotas would stop it
    admin = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})
    request.addfinalizer(admin.close)
    (small,) = admin.describe_volumes([2], datetime.now(timezone.utc))
    assert small.available_bytes < limit, f"the filler did not fill broker 2's volume: {small}"
    admin.incremental_alter_configs("broker", 1, {REMOTE_FETCH: ("SET", "1234567")})  # an operator's
    (work_dir / unique_name).mkdir()
    fleet = fleet_of(cluster, spark_url, work_dir / unique_name, report,
                  storage_per_volume_limit_min_available_bytes=str(limit),
                  replication_capacity_bytes_per_second="10000000",
                  replication_min_rate_bytes_per_second="2000000",
                  remote_copy_max_bytes_per_second="5000000",
                  remote_fetch_max_bytes_per_second="6000000",
                  remote_copy_lift_on_violation="true",
                  storage_cordon_log_dirs="false")
    try:
        fleet.start()
        remote = (REMOTE_COPY, REMOTE_FETCH)
        quotas = {REMOTE_COPY: 5000000, REMOTE_FETCH: 6000000}
        eventually(lambda: _equal([broker_configs(admin, b, remote) for b in (1, 2, 3)],
                                  [quotas, {REMOTE_COPY: UNLIMITED, REMOTE_FETCH: 6000000}, quotas]))

        with broker_down(cluster, 1):  # the source: nothing moves before broker 2's side is throttled
            admin.alter_reassignments({(moved, 0): [2]})
            eventually(lambda: _equal(lists(admin, moved), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: {"0:2"}}))
            eventually(lambda: _equal(broker_configs(admin, 2), {FOLLOWER_RATE: 1}))
            done = cli("status", "--json", "--config", str(fleet[2].config_path))
            assert done.returncode == 0, done.stderr
            status = json.loads(done.stdout)
            assert status["sidecar"]["mode"] == "running", status["sidecar"]  # this sidecar's view
            (guard,) = status["replication"]["brokers"]
            assert (guard["role"], guard["follower_rate"], guard["reason"]) == ("follower", 1, "disk_guard")
        eventually(lambda: _equal(lists(admin, moved), {LEADER_REPLICAS: {"0:1"}, FOLLOWER_REPLICAS: {"0:2"}}))
        source = eventually(lambda: _rate_at_least(admin, 1, LEADER_RATE, 2_000_000))

        # Paused: at the source's rate the whole 3 MiB would take under two seconds. This waits on purpose:
        # what is checked is that nothing happens in the meantime.
        before = admin.describe_replica_sizes(2, {moved: [0]}).get((moved, 0), 0)
        time.sleep(20)
        after = admin.describe_replica_sizes(2, {moved: [0]}).get((moved, 0), 0)
        assert moving(admin, moved) == [0], "the move into the nearly full volume was not paused"
        assert after - before < 512 << 10 and after < 1 << 20, (before, after, source)
        assert broker_configs(admin, 2) == {FOLLOWER_RATE: 1}

        delete_topic(cluster, filler)
        eventually(lambda: _equal(moving(admin, moved), []))  # the guard lifted: the move completed
        eventually(lambda: _equal(lists(admin, moved), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()}))
        eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
        eventually(lambda: _equal(broker_configs(admin, 2, remote), quotas))
    finally:
        codes = fleet.stop()
    assert codes == {1: 0, 2: 0, 3: 0}
    eventually(lambda: _equal([broker_configs(admin, b, remote) for b in (1, 2, 3)],
                              [{REMOTE_FETCH: 1234567}, {}, {}]))  # the operator's put back, the rest gone


def test_lists_and_rates_follow_the_move_and_go_when_it_is_done(settled, cluster, admin, store, unique_name):
    """Two partitions move onto broker 3: T-0 [1, 2] -> [2, 3] and T-1 [2, 1] -> [1, 3].

    Kafka lists them as replicas (2, 3, 1) and (1, 3, 2), adding 3: sources 1 and 2, destination 3.
    An operator had put `0:9` and `1:2` in the leader list, `0:8` in the follower list and a follower
    rate on broker 3 before; all of it is there again once the move is done. The move is finished by a
    global override set with `quota-sidecar throttle set --autoremove`, which goes with the move.
    """
    fleet, topic = settled, unique_name
    create_topic(cluster, topic, {0: [1, 2], 1: [2, 1]})
    produce(cluster, topic, [0, 1])
    admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("APPEND", "0:9,1:2"),
                                                     FOLLOWER_REPLICAS: ("APPEND", "0:8")})
    admin.incremental_alter_configs("broker", 3, {FOLLOWER_RATE: ("SET", "777777")})
    operator_lists = {LEADER_REPLICAS: {"0:9", "1:2"}, FOLLOWER_REPLICAS: {"0:8"}}
    eventually(lambda: _equal(lists(admin, topic), operator_lists))

    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3], (topic, 1): [1, 3]})
        eventually(lambda: _equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2", "0:9", "1:1", "1:2"}))
        for source in (1, 2):
            eventually(lambda: assert_throttled(admin, source, LEADER_RATE))
    eventually(lambda: _equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3", "0:8", "1:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))

    assert moving(admin, topic) == [0, 1]
    assert lists(admin, topic) == {LEADER_REPLICAS: {"0:1", "0:2", "0:9", "1:1", "1:2"},
                                   FOLLOWER_REPLICAS: {"0:3", "0:8", "1:3"}}
    for broker, (role, key) in {1: ("leader", LEADER_RATE), 2: ("leader", LEADER_RATE),
                                3: ("follower", FOLLOWER_RATE)}.items():
        assert_throttled(admin, broker, key)
        row = eventually(lambda: _status_shows(admin, fleet[broker], broker, role))
        assert row["reason"] in RULE_REASONS, row
    scraped = eventually(lambda: _metrics_show_rate(admin, fleet[3], 3, "follower"))
    assert scraped["quota_sidecar_throttle_factor"] == 1.0
    assert {labels["broker_id"] for labels, _ in scraped["quota_sidecar_volume_available_bytes"]} == {"1", "2", "3"}
    assert {labels["direction"] for labels, _ in scraped["quota_sidecar_network_bytes_per_second"]} == {"tx", "rx"}
    records = sidecar_records(store)
    assert records[("entries", 1, topic, "leader")] == {"entries": ["0:1", "1:1"]}
    assert records[("entries", 2, topic, "leader")] == {"entries": ["0:2"]}, "1:2 is the operator's"
    assert records[("entries", 3, topic, "follower")] == {"entries": ["0:3", "1:3"]}
    assert records[("config", 3, FOLLOWER_RATE)]["replaced"] == 777777

    done = cli("throttle", "set", "50000000", "--autoremove", "--url", fleet[2].url, token=TOKEN)
    assert done.returncode == 0, done.stderr
    eventually(lambda: _equal(moving(admin, topic), []))
    eventually(lambda: _equal(lists(admin, topic), operator_lists))
    eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {FOLLOWER_RATE: 777777}]))
    eventually(lambda: _equal(sidecar_records(store), {}))
    eventually(lambda: _equal(http("GET", fleet[1].url + "/throttle")[1]["override"], None))  # autoremove
    admin.incremental_alter_configs("broker", 3, {FOLLOWER_RATE: ("DELETE", None)})


@pytest.mark.both_generations(before_kip_827=True)
def test_after_kafka_reassign_partitions_verify_no_throttle_comes_back(settled, cluster, admin, store, unique_name):
    """Kafka's own tool: `--execute --throttle 1000000`; the sidecars set their rates over it; paused, they
    miss the rest: the operator raises the throttle (`--additional --throttle`, as KIP-73 advises) and
    `--verify` after the move removes every throttle. Resumed, the sidecars must not write back the 1 MB/s
    they had replaced (they did: a stale throttle stayed behind)."""
    fleet, topic, initial = settled, unique_name, 1_000_000
    create_topic(cluster, topic, {0: [1]})
    produce(cluster, topic, [0], size=6 << 20)  # 6 s at the tool's throttle: the sidecars see the move first
    move = {(topic, 0): [2]}
    started = reassign_partitions(cluster.bootstrap_servers, move, "--execute", "--throttle", str(initial))
    assert started.returncode == 0, started.stdout + started.stderr
    # The tool set both rates on both brokers; each sidecar replaces the one of its broker's role.
    eventually(lambda: _sidecar_rate_beside(admin, 1, LEADER_RATE, FOLLOWER_RATE, initial))
    eventually(lambda: _sidecar_rate_beside(admin, 2, FOLLOWER_RATE, LEADER_RATE, initial))
    assert sidecar_records(store)[("config", 2, FOLLOWER_RATE)]["replaced"] == initial
    for broker in (1, 2):
        fleet[broker].send(signal.SIGSTOP)
    try:
        raised = reassign_partitions(cluster.bootstrap_servers, move, "--execute", "--additional",
                                     "--throttle", "100000000")
        assert raised.returncode == 0, raised.stdout + raised.stderr
        eventually(lambda: _equal(moving(admin, topic), []))
        verified = reassign_partitions(cluster.bootstrap_servers, move, "--verify")
        assert verified.returncode == 0 and "Clearing broker-level throttles" in verified.stdout, verified.stdout
        eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2)], [{}, {}]))
    finally:
        for broker in (1, 2):
            fleet[broker].send(signal.SIGCONT)
    eventually(lambda: _equal({r for r in sidecar_records(store) if r[0] == "config"}, set()))  # let go
    assert [broker_configs(admin, b) for b in (1, 2)] == [{}, {}], "a throttle came back after --verify"
    assert fleet[2].first_line(f"{FOLLOWER_RATE}: none in force, changed by someone else"), fleet[2].log_tail(30)


def test_what_a_sidecar_wrote_is_removed_after_a_restart_a_crash_or_a_cleanup_mid_move(
        settled, cluster, admin, store, unique_name):
    """R-0 moves from [1, 2] to [2, 3]; in the middle of it sidecar 1 stops with --cleanup, sidecar 2
    without it, sidecar 3 is killed. Only sidecar 1's entries and rate go then; all three come back,
    and once the move is cancelled nothing any of them wrote is left, the operator's `0:9` aside."""
    fleet, topic = settled, unique_name
    assert fleet.stop([2]) == {2: 0}
    fleet.start([2], cleanup=False)
    create_topic(cluster, topic, {0: [1, 2]})
    produce(cluster, topic, [0])
    admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("APPEND", "0:9")})

    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3]})
        eventually(lambda: _equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2", "0:9"}))
        for source in (1, 2):
            eventually(lambda: assert_throttled(admin, source, LEADER_RATE))
    eventually(lambda: _equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))

    fleet[3].send(signal.SIGKILL)
    assert fleet.stop([1, 2]) == {1: 0, 2: 0}
    assert fleet[3].stop(None) == -signal.SIGKILL
    assert moving(admin, topic) == [0]
    eventually(lambda: _equal(lists(admin, topic), {LEADER_REPLICAS: {"0:2", "0:9"}, FOLLOWER_REPLICAS: {"0:3"}}))
    eventually(lambda: _equal(broker_configs(admin, 1), {}))
    assert_throttled(admin, 2, LEADER_RATE)
    assert_throttled(admin, 3, FOLLOWER_RATE)

    fleet.start()
    eventually(lambda: _equal(lists(admin, topic), {LEADER_REPLICAS: {"0:1", "0:2", "0:9"},
                                                    FOLLOWER_REPLICAS: {"0:3"}}))
    eventually(lambda: assert_throttled(admin, 1, LEADER_RATE))
    assert set(sidecar_records(store)) == {("entries", 1, topic, "leader"), ("entries", 2, topic, "leader"),
                                           ("entries", 3, topic, "follower"), ("config", 1, LEADER_RATE),
                                           ("config", 2, LEADER_RATE), ("config", 3, FOLLOWER_RATE)}

    admin.alter_reassignments({(topic, 0): None})
    eventually(lambda: _equal(moving(admin, topic), []))
    eventually(lambda: _equal(lists(admin, topic), {LEADER_REPLICAS: {"0:9"}, FOLLOWER_REPLICAS: set()}))
    eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
    eventually(lambda: _equal(sidecar_records(store), {}))


def test_a_topic_deleted_in_the_middle_of_its_move_leaves_nothing_behind(
        settled, cluster, admin, store, unique_name):
    """The topic's configs and its move go with it; the sidecars forget the entries they had written
    there and go on with the rest: the rates of the move go too."""
    topic = unique_name
    create_topic(cluster, topic, {0: [1, 2]})
    produce(cluster, topic, [0])
    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3]})
        eventually(lambda: _equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2"}))
    eventually(lambda: _equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))
    assert {key[1] for key in sidecar_records(store) if key[0] == "entries"} == {1, 2, 3}

    delete_topic(cluster, topic)

    eventually(lambda: _equal(moving(admin, topic), []))
    eventually(lambda: _equal(sidecar_records(store), {}))
    eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))


@pytest.mark.both_generations(before_kip_827=True)
def test_overrides_set_through_one_sidecar_reach_every_broker_and_survive_restarts(settled, admin):
    """Broker overrides apply without a move, in both roles, each by the sidecar beside that broker."""
    fleet = settled
    wanted = {1: 1_000_001, 2: 2_000_002, 3: 3_000_003}
    for broker in (2, 3):
        assert http("PUT", f"{fleet[1].url}/throttle/{broker}", {"rate": wanted[broker]}, TOKEN) == \
            (200, {"broker_id": broker, "override": {"rate": wanted[broker]}})
    done = cli("throttle", "set", str(wanted[1]), "--broker", "1", "--url", fleet[1].url, token=TOKEN)
    assert done.returncode == 0, done.stderr

    def in_force():
        for broker, rate in wanted.items():
            assert broker_configs(admin, broker) == {LEADER_RATE: rate, FOLLOWER_RATE: rate}, broker
            row = own_status(fleet[broker])
            assert (row["leader_rate"], row["follower_rate"], row["reason"]) == (rate, rate, "broker_override")

    eventually(in_force)
    assert http("GET", f"{fleet[3].url}/throttle/2") == (200, {"broker_id": 2, "override": {"rate": 2_000_002}})

    assert fleet.stop() == {1: 0, 2: 0, 3: 0}  # --cleanup: the rates go with the sidecars...
    eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
    fleet.start()  # ...and the overrides, kept in the cluster, bring them back
    eventually(in_force)
    done = cli("throttle", "get", "--broker", "1", "--url", fleet[2].url)
    assert done.returncode == 0 and json.loads(done.stdout)["override"] == {"rate": 1_000_001}, done

    assert http("DELETE", f"{fleet[3].url}/throttle/2", token=TOKEN) == (200, {"broker_id": 2, "removed": True})
    assert http("DELETE", f"{fleet[2].url}/throttle/3", token=TOKEN)[0] == 200
    done = cli("throttle", "remove", "--broker", "1", "--url", fleet[3].url, token=TOKEN)
    assert done.returncode == 0, done.stderr
    eventually(lambda: _equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))


def test_a_broker_override_throttles_the_catch_up_of_a_restarted_broker(settled, cluster, admin, store, unique_name):
    """Autothrottle's rule: a broker with an override has its out-of-sync replicas throttled as a follower.

    While broker 3 is down, its replica of C-0 [1, 3] falls out of the ISR and records are written to
    broker 1. Sidecar 3 puts `0:3` in the follower list then, so the catch-up after the restart runs at
    the override's rate from its first fetch; the entry goes once the replica is in sync again, and
    the emptied list goes with it rather than stay as an empty value.
    """
    fleet, topic, rate = settled, unique_name, 100_000  # 3 MiB take half a minute
    create_topic(cluster, topic, {0: [1, 3]})
    assert http("PUT", f"{fleet[1].url}/throttle/3", {"rate": rate}, TOKEN)[0] == 200
    eventually(lambda: _equal(broker_configs(admin, 3), {LEADER_RATE: rate, FOLLOWER_RATE: rate}))

    with broker_down(cluster, 3):
        produce(cluster, topic, [0])
        eventually(lambda: _equal(lists(admin, topic), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: {"0:3"}}))
        assert sidecar_records(store)[("entries", 3, topic, "follower")] == {"entries": ["0:3"]}
    restarted = eventually(lambda: admin.describe_replica_sizes(3, {topic: [0]})[(topic, 0)])
    assert restarted < MOVE_BYTES // 2, f"the restarted replica had {restarted} B at once: not throttled"
    assert 3 not in admin.describe_partitions([topic])[(topic, 0)].isr

    eventually(lambda: _equal(3 in admin.describe_partitions([topic])[(topic, 0)].isr, True))
    eventually(lambda: _equal(admin.describe_configs("topic", [topic], [FOLLOWER_REPLICAS])[topic], {}))
    assert ("entries", 3, topic, "follower") not in sidecar_records(store)
    assert http("DELETE", f"{fleet[2].url}/throttle/3", token=TOKEN)[0] == 200
    eventually(lambda: _equal(broker_configs(admin, 3), {}))


def test_opt_in_clears_rates_other_tools_left_once_no_move_was_seen_for_a_while(
        settled, cluster, admin, spark_url, work_dir, report):
    """`replication.cleanup.foreign.after`: rates a finished `kafka-reassign-partitions --throttle` left on
    broker 2 go after that long without a move; without the setting (the fleet's sidecars) they stay."""
    leftovers = {LEADER_RATE: 123_456, FOLLOWER_RATE: 654_321}
    admin.incremental_alter_configs("broker", 2, {key: ("SET", str(rate)) for key, rate in leftovers.items()})
    time.sleep(5)  # several passes of the fleet's sidecar 2, which must not touch them
    assert broker_configs(admin, 2) == leftovers

    sweeper = SidecarProcess("sidecar-2-clearing-foreign-rates", work_dir, sidecar_properties(
        cluster, 2, spark_url, {"replication_cleanup_foreign_after": "PT3S"}))
    report.sources.append(sweeper)
    try:
        sweeper.start(cleanup=True).wait_ready()
        eventually(lambda: _equal(broker_configs(admin, 2), {}))
    finally:
        assert sweeper.stop() == 0


def test_changes_need_the_token_and_are_refused_where_none_is_configured(
        settled, cluster, spark_url, work_dir, report):
    fleet = settled
    body = {"rate": 5_000_000}
    assert http("PUT", fleet[1].url + "/throttle", body)[0] == 401
    assert http("PUT", fleet[1].url + "/throttle/2", body, token="not-" + TOKEN)[0] == 401
    assert http("DELETE", fleet[1].url + "/throttle", token="not-" + TOKEN)[0] == 401
    done = cli("throttle", "set", "5000000", "--url", fleet[1].url)
    assert done.returncode == 2 and "HTTP 401" in done.stderr, done
    assert http("GET", fleet[2].url + "/throttle") == (200, {"broker_id": None, "override": None})
    assert http("GET", fleet[2].url + "/throttle/2") == (200, {"broker_id": 2, "override": None})

    # A sidecar without api.token: the disk protection alone, checked once a minute.
    no_token = SidecarProcess("sidecar-without-token", work_dir, {
        PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT0S",
        PREFIX + "spark.url": spark_url,
    })
    report.sources.append(no_token)
    try:
        no_token.start(cleanup=True).wait_ready()
        status, answer = http("PUT", no_token.url + "/throttle", body, token=TOKEN)
        assert status == 403 and "api.token" in answer["error"], answer
        done = cli("throttle", "set", "5000000", "--url", no_token.url, token=TOKEN)
        assert done.returncode == 2 and "HTTP 403" in done.stderr, done
        assert http("GET", no_token.url + "/throttle") == (200, {"broker_id": None, "override": None})
    finally:
        no_token.stop()


@pytest.mark.both_generations
def test_status_direct_writes_nothing_and_cleanup_leaves_the_cluster_as_found_but_for_a_changed_value(
        settled, cluster, admin, store, spark_url, work_dir, report):
    """The real CLI against the real cluster, one sidecar beside broker 2 in place of the fleet: a limit every
    volume is below (the default user throttled, its quota of 5000 replaced), a broker override on broker 2;
    on Kafka 4.4 it cordons broker 2's dir; on Kafka 3.9 in ZooKeeper mode it publishes its znode volumes and
    keeps its records in ZooKeeper. An operator then sets broker 2's leader rate by hand. `status --direct`
    shows what is in force and writes nothing; `--cleanup` puts everything back but the operator's rate."""
    fleet = settled
    assert fleet.stop() == {1: 0, 2: 0, 3: 0}
    in_zookeeper = {} if not cluster.zookeeper_mode else {
        "zookeeper_connect": cluster.zookeeper_connect, "state_store": "zookeeper",
        "storage_local_log_dirs": ",".join(cluster.log_dirs(2)), "storage_local_watch_interval": "PT0S"}
    sidecar = SidecarProcess("sidecar-2-status-and-cleanup", work_dir, sidecar_properties(cluster, 2, spark_url, {
        "storage_per_volume_limit_min_available_bytes": str(1 << 50), "produce": "4000000", **in_zookeeper}))
    report.sources.append(sidecar)
    records = ZooKeeperStore(ZooKeeperSession(cluster.zookeeper_connect, 10.0)) if cluster.zookeeper_mode else store
    admin.alter_user_quotas({None: {PRODUCE: 5000.0}})
    found = _as_found(admin, records, cluster)
    try:
        sidecar.start(cleanup=True).wait_ready()
        assert http("PUT", sidecar.url + "/throttle/2", {"rate": 2_000_002}, TOKEN)[0] == 200
        rates = {LEADER_RATE: 2_000_002, FOLLOWER_RATE: 2_000_002}
        eventually(lambda: _equal(broker_configs(admin, 2), rates))
        eventually(lambda: _equal(admin.describe_user_quotas([None])[None], {PRODUCE: 1.0}))
        if not cluster.zookeeper_mode:  # cordoned.log.dirs is Kafka 4.3's
            eventually(lambda: _equal(admin.describe_configs("broker", [2], [CORDONED])["2"],
                                      {CORDONED: cluster.log_dirs(2)[0]}))
        else:
            assert children(cluster.zookeeper_connect, VOLUMES_PATH) == ["2"]
        running = _as_found(admin, records, cluster)

        done = cli("status", "--direct", "--json", "--config", str(sidecar.config_path))
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        assert _as_found(admin, records, cluster) == running, "status --direct wrote to the cluster"
        assert status["sidecar"]["mode"].startswith("direct") and status["throttle"]["factor"] == 0.0, status
        assert {(v["broker_id"], v["log_dir"]) for v in status["volumes"]} == {
            (b, d) for b in cluster.broker_ids for d in cluster.log_dirs(b)}
        assert {v["state"] for v in status["volumes"]} == {"VIOLATED"}
        if cluster.zookeeper_mode:  # DescribeLogDirs and, beside it, what sidecar 2 published
            assert [v["broker_id"] for v in status["volumes"] if v["published_available_bytes"]] == [2], status
        assert {row["entity"]: row[PRODUCE] for row in status["quotas_in_force"]} == {
            "<default user>": 1, f"client-id {SIDECAR_CLIENT_ID} (sidecar)": "unlimited"}
        (row,) = status["replication"]["brokers"]
        assert (row["leader_rate"], row["follower_rate"], row["reason"]) == (2_000_002, 2_000_002, "broker_override")

        admin.incremental_alter_configs("broker", 2, {LEADER_RATE: ("SET", "777777")})  # an operator, by hand
        sidecar.wait_for_line(f"{LEADER_RATE}: 777777 in force, changed by someone else", REACTION)
        assert sidecar.stop() == 0  # --cleanup
        after = _as_found(admin, records, cluster)
        assert after["brokers"][2] == {**found["brokers"][2], LEADER_RATE: "777777"}, after["brokers"]
        assert [key for key in after["records"] if json.loads(key)[0] != "override"] == [], after["records"]
        assert {**after, "brokers": found["brokers"], "records": found["records"]} == found
    finally:
        sidecar.stop()
        admin.incremental_alter_configs("broker", 2, {LEADER_RATE: ("DELETE", None)})
        admin.alter_user_quotas({None: {PRODUCE: None}})
        for key in records.read_all():
            records.delete(key)  # the override, the operator's
        if records is not store:
            records.close()
        fleet.start()


def _as_found(admin: ClusterAdmin, records, cluster: LocalKafkaCluster) -> dict:
    """What a sidecar may change, as an operator reads it: quotas, broker configs, records, published znodes."""
    keys = [*RATE_KEYS, *([] if cluster.zookeeper_mode else [CORDONED])]
    return {"quotas": admin.describe_user_quotas([None, (None, SIDECAR_CLIENT_ID)]),
            "brokers": {b: admin.describe_configs("broker", [b], keys)[str(b)] for b in cluster.broker_ids},
            "records": records.read_all(),
            "znodes": children(cluster.zookeeper_connect, VOLUMES_PATH) if cluster.zookeeper_mode else None}


# ---------------------------------------------------------------- helpers for eventually()


def _equal(actual, expected):
    assert actual == expected
    return actual


def _sidecar_rate_beside(admin: ClusterAdmin, broker: int, key: str, other: str, other_rate: int) -> None:
    """`key` is the sidecar's rate; `other` is still what another tool set."""
    rates = broker_configs(admin, broker)
    assert set(rates) == {key, other} and MIN_RATE <= rates[key] <= MAX_RATE and rates[other] == other_rate, rates


def _rate_at_least(admin: ClusterAdmin, broker: int, key: str, floor: int) -> int:
    rate = broker_configs(admin, broker).get(key)
    assert rate is not None and rate >= floor, (broker, key, rate)
    return rate


def _metrics_show_rate(admin: ClusterAdmin, sidecar: SidecarProcess, broker: int, role: str) -> dict:
    """The sidecar's /metrics give the rate in force on its broker for the role; all of /metrics by name."""
    with urllib.request.urlopen(sidecar.url + "/metrics", timeout=30) as response:
        families = text_string_to_metric_families(response.read().decode())
    found = {}
    for family in families:
        samples = [(sample.labels, sample.value) for sample in family.samples]
        found[family.name] = samples[0][1] if samples and not samples[0][0] else samples
    rate = broker_configs(admin, broker).get(f"{role}.replication.throttled.rate")
    shown = [value for labels, value in found["quota_sidecar_replication_throttle_rate_bytes"]
             if labels["broker_id"] == str(broker) and labels["role"] == role]
    assert shown == [rate], (shown, rate)
    return found


def _status_shows(admin: ClusterAdmin, sidecar: SidecarProcess, broker: int, role: str) -> dict:
    """The sidecar's status names the role and the rate in force on its broker (which may move)."""
    rates = broker_configs(admin, broker)
    row = own_status(sidecar)
    assert row["role"] == role and row[f"{role}_rate"] == rates.get(f"{role}.replication.throttled.rate"), \
        (row, rates)
    return row
