"""The replication-throttle tests' fixtures: one cluster and one fleet of sidecars (a real `quota-sidecar run`
beside each broker) per Kafka generation, and one Spark Connect server, shared by every test module here.

Package-scoped (this folder is a package for that): pytest orders the tests of all modules by generation, so
each generation's cluster starts once, and all of it stops once the package's last test is done.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from harness import waiting
from harness.cluster.local_cluster import BEFORE_KIP_827, BEFORE_KIP_827_NAME, GENERATIONS, LocalKafkaCluster
from harness.agents.replication_checks import BROKER_PROPERTIES, RATE_KEYS, assert_equal, eventually, fleet_of, sidecar_records
from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.kafka_clients.admin import ClusterAdmin


class _FailureReport:
    """Puts the sidecar logs, and the broker logs of the package's cluster, into a failed test's report."""

    def __init__(self):
        self.sources: list = []  # anything with report_section() -> (title, text)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if report.failed:
            report.sections += [source.report_section() for source in self.sources]
        return report


class ClusterLogs:
    def __init__(self, cluster: LocalKafkaCluster):
        self.cluster = cluster

    def report_section(self) -> tuple[str, str]:
        return f"Kafka broker logs ({self.cluster.base_dir})", self.cluster.dump_logs()


@pytest.fixture(scope="package", autouse=True)
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


@pytest.fixture(scope="package")
def pipeline(aggregator) -> dict[str, str]:
    """The agents' properties that reach the session's aggregator."""
    return aggregator.agent_properties


@pytest.fixture(scope="package")
def work_dir():
    with tempfile.TemporaryDirectory(prefix="replication-throttles-") as path:
        yield Path(path)


# Every generation a test here may run on (the cluster fixture's parameter).
MATRIX = {**GENERATIONS, BEFORE_KIP_827_NAME: BEFORE_KIP_827}


def pytest_generate_tests(metafunc):
    """Tests marked both_generations run on Kafka 3.9 in ZooKeeper mode too, and with before_kip_827=True on
    Kafka 3.2 as well (its moves and rates need nothing DescribeLogDirs' sizes give); the others on KRaft only.
    The package's cluster and sidecars are made once per generation and shared by its tests.

    The tests that hold a move with its destination down cannot run on ZooKeeper mode: its controller
    refuses a reassignment onto a broker that is not alive (KRaft takes a fenced one). The move there is
    held by Kafka's own tool and its --throttle instead."""
    if "cluster" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("both_generations")
        generations = ["kraft-4.4"] if marker is None else [
            *GENERATIONS, *([BEFORE_KIP_827_NAME] if marker.kwargs.get("before_kip_827") else [])]
        metafunc.parametrize("cluster", generations, indirect=True, scope="package")


@pytest.fixture(scope="package")
def cluster(report, request):
    """Brokers 1, 2, 3 for the package's tests; each test works in topics of its own."""
    with LocalKafkaCluster(brokers=3, broker_properties=BROKER_PROPERTIES, **MATRIX[request.param]) as cluster:
        report.sources.append(ClusterLogs(cluster))
        yield cluster


@pytest.fixture(scope="package")
def fleet(cluster, pipeline, work_dir, report):
    fleet = fleet_of(cluster, pipeline, work_dir, report).start()
    # A first poll may fail while Spark warms up on a loaded machine; a move started then can be over (the
    # reassign tool's at 1 MB/s takes seconds) before any sidecar saw it. Tests start once every one passed.
    waiting.eventually(lambda: all(sidecar.status()["throttle"]["last_success"] for sidecar in fleet.sidecars.values()),
                       180, "a successful poll of every sidecar")
    yield fleet
    assert fleet.stop() == {1: 0, 2: 0, 3: 0}, "a sidecar failed its clean-up at the end of the package"


@pytest.fixture(scope="package")
def admin(cluster):
    with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")}) as admin:
        yield admin


@pytest.fixture(scope="package")
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
        eventually(lambda: assert_equal(sidecar_records(store), {}))  # at once, unless the test failed
    finally:  # rates a failed test set as an operator
        for broker in fleet.sidecars:
            admin.incremental_alter_configs("broker", broker, {key: ("DELETE", None) for key in RATE_KEYS})

