"""The chart's complete example (example.enabled) run as one broker pod in the Docker engine, in the kubelet's
order: a pause container holding the pod's network namespace, the init containers one after the other
(kafka-format formats the data volume; a native sidecar starts and passes its startup probe), then the
containers: the broker runs the example's start script (its ConfigMap) in the quota-sidecar-kafka image, the
sidecar runs beside it. Each with the command, args, env, mounts and locked-down security context the chart
renders. The aggregator's Deployment runs beside them, in the same network namespace, the example's Service name
resolving to the broker there. kwok runs no containers (make test-chart); this runs them (make test-docker).

One replica: the pod's network namespace has only loopback, where its DNS names (the voter's and the advertised
listener's) resolve to 127.0.0.1 through /etc/hosts, as the cluster's DNS resolves them to the pod's address.
Several pods would need a network between them, which the project's engine does not make.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import containers
from harness.chart import container_env, expand, helm_or_skip, render, volume_files
from harness.waiting import eventually

pytestmark = pytest.mark.docker
NAMESPACE = "default"
EVERY_BYTE = 10 ** 18  # a limit every volume violates: the sidecar throttles its broker at the first pass
SIDECAR = "http://127.0.0.1:8080"
PROBE = ("import sys, urllib.request, urllib.error\n"
         "try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)\n"
         "except urllib.error.HTTPError as error: print(error.code)\n"
         "except OSError: print(0)\n")


@pytest.fixture(scope="module")
def helm(tmp_path_factory) -> list[str]:
    reason = containers.why_not()
    if reason:
        pytest.skip(reason)
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))


class Pod:
    """The example StatefulSet's pod 0, its containers started as the kubelet starts them."""

    def __init__(self, documents: list[dict], work: Path):
        self.documents = documents
        self.statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
        self.spec = self.statefulset["spec"]["template"]["spec"]
        self.name = f"{self.statefulset['metadata']['name']}-0"
        self.address = f"{self.name}.{self.statefulset['spec']['serviceName']}.{NAMESPACE}.svc"
        self.service = self.statefulset["spec"]["serviceName"]  # how the aggregator reaches the brokers
        self.fields = {"metadata.labels['apps.kubernetes.io/pod-index']": "0", "metadata.name": self.name,
                       "metadata.namespace": NAMESPACE}
        self.work = work
        self.data = work / "data"  # the volume claim; writable by the broker's uid, as the pod's fsGroup makes it
        self.data.mkdir()
        self.data.chmod(0o777)
        self.running: dict[str, containers.Container] = {}

    def start(self) -> None:
        pause = containers.run(containers.KAFKA, "infinity", entrypoint="sleep", network="none",
                               hosts={self.address: "127.0.0.1", self.service: "127.0.0.1"})
        self.running["pause"] = pause
        for container in self.spec.get("initContainers", []):
            started = self.run(container, network=f"container:{pause.name}")
            if container.get("restartPolicy") == "Always":  # a native sidecar: on once its startup probe passes
                self.wait_for_probe(started, container["startupProbe"], timeout=300)
            else:
                exit_code = containers.docker("wait", started.name, timeout=300).strip()
                assert exit_code == "0", f"init container {container['name']} failed:\n{started.logs()[-3000:]}"
        for container in self.spec["containers"]:
            self.run(container, network=f"container:{pause.name}")
        # The aggregator's pod: a container that exits (its broker not listening yet) is started again (Always).
        aggregator = next(d for d in self.documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]
        self.run(aggregator["containers"][0], network=f"container:{pause.name}", spec=aggregator,
                 restart=aggregator.get("restartPolicy", "Always") == "Always")

    def run(self, container: dict, network: str, spec: dict | None = None,
            restart: bool = False) -> containers.Container:
        """`docker run` of a rendered container of `spec` (the StatefulSet's by default): ConfigMaps and Secrets as
        directories of files, the volume claim as `data` (a claim of the spec's own, as a directory of its own),
        its emptyDir on /tmp as containers.run's tmpfs, its env, its command with $(VAR) expanded."""
        security = container["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"]) == (10001, 10001)  # what containers.run runs as
        assert security["readOnlyRootFilesystem"] and security["capabilities"] == {"drop": ["ALL"]}
        volumes = {volume["name"]: volume for volume in (spec or self.spec)["volumes"]}
        mounts = {}
        for mount in container["volumeMounts"]:
            volume = volumes.get(mount["name"])
            if volume is None:
                mounts[str(self.data)] = (mount["mountPath"], mount.get("readOnly", False))
            elif "persistentVolumeClaim" in volume:  # writable by the container's uid, as fsGroup makes it
                claim = self.work / volume["persistentVolumeClaim"]["claimName"]
                claim.mkdir()
                claim.chmod(0o777)
                mounts[str(claim)] = (mount["mountPath"], False)
            elif "emptyDir" in volume:
                assert mount["mountPath"] == "/tmp", mount
            else:
                directory = self.work / f"{container['name']}-{mount['name']}"
                directory.mkdir()
                for file_name, content in volume_files(self.documents, volume).items():
                    (directory / file_name).write_text(content)
                mounts[str(containers.readable(directory))] = (mount["mountPath"], mount.get("readOnly", False))
        env = container_env(container, self.fields)
        command = [expand(item, env) for item in container["command"] + container.get("args", [])]
        started = containers.run(container["image"], *command[1:], mounts=mounts, env=env, entrypoint=command[0],
                                 network=network, restart=restart)
        self.running[container["name"]] = started
        return started

    def wait_for_probe(self, container: containers.Container, probe: dict, timeout: float) -> None:
        """An httpGet probe, from inside the pod (the engine has no route into its network namespace)."""
        url = f"{SIDECAR}{probe['httpGet']['path']}"

        def answers() -> bool:
            if not container.running():
                raise RuntimeError(f"the container stopped:\n{container.logs()[-3000:]}")
            return container.exec("python3", "-c", PROBE, url, check=False).strip() == "200"
        try:
            eventually(answers, timeout=timeout, what=f"{url} answering 200", every=2)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{container.logs()[-3000:]}") from None

    def remove(self) -> None:
        for container in reversed(list(self.running.values())):
            container.remove()


@pytest.mark.parametrize("native", [False, True], ids=["sidecar-container", "native-sidecar"])
def test_the_examples_broker_starts_from_its_script_and_its_sidecar_throttles_it(helm, tmp_path, native):
    pod = Pod(render(helm, ["example.enabled=true", "example.replicas=1", f"example.nativeSidecar={native}",
                            "config.storage\\.check\\.interval=PT2S",
                            f"config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes={EVERY_BYTE}"]),
              tmp_path)
    try:
        pod.start()
        kafka, sidecar = pod.running["kafka"], pod.running["quota-sidecar"]
        sidecar_spec = next(c for c in pod.spec["containers"] + pod.spec["initContainers"]
                            if c["name"] == "quota-sidecar")
        try:
            pod.wait_for_probe(sidecar, sidecar_spec["readinessProbe"], timeout=300)
        except AssertionError as error:  # an agent is ready once decided for: the aggregator's side too
            raise AssertionError(f"{error}\naggregator:\n{pod.running['aggregator'].logs()[-3000:]}") from None
        properties = kafka.exec("cat", "/tmp/server.properties").splitlines()
        status = json.loads(sidecar.exec("quota-sidecar", "status", "--json", "--url", SIDECAR))

        assert kafka.running(), kafka.logs()[-3000:]
        assert "node.id=0" in properties and f"controller.quorum.voters=0@{pod.address}:9093" in properties
        assert f"advertised.listeners=PLAINTEXT://{pod.address}:9092" in properties
        assert "offsets.topic.replication.factor=1" in properties  # min(replicas, 3)
        assert status["sidecar"]["broker_id"] == 0  # the pod's ordinal
        assert status["local_watch"]["watched"] == ["/var/lib/kafka/data"]  # the broker's volume, read-only
        assert status["throttle"]["factor"] == 0.0  # the limit is violated: the pod's broker is throttled
        assert status["sidecar"]["decided_by"]["aggregator"], pod.running["aggregator"].logs()[-3000:]
    finally:
        pod.remove()
