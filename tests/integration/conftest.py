"""Integration tests: a real local Kafka cluster (tests/harness/cluster/local_cluster.py), real sidecars.

`kafka_cluster` is one cluster for the whole session, shared by tests that each work in their own
topics and principals (`unique_name`); `make_kafka_cluster` starts clusters of a test's own, for
tests that stop brokers or otherwise disturb the cluster.

The version matrix: GENERATIONS (harness/cluster/local_cluster.py) names the kinds of cluster a test can run on, as LocalKafkaCluster
arguments. A test runs on each with `@pytest.mark.parametrize("generation", GENERATIONS)` and
`make_kafka_cluster(**GENERATIONS[generation], ...)`, or through a module-scoped cluster fixture
parametrized over it (replication_throttles/conftest.py, package-scoped), so that the tests of a package share one
cluster per generation.
"""

import re
import uuid
from dataclasses import dataclass

import pytest

from harness.spark.aggregator import Aggregator
from harness.cluster.local_cluster import LocalKafkaCluster, SmallFilesystemUnavailable

SMALL_DIR_BROKER_ID = 3
SMALL_DIR_BYTES = 64 << 20

# Clusters running now, whose broker logs go into the report of a failed integration test; so does the log
# of the session's aggregator.
_running_clusters: list[LocalKafkaCluster] = []
_aggregators: list[Aggregator] = []


@dataclass(frozen=True)
class SessionKafka:
    """The session's cluster: brokers 1 to 3, broker 1 with two log dirs, broker 3 with one on a small filesystem."""

    cluster: LocalKafkaCluster
    bootstrap_servers: str
    sasl_bootstrap_servers: str
    users: dict[str, str]
    small_dir_broker_id: int
    small_dir_bytes: int
    small_dir: str | None  # None when no small filesystem could be mounted
    small_dir_unavailable_reason: str | None

    def require_small_dir(self) -> str:
        """The small log dir's path; skips the test when there is none."""
        if self.small_dir is None:
            pytest.skip(self.small_dir_unavailable_reason)
        return self.small_dir


@pytest.fixture(scope="session")
def kafka_cluster():
    small_dir, reason = None, None
    try:
        cluster = LocalKafkaCluster(
            brokers=3, log_dirs={1: 2}, small_log_dirs={(SMALL_DIR_BROKER_ID, 0): SMALL_DIR_BYTES}
        ).start()
        small_dir = cluster.log_dirs(SMALL_DIR_BROKER_ID)[0]
    except SmallFilesystemUnavailable as unavailable:
        reason = str(unavailable)
        cluster = LocalKafkaCluster(brokers=3, log_dirs={1: 2}).start()
    _running_clusters.append(cluster)
    yield SessionKafka(
        cluster=cluster,
        bootstrap_servers=cluster.bootstrap_servers,
        sasl_bootstrap_servers=cluster.sasl_bootstrap_servers,
        users=dict(cluster.users),
        small_dir_broker_id=SMALL_DIR_BROKER_ID,
        small_dir_bytes=SMALL_DIR_BYTES,
        small_dir=small_dir,
        small_dir_unavailable_reason=reason,
    )
    _running_clusters.remove(cluster)
    cluster.stop()


@pytest.fixture(scope="session")
def aggregator(kafka_cluster, tmp_path_factory) -> Aggregator:
    """One `quota-sidecar aggregate` for the session, its pipeline on the session's cluster: it decides for
    every agent of every test (`**aggregator.agent_properties`), whichever cluster the agent watches."""
    started = Aggregator(kafka_cluster.bootstrap_servers, tmp_path_factory.mktemp("aggregator")).start()
    _aggregators.append(started)
    try:
        # A first start reads from the end offsets it took when it started, not from the end Spark finds at its
        # first micro-batch: the first question asked once it says it decides is answered.
        yield started.wait_ready().warm_up()
    finally:
        _aggregators.remove(started)
        assert started.stop() == 0, started.process.log_tail()


@pytest.fixture
def pipeline(aggregator) -> dict[str, str]:
    """An agent's properties that reach the session's aggregator."""
    return aggregator.agent_properties


@pytest.fixture
def make_kafka_cluster():
    """make_kafka_cluster(**LocalKafkaCluster arguments) -> a started cluster, stopped after the test."""
    made = []

    def make(**arguments) -> LocalKafkaCluster:
        cluster = LocalKafkaCluster(**arguments)
        made.append(cluster)
        cluster.start()
        _running_clusters.append(cluster)
        return cluster

    yield make
    for cluster in made:
        if cluster in _running_clusters:
            _running_clusters.remove(cluster)
        cluster.stop()


@pytest.fixture
def sidecars():
    """In-process sidecars (wiring.build_sidecar) a test builds; each puts back what it set and closes, whatever the test did."""
    built = []
    yield built
    for sidecar in built:
        try:
            sidecar.cleanup()
        finally:
            sidecar.close()


@pytest.fixture
def unique_name(request) -> str:
    """A prefix no other test uses, for topics and principals: the test's name and a random suffix."""
    test_name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:40]
    return f"{test_name}-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(items):
    """A test run on a ZooKeeper-mode generation gets the `zookeeper` mark, as the modules of ZooKeeper's own have:
    `make test-zookeeper` runs them, `make test` leaves them out (its time)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "zookeeper-" in callspec.id:
            item.add_marker(pytest.mark.zookeeper)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for cluster in _running_clusters:
            report.sections.append((f"Kafka broker (and ZooKeeper) logs ({cluster.base_dir})", cluster.dump_logs()))
        report.sections += [aggregator.report_section() for aggregator in _aggregators]
    return report
