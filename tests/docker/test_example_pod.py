"""The chart's complete example (example.enabled) run as one broker pod in the Docker engine: the broker
container runs the example's start script (its ConfigMap) in the quota-sidecar-kafka image, and the sidecar
container runs beside it in the same network namespace, each with the command, args, env, mounts and locked-down
security context the chart renders. kwok runs no containers (make test-chart); this runs them (make test-docker).

One replica: the pod gets a network namespace of its own (only loopback), where its DNS names (the voter's and
the advertised listener's) resolve to 127.0.0.1 through /etc/hosts, as the cluster's DNS resolves them to the
pod's address. Several pods would need a network between them, which the project's engine does not make.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import containers
from harness.chart import container_env, containers_named, expand, helm_or_skip, render, volume_files
from harness.waiting import eventually

pytestmark = pytest.mark.docker
NAMESPACE = "default"
EVERY_BYTE = 10 ** 18  # a limit every volume violates: the sidecar throttles its broker at the first pass
PROBE = ("import sys, urllib.request, urllib.error\n"
         "try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)\n"
         "except urllib.error.HTTPError as error: print(error.code)\n"
         "except OSError: print(0)\n")


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> list[dict]:
    reason = containers.why_not((containers.FULL, containers.KAFKA))
    if reason:
        pytest.skip(reason)
    helm = helm_or_skip(tmp_path_factory.mktemp("helm-home"))
    return render(helm, ["example.enabled=true", "example.replicas=1", "config.storage\\.check\\.interval=PT2S",
                         f"config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes={EVERY_BYTE}"])


@pytest.fixture
def pod(example, tmp_path):
    """The example's pod 0 as the kubelet would start it: its containers, removed after the test."""
    statefulset = next(d for d in example if d["kind"] == "StatefulSet")
    name = f"{statefulset['metadata']['name']}-0"
    service = statefulset["spec"]["serviceName"]
    fields = {"metadata.labels['apps.kubernetes.io/pod-index']": "0", "metadata.name": name,
              "metadata.namespace": NAMESPACE}
    data = tmp_path / "data"  # the volume claim; writable by the broker's uid, as the pod's fsGroup makes it
    data.mkdir(mode=0o777)
    data.chmod(0o777)
    started: list[containers.Container] = []
    network, hosts = "none", {f"{name}.{service}.{NAMESPACE}.svc": "127.0.0.1"}
    try:
        for container_name in ("kafka", "quota-sidecar"):  # the broker's container owns the pod's network
            container, = containers_named([statefulset], container_name)
            started.append(run_as_kubelet(container, statefulset, example, fields, data, tmp_path, network, hosts))
            network, hosts = f"container:{started[0].name}", None
        yield dict(zip(("kafka", "quota-sidecar"), started))
    finally:
        for container in started:
            container.remove()


def run_as_kubelet(container: dict, statefulset: dict, documents: list[dict], fields: dict[str, str], data: Path,
                   work: Path, network: str, hosts: dict[str, str] | None) -> containers.Container:
    """`docker run` of a rendered container: ConfigMaps and Secrets as directories of files, the volume claim
    as `data`, emptyDirs on /tmp as containers.run's tmpfs, its env, and its command with $(VAR) expanded."""
    security = container["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (10001, 10001)  # what containers.run runs as
    assert security["readOnlyRootFilesystem"] and security["capabilities"] == {"drop": ["ALL"]}
    volumes = {volume["name"]: volume for volume in statefulset["spec"]["template"]["spec"]["volumes"]}
    mounts = {}
    for mount in container["volumeMounts"]:
        volume = volumes.get(mount["name"])
        if volume is None:
            mounts[str(data)] = (mount["mountPath"], mount.get("readOnly", False))
        elif "emptyDir" in volume:
            assert mount["mountPath"] == "/tmp", mount
        else:
            directory = work / f"{container['name']}-{mount['name']}"
            directory.mkdir()
            for file_name, content in volume_files(documents, volume).items():
                (directory / file_name).write_text(content)
            mounts[str(containers.readable(directory))] = (mount["mountPath"], mount.get("readOnly", False))
    env = container_env(container, fields)
    command = [expand(item, env) for item in container["command"] + container.get("args", [])]
    return containers.run(container["image"], *command[1:], mounts=mounts, env=env, entrypoint=command[0],
                          network=network, hosts=hosts)


def test_the_examples_broker_starts_from_its_script_and_its_sidecar_throttles_it(pod, example):
    kafka, sidecar = pod["kafka"], pod["quota-sidecar"]

    def started() -> bool:
        if not kafka.running():
            raise RuntimeError(f"the broker's container stopped:\n{kafka.logs()[-3000:]}")
        return "Kafka Server started" in kafka.logs()
    eventually(started, timeout=180, what="the example's broker started", every=2)
    properties = kafka.exec("cat", "/tmp/server.properties").splitlines()
    statefulset = next(d for d in example if d["kind"] == "StatefulSet")
    pod_address = f"{statefulset['metadata']['name']}-0.{statefulset['spec']['serviceName']}.{NAMESPACE}.svc"
    assert "node.id=0" in properties and f"controller.quorum.voters=0@{pod_address}:9093" in properties
    assert f"advertised.listeners=PLAINTEXT://{pod_address}:9092" in properties
    assert "offsets.topic.replication.factor=1" in properties  # min(replicas, 3)

    probe, = (c["readinessProbe"]["httpGet"] for c in containers_named(example, "quota-sidecar"))
    readiness = f"http://127.0.0.1:8080{probe['path']}"

    def ready() -> bool:
        if not sidecar.running():
            raise RuntimeError(f"the sidecar's container stopped:\n{sidecar.logs()[-3000:]}")
        return sidecar.exec("python3", "-c", PROBE, readiness).strip() == "200"
    try:
        eventually(ready, timeout=300, what="the sidecar's readiness probe answering 200", every=2)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{sidecar.logs()[-3000:]}") from None
    status = json.loads(sidecar.exec("quota-sidecar", "status", "--json", "--url", "http://127.0.0.1:8080"))

    assert status["sidecar"]["broker_id"] == 0  # the pod's ordinal
    assert status["local_watch"]["watched"] == ["/var/lib/kafka/data"]  # the broker's volume, read-only
    assert status["throttle"]["factor"] == 0.0  # the limit is violated: the pod's broker is throttled
