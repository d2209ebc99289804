"""The images of `make image` against a real local Kafka cluster, run as the chart runs them (uid 10001,
read-only root filesystem, /tmp a tmpfs, the broker's data dir read-only): the full image with its embedded
Spark, and the thin one through a Spark Connect server run from the full image. make test-docker.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import containers
from harness.local_cluster import LocalKafkaCluster
from harness.ports import free_loopback_ports
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = pytest.mark.docker
EVERY_BYTE = 10 ** 18  # a limit every volume violates: the throttle engages at the first pass


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


def sidecar_config(directory: Path, cluster: LocalKafkaCluster, port: int, **extra) -> Path:
    directory.mkdir()
    properties = {"kafka.admin.bootstrap.servers": cluster.bootstrap_servers, "http.host": "127.0.0.1",
                  "http.port": port, "storage.check.interval": "PT2S", "broker.id": 1,
                  "storage.per.volume.limit.min.available.bytes": EVERY_BYTE,
                  "storage.local.log.dirs": cluster.log_dirs(1)[0], **extra}
    (directory / "sidecar.properties").write_text("".join(f"{PREFIX}{k}={v}\n" for k, v in properties.items()))
    return containers.readable(directory)


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
        return get(f"http://127.0.0.1:{port}/readyz")[0] == 200
    try:
        eventually(ready, timeout=300, what="/readyz answering 200", every=2)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{container.logs()[-3000:]}") from None
    return get(f"http://127.0.0.1:{port}/status")[1]


def run_sidecar(image: str, config_dir: Path, cluster: LocalKafkaCluster) -> containers.Container:
    log_dir = cluster.log_dirs(1)[0]
    return containers.run(image, "run", "--config", "/etc/quota-sidecar/sidecar.properties",
                          mounts={str(config_dir): ("/etc/quota-sidecar", True), log_dir: (log_dir, True)})


def test_the_full_image_throttles_as_non_root_on_a_read_only_root(cluster, started, tmp_path):
    port, = free_loopback_ports(1)
    sidecar = run_sidecar(containers.FULL, sidecar_config(tmp_path / "config", cluster, port), cluster)
    started.append(sidecar)

    status = wait_ready(sidecar, port)

    assert status["throttle"]["factor"] == 0.0 and status["sidecar"]["decided_by"] == {"spark": "embedded"}
    assert status["local_watch"]["watched"] == [cluster.log_dirs(1)[0]]
    assert sidecar.inspect("{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}") == "10001:10001 true"
    assert sidecar.exec("id", "-u").strip() == "10001"
    assert "Read-only file system" in docker_exec_error(sidecar, "touch", "/opt/quota-sidecar/x")


def listens(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def docker_exec_error(container: containers.Container, *command: str) -> str:
    try:
        container.exec(*command)
    except RuntimeError as error:
        return str(error)
    return ""


def test_the_thin_image_decides_on_a_shared_spark_connect_server(cluster, started, tmp_path):
    spark_port, port = free_loopback_ports(2)
    server = containers.run(containers.FULL, str(spark_port), entrypoint="spark-connect-server")
    started.append(server)
    eventually(lambda: listens(spark_port) or not server.running(), timeout=180, what="Spark Connect listening", every=1)
    assert server.running(), server.logs()[-3000:]
    sidecar = run_sidecar(containers.THIN, sidecar_config(tmp_path / "config", cluster, port,
                                                          **{"spark.url": f"sc://127.0.0.1:{spark_port}"}), cluster)
    started.append(sidecar)

    status = wait_ready(sidecar, port)

    assert status["throttle"]["factor"] == 0.0 and status["sidecar"]["decided_by"] == {"spark": f"sc://127.0.0.1:{spark_port}"}
    assert "java" not in sidecar.exec("sh", "-c", "ls /usr/bin /opt/quota-sidecar/bin")  # no JVM in it
    assert sidecar.inspect("{{.HostConfig.ReadonlyRootfs}}") == "true" and server.running()
