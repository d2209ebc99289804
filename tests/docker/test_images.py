"""The images of `make image` against a real local Kafka cluster, run as the chart runs them (uid 10001,
read-only root filesystem, /tmp a tmpfs, the broker's data dir read-only): the agent (quota-sidecar: no JVM, no
pyspark) decided for by the aggregator (quota-sidecar-spark: its Spark and Kafka connector inside, nothing loaded
at run time). make test-docker.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.agents import containers
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.cluster.ports import free_loopback_ports
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = pytest.mark.docker
EVERY_BYTE = 10 ** 18  # a limit every volume violates: the throttle engages at the first pass
CONFIG = "/etc/quota-sidecar"


@pytest.fixture(scope="module")
def cluster():
    reason = containers.why_not()
    if reason:
        pytest.skip(reason)
    with LocalKafkaCluster(brokers=1) as started:
        yield started


@pytest.fixture
def started():
    """Containers a test runs, removed after it whatever happened; their logs on failure are the test's."""
    running: list[containers.Container] = []
    yield running
    for container in running:
        container.remove()


@pytest.fixture(scope="module")
def aggregator(cluster, tmp_path_factory):
    """The aggregator image deciding for the cluster's agents, its pipeline the cluster itself."""
    config = write_properties(tmp_path_factory.mktemp("aggregator"), "aggregator.properties", {
        "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        "aggregator.checkpoint.location": "/tmp/checkpoint"})
    container = containers.run(containers.SPARK, "aggregate", "--config", f"{CONFIG}/aggregator.properties",
                               mounts={str(config): (CONFIG, True)})

    def deciding():
        if not container.running():
            raise RuntimeError(f"the aggregator's container stopped:\n{container.logs()[-3000:]}")
        return "deciding for the agents of" in container.logs()
    try:
        eventually(deciding, timeout=300, what="the aggregator deciding", every=2)
        yield container
    finally:
        container.remove()


def write_properties(directory: Path, name: str, properties: dict) -> Path:
    (directory / name).write_text("".join(f"{PREFIX}{k}={v}\n" for k, v in properties.items()))
    return containers.readable(directory)


def sidecar_config(directory: Path, cluster: LocalKafkaCluster, port: int, **extra) -> Path:
    directory.mkdir()
    return write_properties(directory, "sidecar.properties", {
        "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, "http.host": "127.0.0.1", "http.port": port,
        "storage.check.interval": "PT2S", "broker.id": 1, "storage.per.volume.limit.min.available.bytes": EVERY_BYTE,
        "storage.local.log.dirs": cluster.log_dirs(1)[0], **extra})


def get(url: str) -> tuple[int, dict | None]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, None
    except urllib.error.URLError:
        return 0, None


def wait_ready(container: containers.Container, port: int) -> dict:
    def ready():
        if not container.running():
            raise RuntimeError(f"the sidecar's container stopped:\n{container.logs()[-3000:]}")
        # decided for once by the aggregator (the local verdict may throttle first)
        return get(f"http://127.0.0.1:{port}/readyz?strict=1")[0] == 200 and \
            get(f"http://127.0.0.1:{port}/status")[1]["sidecar"]["decided_by"]["aggregator"]
    try:
        eventually(ready, timeout=300, what="/readyz?strict=1 answering 200 and the aggregator's decision", every=2)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{container.logs()[-3000:]}") from None
    return get(f"http://127.0.0.1:{port}/status")[1]


def run_sidecar(image: str, config_dir: Path, cluster: LocalKafkaCluster) -> containers.Container:
    log_dir = cluster.log_dirs(1)[0]
    return containers.run(image, "run", "--config", f"{CONFIG}/sidecar.properties",
                          mounts={str(config_dir): (CONFIG, True), log_dir: (log_dir, True)})


def test_the_agent_image_throttles_as_the_aggregator_image_decides_both_locked_down(cluster, aggregator, started,
                                                                                   tmp_path):
    port, = free_loopback_ports(1)
    agent = run_sidecar(containers.AGENT, sidecar_config(tmp_path / "config", cluster, port), cluster)
    started.append(agent)

    status = wait_ready(agent, port)

    assert status["throttle"]["factor"] == 0.0
    assert status["sidecar"]["decided_by"]["aggregator"], status["sidecar"]["decided_by"]  # a decision came
    assert status["local_watch"]["watched"] == [cluster.log_dirs(1)[0]]
    for container in (agent, aggregator):
        assert container.inspect("{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}") == "10001:10001 true"
        assert container.exec("id", "-u").strip() == "10001"
        assert "Read-only file system" in docker_exec_error(container, "touch", "/opt/quota-sidecar/x")


def test_the_agent_image_has_no_jvm_and_no_spark(cluster):
    listing = containers.docker("run", "--rm", "--entrypoint", "sh", containers.AGENT, "-c",
                                "ls /usr/bin /opt/quota-sidecar/bin; python3 -c 'import pyspark' 2>&1 || true")
    assert "java" not in listing
    assert "No module named 'pyspark'" in listing


def docker_exec_error(container: containers.Container, *command: str) -> str:
    try:
        container.exec(*command)
    except RuntimeError as error:
        return str(error)
    return ""
