"""pytest-docker end to end (make test-docker): compose.yaml starts a broker container, the agent's container
beside it, sharing its network namespace and reading its data volume read-only, as in a pod, and the aggregator's,
which decides for the agent through the broker's own pipeline topics. Kafka's own
producer benchmark floods the broker from this host until the volume reaches the limit: the sidecar throttles
producers; the topic is deleted: it lifts the throttle. `quota-sidecar status` runs inside the sidecar's container.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from harness.agents import containers
from harness.cluster.kafka_tools import producer_performance
from harness.cluster.local_cluster import _random_cluster_id
from harness.cluster.ports import free_loopback_ports
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = pytest.mark.docker
HERE = Path(__file__).resolve().parent
MiB = 1 << 20
VOLUME = 256 * MiB  # compose.yaml's tmpfs data volume
LIMIT = 160 * MiB   # min.available.bytes: a flood of ~100 MiB crosses it


@pytest.fixture(scope="session")
def compose_environment(tmp_path_factory):
    reason = containers.why_not()
    if reason:
        pytest.skip(reason)
    kafka_port, controller_port, http_port = free_loopback_ports(3)
    kafka_config = tmp_path_factory.mktemp("kafka-config")
    (kafka_config / "start.sh").write_text((HERE / "kafka-start.sh").read_text())
    sidecar_config = tmp_path_factory.mktemp("sidecar-config")
    properties = {"kafka.admin.bootstrap.servers": f"127.0.0.1:{kafka_port}", "http.host": "127.0.0.1",
                  "http.port": http_port, "storage.check.interval": "PT2S",
                  "storage.per.volume.limit.min.available.bytes": LIMIT,
                  "storage.local.log.dirs": "/var/lib/kafka/data", "broker.id": 1}
    (sidecar_config / "sidecar.properties").write_text("".join(f"{PREFIX}{k}={v}\n" for k, v in properties.items()))
    aggregator_config = tmp_path_factory.mktemp("aggregator-config")
    (aggregator_config / "aggregator.properties").write_text(
        f"{PREFIX}kafka.admin.bootstrap.servers=127.0.0.1:{kafka_port}\n"
        f"{PREFIX}aggregator.checkpoint.location=/var/lib/quota-sidecar-aggregator/checkpoint\n")
    environment = {"QS_VERSION": containers.VERSION, "QS_KAFKA_PORT": str(kafka_port),
                   "QS_CONTROLLER_PORT": str(controller_port), "QS_CLUSTER_ID": _random_cluster_id(),
                   "QS_KAFKA_CONFIG": str(containers.readable(kafka_config)),
                   "QS_SIDECAR_CONFIG": str(containers.readable(sidecar_config)),
                   "QS_AGGREGATOR_CONFIG": str(containers.readable(aggregator_config))}
    os.environ.update(environment)  # compose.yaml's ${...}, read by docker-compose, which pytest-docker runs
    os.environ.update({k: v for k, v in containers.docker_environment().items() if k == "DOCKER_HOST"})
    yield {"kafka": f"127.0.0.1:{kafka_port}", "http": f"http://127.0.0.1:{http_port}"}
    for key in environment:
        os.environ.pop(key, None)


# pytest-docker's fixtures, for Debian's docker-compose 1.29 (no `up --wait`; the test waits itself).
@pytest.fixture(scope="session")
def docker_compose_file(compose_environment):
    return str(HERE / "compose.yaml")


@pytest.fixture(scope="session")
def docker_compose_command():
    return "docker-compose"


@pytest.fixture(scope="session")
def docker_setup():
    return ["up -d"]


@pytest.fixture(scope="session")
def docker_compose_project_name():
    return f"quota-sidecar-test-{os.getpid()}"


def sidecar_status(docker_services, compose_environment) -> dict:
    """`quota-sidecar status -o json`, run inside the sidecar's container (the sidecar's own endpoint)."""
    output = docker_services._docker_compose.execute(
        f"exec -T sidecar quota-sidecar status -o json --url {compose_environment['http']}")
    return json.loads(output)


def test_a_flood_is_throttled_and_the_throttle_lifts(docker_services, compose_environment, tmp_path):
    def status():
        try:
            return sidecar_status(docker_services, compose_environment)
        except Exception as error:  # not up yet: compose exec fails, or the sidecar does not answer
            raise AssertionError(f"no status yet: {error}") from None

    try:
        first = eventually(lambda: status()["throttle"]["source"] == "computed" and status(), timeout=300,
                           what="the sidecar's first successful pass", every=3)
    except AssertionError as error:
        logs = docker_services._docker_compose.execute("logs --tail 20 sidecar aggregator").decode(errors="replace")
        raise AssertionError(f"{error}\n{logs}") from None
    assert first["throttle"]["factor"] == 1.0 and first["sidecar"]["broker_id"] == 1
    assert first["sidecar"]["decided_by"]["aggregator"], first["sidecar"]["decided_by"]  # the aggregator's container
    assert first["local_watch"]["watched"] == ["/var/lib/kafka/data"]

    flood = producer_performance(compose_environment["kafka"], "flood", records=200_000, record_size=1000,
                                 throughput=20_000, log_file=tmp_path / "flood.log", acks="1")
    try:
        throttled = eventually(lambda: status()["throttle"]["factor"] == 0.0 and status(), timeout=120,
                               what="the throttle engaged", every=1)
    finally:
        flood.terminate()
        flood.wait(timeout=30)
    assert default_producer_rate(throttled) == 1, throttled["quotas_in_force"]  # 1 B/s: producers stopped

    admin = KafkaAdminClient(bootstrap_servers=compose_environment["kafka"], client_id="compose-test")
    try:
        admin.delete_topics(["flood"])
    finally:
        admin.close()

    lifted = eventually(lambda: status()["throttle"]["factor"] == 1.0 and status(), timeout=120,
                        what="the throttle lifted once the topic was deleted", every=2)
    assert default_producer_rate(lifted) is None, lifted["quotas_in_force"]  # put back as it was: none


def default_producer_rate(status: dict):
    rows = [row for row in status["quotas_in_force"] if row["entity"] == "<default user>"]
    return rows[0]["producer_byte_rate"] if rows else None
