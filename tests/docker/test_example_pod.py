"""The chart's complete example (example.enabled) run as one broker pod in the Docker engine, in the kubelet's
order: a pause container holding the pod's network namespace, the init containers one after the other
(kafka-format formats the data volume; a native sidecar starts and passes its startup probe), then the
containers: the broker runs the example's start script (its ConfigMap) in the quota-sidecar-kafka image, the
sidecar runs beside it. Each with the command, args, env, mounts and locked-down security context the chart
renders. The aggregator's Deployment runs beside them, in the same network namespace, the example's Service name
resolving to the broker there; so does the uninstall's pre-delete hook Job, while the agent still runs. kwok runs
no containers (make test-chart); this runs them (make test-docker).

One replica: the pod's network namespace has only loopback, where its DNS names (the voter's and the advertised
listener's) resolve to 127.0.0.1 through /etc/hosts, as the cluster's DNS resolves them to the pod's address.
Several pods would need a network between them, which the project's engine does not make.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.agents import containers
from harness.agents.chart import container_env, expand, helm_or_skip, render, volume_files
from harness.cluster.small_filesystem import mount_small_filesystem, unmount
from harness.waiting import eventually

pytestmark = pytest.mark.docker
NAMESPACE = "default"
EVERY_BYTE = 10 ** 18  # a limit every volume violates: the sidecar throttles its broker at the first pass
SIDECAR = "http://127.0.0.1:8080"
PROBE = ("import sys, urllib.request, urllib.error\n"
         "try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)\n"
         "except urllib.error.HTTPError as error: print(error.code)\n"
         "except OSError: print(0)\n")

# A producer of its own client id (the default user's quota), from inside the pod: the bytes the broker
# acknowledged in argv[2] seconds, sending 100 kB records one at a time.
FLOOD = ("import sys, time\n"
         "from kafka import KafkaProducer\n"
         "from kafka.errors import KafkaError\n"
         "producer = KafkaProducer(bootstrap_servers=sys.argv[1], client_id='flood', acks=1, linger_ms=0,\n"
         "                         max_in_flight_requests_per_connection=1, request_timeout_ms=4000,\n"
         "                         delivery_timeout_ms=5000, max_block_ms=20000)\n"
         "payload, acked, end = b'x' * 100_000, 0, time.monotonic() + float(sys.argv[2])\n"
         "while time.monotonic() < end:\n"
         "    try:\n"
         "        producer.send('flood', payload).get(timeout=max(0.5, end - time.monotonic()))\n"
         "        acked += len(payload)\n"
         "    except KafkaError:\n"
         "        pass\n"
         "print(acked)\n"
         "try:\n"
         "    producer.close(timeout=1)\n"
         "except Exception:\n"
         "    pass\n")
# The client quotas in force on the pod's broker, every entity with a user in it, read with a client of their own
# from inside the pod: {entity: {key: value}}, the entity as Python writes it (None: the default user).
QUOTAS = ("import json, sys\n"
          "from quota_sidecar.kafka_clients.admin import ClusterAdmin\n"
          "with ClusterAdmin({'bootstrap_servers': [sys.argv[1]]}) as admin:\n"
          "    found = admin.describe_user_quotas()\n"
          "print(json.dumps({repr(entity): keys for entity, keys in found.items() if keys}))\n")
HANDED_BACK = "this agent writes nothing more"  # the agent's WARNING once `quota-sidecar cleanup` ran
VALIDITY = 20  # throttle.factor.validity.duration, in seconds: the aggregator stays away for longer
MiB = 1 << 20
VOLUME, LIMIT = 256 * MiB, 160 * MiB  # the broker's data volume and the free space it keeps: ~90 MiB to the limit


@pytest.fixture(scope="module")
def helm(tmp_path_factory) -> list[str]:
    reason = containers.why_not()
    if reason:
        pytest.skip(reason)
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))


class Pod:
    """The example StatefulSet's pod 0, its containers started as the kubelet starts them."""

    def __init__(self, documents: list[dict], work: Path, data_size: int | None = None):
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
        self.mounted: list[Path] = []
        if data_size is not None:  # a volume of its own, that a flood can fill
            mount_small_filesystem(self.data, data_size, self.mounted)
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

    def probe(self, container: containers.Container, probe: dict) -> int:
        """The status an httpGet probe gets now, from inside the pod (0: nothing answers)."""
        url = f"{SIDECAR}{probe['httpGet']['path']}"
        return int(container.exec("python3", "-c", PROBE, url, check=False).strip() or 0)

    def sidecar(self) -> tuple[containers.Container, dict]:
        """The sidecar's container and its spec as rendered (a container or a native sidecar)."""
        spec = next(c for c in self.spec["containers"] + self.spec.get("initContainers", [])
                    if c["name"] == "quota-sidecar")
        return self.running["quota-sidecar"], spec

    def status(self) -> dict:
        """`quota-sidecar status -o json` inside the sidecar's container, from its endpoint."""
        return json.loads(self.running["quota-sidecar"].exec("quota-sidecar", "status", "-o", "json", "--url", SIDECAR))

    def decided(self, timeout: float = 300) -> dict:
        """The status once the aggregator has decided for the sidecar: ready does not wait for it."""
        try:
            return eventually(lambda: (seen := self.status())["sidecar"]["decided_by"]["aggregator"]
                              and seen["throttle"]["source"] == "computed" and seen, timeout=timeout,
                              what="the aggregator's first decision", every=3)
        except AssertionError as error:
            raise AssertionError(f"{error}\naggregator:\n{self.running['aggregator'].logs()[-3000:]}") from None

    def remove(self) -> None:
        for container in reversed(list(self.running.values())):
            container.remove()
        left = unmount(self.mounted)
        assert not left, f"left mounted: {left}"


@pytest.mark.parametrize("native", [False, True], ids=["sidecar-container", "native-sidecar"])
def test_the_examples_broker_starts_from_its_script_and_its_sidecar_throttles_it(helm, tmp_path, native):
    pod = Pod(render(helm, ["example.enabled=true", "example.replicas=1", f"example.nativeSidecar={native}",
                            "config.storage\\.check\\.interval=PT2S",
                            f"config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes={EVERY_BYTE}"]),
              tmp_path)
    try:
        pod.start()
        kafka, (sidecar, sidecar_spec) = pod.running["kafka"], pod.sidecar()
        pod.wait_for_probe(sidecar, sidecar_spec["readinessProbe"], timeout=300)
        status = pod.decided()
        properties = kafka.exec("cat", "/tmp/server.properties").splitlines()

        assert kafka.running(), kafka.logs()[-3000:]
        assert "node.id=0" in properties and f"controller.quorum.voters=0@{pod.address}:9093" in properties
        assert f"advertised.listeners=PLAINTEXT://{pod.address}:9092" in properties
        assert "offsets.topic.replication.factor=1" in properties  # min(replicas, 3)
        assert status["sidecar"]["broker_id"] == 0  # the pod's ordinal
        assert status["local_watch"]["watched"] == ["/var/lib/kafka/data"]  # the broker's volume, read-only
        assert status["throttle"]["factor"] == 0.0  # the limit is violated: the pod's broker is throttled
    finally:
        pod.remove()


def test_with_the_aggregator_stopped_past_the_validity_the_broker_stays_ready_and_its_verdict_holds(helm, tmp_path):
    """The aggregator stopped for longer than the validity: every pass fails for want of a decision and the
    fallback factor (1.0: no throttle) takes over. The sidecar in the broker's pod stays ready (a NotReady broker
    pod is an outage) and its status says the decisions are stale; a flood onto the broker's volume is still held
    by the local verdict (1 B/s), and the volume does not fill."""
    pod = Pod(render(helm, ["example.enabled=true", "example.replicas=1", "example.nativeSidecar=true",
                            "config.storage\\.check\\.interval=PT2S",
                            f"config.throttle\\.factor\\.validity\\.duration=PT{VALIDITY}S",
                            f"config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes={LIMIT}"]),
              tmp_path, data_size=VOLUME)
    try:
        pod.start()
        sidecar, sidecar_spec = pod.sidecar()
        assert pod.decided()["throttle"]["factor"] == 1.0  # room below the limit
        containers.docker("stop", pod.running["aggregator"].name)  # stopped by hand: not started again
        stale = eventually(lambda: (seen := pod.status())["throttle"]["source"] == "fallback" and seen,
                           timeout=4 * VALIDITY + 60, what="the fallback after the validity", every=2)
        readiness = pod.probe(sidecar, sidecar_spec["readinessProbe"])
        table = sidecar.exec("quota-sidecar", "status", "--url", SIDECAR)

        assert readiness == 200, f"{sidecar_spec['readinessProbe']['httpGet']['path']} answered {readiness}"
        assert stale["throttle"]["stale_since"] is not None and stale["throttle"]["age_seconds"] > VALIDITY
        assert "decisions STALE since " in table

        acked = int(sidecar.exec("python3", "-c", FLOOD, f"{pod.address}:9092", "30").strip().splitlines()[-1])
        held = pod.status()
        free = os.statvfs(pod.data)

        assert default_producer_rate(held) == 1, held["quotas_in_force"]  # the verdict's: the fallback lifts
        assert acked < VOLUME - LIMIT + 64 * MiB, f"{acked} bytes acknowledged in 30 s"
        assert free.f_bavail * free.f_frsize > LIMIT - 64 * MiB  # unthrottled, 30 s fill the volume
        assert pod.probe(sidecar, sidecar_spec["readinessProbe"]) == 200
        assert pod.probe(sidecar, sidecar_spec["livenessProbe"]) == 200
    finally:
        pod.remove()


def test_the_uninstall_hook_job_hands_back_the_throttle_and_the_agent_still_running_writes_it_no_more(helm, tmp_path):
    """`helm uninstall`'s pre-delete hook, as rendered (the Job's `cleanup` container, the agents' ConfigMap), run
    in the pod's network namespace while the agent still runs, as the hook runs before the pods stop: it exits 0,
    the quotas the agent wrote to throttle its broker are gone, and the agent, still running and still told by the
    aggregator to throttle, logs that it writes nothing more and does not write them again in the passes after."""
    documents = render(helm, ["example.enabled=true", "example.replicas=1", "example.nativeSidecar=true",
                              "config.storage\\.check\\.interval=PT2S",
                              f"config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes={EVERY_BYTE}"])
    job = next(d for d in documents if d["kind"] == "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    job_spec = job["spec"]["template"]["spec"]
    hook = next(c for c in job_spec["containers"] if c["name"] == "cleanup")
    pod = Pod(documents, tmp_path)
    try:
        pod.start()
        sidecar, sidecar_spec = pod.sidecar()
        pod.wait_for_probe(sidecar, sidecar_spec["readinessProbe"], timeout=300)
        assert pod.decided()["throttle"]["factor"] == 0.0  # the limit is violated: the pod's broker is throttled
        bootstrap = f"{pod.address}:9092"
        throttled = quotas_in_force(sidecar, bootstrap)
        assert throttled.get("None", {}).get("producer_byte_rate") is not None, throttled  # the default user's

        cleanup = pod.run(hook, network=f"container:{pod.running['pause'].name}", spec=job_spec)
        exit_code = containers.docker("wait", cleanup.name, timeout=300).strip()
        output = cleanup.logs()

        assert exit_code == "0", f"the hook Job exited {exit_code}:\n{output[-3000:]}"
        assert "producer_byte_rate: " in output and " -> none" in output, output[-3000:]
        assert quotas_in_force(sidecar, bootstrap) == {}
        # The Job waited poll.timeout after telling the agents, so a pass under way has ended; the next reads it.
        try:
            eventually(lambda: HANDED_BACK in sidecar.logs(), timeout=30, what=f"the agent's {HANDED_BACK!r}")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{sidecar.logs()[-3000:]}") from None

        time.sleep(10 * 2)  # ten passes' worth, the aggregator still deciding a throttle for this broker
        after = sidecar.logs().split(HANDED_BACK, 1)[1]
        written = [line for line in after.splitlines() if " quota_sidecar.act." in line]

        assert sidecar.running() and pod.running["kafka"].running()
        assert quotas_in_force(sidecar, bootstrap) == {}
        assert not written, "\n".join(written)
        assert pod.probe(sidecar, sidecar_spec["livenessProbe"]) == 200  # it serves on until the pod stops
    finally:
        pod.remove()


def quotas_in_force(container: containers.Container, bootstrap: str) -> dict:
    return json.loads(container.exec("python3", "-c", QUOTAS, bootstrap).strip().splitlines()[-1])


def default_producer_rate(status: dict):
    rows = [row for row in status["quotas_in_force"] if row["entity"] == "<default user>"]
    return rows[0]["producer_byte_rate"] if rows else None
