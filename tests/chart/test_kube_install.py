"""The chart installed into a real Kubernetes control plane built from Go modules (tests/chart/kube/build.sh):
etcd, kube-apiserver (server-side validation and admission), kube-scheduler, kube-controller-manager, and kwok
running fake nodes, so that `helm install --wait` reaches Running without executing anything. make test-chart.

The Prometheus operator's kinds (PodMonitor, ServiceMonitor, PrometheusRule) are checked by the same server
against the operator's own CRDs (tests/chart/crds, a released version's), applied before the installs.

On kwok nothing runs, so where a container must really run (the aggregator as Spark's driver, its executors) it is
run here as the kubelet would, from what the server holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from harness.agents.chart import CHART, COMBINATIONS, OPERATOR_KINDS, ROOT, container_env, expand, render
from harness.agents.rendered_container import RenderedContainer, mounted, status, violated_limit
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.cluster.ports import free_loopback_ports
from harness.waiting import eventually

pytestmark = pytest.mark.chart
BIN = Path(os.environ.get("KUBE_BIN", ROOT / "build" / "tools" / "kube"))
ETCD = os.environ.get("ETCD", str(BIN / "etcd"))
TOKEN = "quota-sidecar-test-token"
FAKE_NODES = 3
OPERATOR_CRDS = Path(__file__).parent / "crds"


class ControlPlane:
    def __init__(self, work: Path):
        self.work = work
        self.processes: list[subprocess.Popen] = []
        self.kubeconfig = work / "kubeconfig"
        self.server = ""
        self.ca_cert = work / "certs" / "apiserver.crt"  # kube-apiserver's own, made at its first start

    def start(self, name: str, command: list[str]) -> None:
        log = open(self.work / f"{name}.log", "w")
        self.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True))

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()

    def kubectl(self, *arguments: str, input: str | None = None) -> str:
        return subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", *arguments], input=input,
                              capture_output=True, text=True, check=True).stdout

    def json(self, *arguments: str) -> dict:
        return json.loads(self.kubectl(*arguments, "-o", "json"))

    def log_tails(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text()[-1500:]}" for path in self.work.glob("*.log"))


def kwok_stages() -> list[str]:
    """The stage files kwok ships in its module: nodes become Ready and keep a heartbeat, pods reach Running."""
    found = subprocess.run(["go", "list", "-m", "-json", "sigs.k8s.io/kwok@latest"], capture_output=True, text=True,
                           cwd=BIN)
    directory = json.loads(found.stdout).get("Dir") if found.returncode == 0 else None
    if not directory:
        return []
    stages = Path(directory) / "kustomize" / "stage"
    return sorted(str(path) for kind in ("node/fast", "node/heartbeat", "pod/fast")
                  for path in (stages / kind).glob("*.yaml") if path.name != "kustomization.yaml")


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory, helm):
    missing = [path for path in (BIN / "kube-apiserver", BIN / "kube-scheduler", BIN / "kube-controller-manager",
                                 BIN / "kwok", Path(ETCD)) if not os.access(path, os.X_OK)]
    if missing:
        pytest.skip(f"no control plane binaries ({', '.join(p.name for p in missing)}): tests/chart/kube/build.sh")
    stages = kwok_stages()
    if not stages:
        pytest.skip("kwok's stage files not found in the Go module cache")
    work = tmp_path_factory.mktemp("kube")
    plane = ControlPlane(work)
    etcd_port, peer_port, api_port, scheduler_port, manager_port = free_loopback_ports(5)
    plane.server = f"https://127.0.0.1:{api_port}"
    subprocess.run(["openssl", "genrsa", "-out", str(work / "sa.key"), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(work / "sa.key"), "-pubout", "-out", str(work / "sa.pub")],
                   check=True, capture_output=True)
    (work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    plane.kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": plane.server,
                                                  "insecure-skip-tls-verify": True}}],
        "users": [{"name": "admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}]}))
    try:
        plane.start("etcd", [ETCD, f"--data-dir={work / 'etcd'}",
                             f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                             f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                             f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                             f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                             f"--initial-cluster=default=http://127.0.0.1:{peer_port}"])
        plane.start("kube-apiserver", [
            str(BIN / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            "--endpoint-reconciler-type=none", f"--cert-dir={work / 'certs'}", f"--token-auth-file={work / 'tokens.csv'}",
            "--authorization-mode=RBAC", f"--service-account-key-file={work / 'sa.pub'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true"])
        eventually(lambda: plane.kubectl("get", "--raw", "/readyz") == "ok", timeout=120, what="kube-apiserver ready",
                   every=1, retry_on=(subprocess.CalledProcessError,))
        plane.kubectl("apply", "--server-side", "-f", str(OPERATOR_CRDS))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        plane.start("kube-controller-manager", [
            str(BIN / "kube-controller-manager"), f"--kubeconfig={plane.kubeconfig}", "--leader-elect=false",
            f"--service-account-private-key-file={work / 'sa.key'}", "--use-service-account-credentials=false",
            "--bind-address=127.0.0.1", f"--secure-port={manager_port}"])
        plane.start("kube-scheduler", [
            str(BIN / "kube-scheduler"), f"--kubeconfig={plane.kubeconfig}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={scheduler_port}"])
        plane.start("kwok", [str(BIN / "kwok"), f"--kubeconfig={plane.kubeconfig}", "--manage-all-nodes=false",
                             "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                             *(f"--config={stage}" for stage in stages)])
        for index in range(FAKE_NODES):
            plane.kubectl("apply", "-f", "-", input=json.dumps(fake_node(f"kwok-node-{index}")))
        plane.kubectl("apply", "-f", "-", input=json.dumps(local_volumes(32)))
        yield plane
    except BaseException:
        print(plane.log_tails())
        raise
    finally:
        plane.stop()


def fake_node(name: str) -> dict:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def local_volumes(count: int) -> dict:
    """PersistentVolumes for the example's volume claims and the aggregator's checkpoint (no provisioner here), of
    storage class `manual`: one a claim, and every install keeps its own."""
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"data-{index}"},
         "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                  "hostPath": {"path": f"/var/lib/fake/{index}"}}} for index in range(count)]}


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_combination_installs_and_reaches_running(control_plane, helm, name):
    namespace = f"qs-{name}"[:63]
    settings = COMBINATIONS[name] + ["example.storageClassName=manual", "aggregator.checkpoint.storageClassName=manual"]
    warnings = install(control_plane, helm, namespace, settings)

    pods = control_plane.kubectl("get", "pods", "-n", namespace, "-o", "wide")
    assert "unknown field" not in warnings  # the server only warns of fields it would drop
    for document in render(helm, settings):  # in the server, as the CRD stores them
        if document["kind"] in OPERATOR_KINDS:
            control_plane.kubectl("get", document["kind"].lower(), document["metadata"]["name"], "-n", namespace)
    if name.startswith("example"):
        phases = json.loads(control_plane.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
        assert len(phases) >= 3 and {pod["status"]["phase"] for pod in phases} == {"Running"}, pods


def test_the_operator_kinds_are_checked_by_the_server(control_plane, helm):
    """A value the operator's CRD refuses (an interval Prometheus cannot parse) fails the install: the CRDs
    are in force, so the installs above were checked by the server too."""
    installed = subprocess.run([*helm, "install", "qs", str(CHART), f"--kubeconfig={control_plane.kubeconfig}",
                                "--namespace", "qs-bad-interval", "--create-namespace",
                                "--set", "monitoring.podMonitor=true", "--set", "monitoring.interval=half-a-minute"],
                               capture_output=True, text=True)

    assert installed.returncode != 0
    assert "PodMonitor.monitoring.coreos.com" in installed.stderr and "interval" in installed.stderr


def install(plane: ControlPlane, helm: list[str], namespace: str, settings: list[str]) -> str:
    """`helm install --wait` of the chart as release qs into `namespace`, asserted to succeed; what helm said."""
    arguments = [item for setting in settings for item in ("--set", setting)]
    installed = subprocess.run([*helm, "install", "qs", str(CHART), f"--kubeconfig={plane.kubeconfig}",
                                "--namespace", namespace, "--create-namespace", "--wait", "--timeout", "5m",
                                *arguments], capture_output=True, text=True)
    pods = "" if installed.returncode == 0 else plane.kubectl("get", "pods", "-n", namespace, "-o", "wide")
    assert installed.returncode == 0, f"{installed.stderr}\n{pods}\n{plane.log_tails()}"
    return installed.stderr


def run_as_kubelet(pod: dict, work: Path, log_path: Path) -> subprocess.Popen:
    """The pod's one container as the server holds it, started here as a kubelet would: its command, args, env and
    working dir, its pod IP 127.0.0.1, each mount (an emptyDir) a directory under `work`; this checkout's venv stands
    for the image's (its pyspark on the PATH)."""
    container, = pod["spec"]["containers"]
    mounts = {}
    for mount in container.get("volumeMounts", []):
        mounts[mount["mountPath"]] = str(work / mount["name"])
        Path(mounts[mount["mountPath"]]).mkdir(parents=True, exist_ok=True)
    fields = {"status.podIP": "127.0.0.1", "metadata.name": pod["metadata"]["name"],
              "metadata.namespace": pod["metadata"]["namespace"]}
    env = {name: mounted(value, mounts) for name, value in container_env(container, fields).items()}
    command = [mounted(expand(item, env), mounts) for item in container.get("command", []) + container.get("args", [])]
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    with open(log_path, "w") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=mounted(container["workingDir"], mounts), env={**os.environ, **env, "PATH": path},
                                start_new_session=True)


@contextlib.contextmanager
def explained_by(*logs: Path):
    """A failed wait, with the tails of these logs."""
    try:
        yield
    except AssertionError as failure:
        tails = "\n".join(f"--- {log}\n{log.read_text(errors='replace')[-3000:]}" for log in logs if log.exists())
        raise AssertionError(f"{failure}\n{tails}") from None


def test_on_kubernetes_the_aggregator_decides_through_executor_pods_it_starts_as_its_service_account(
        control_plane, helm, tmp_path):
    """aggregator.sparkUrl=k8s://: the rendered aggregator, run here as its installed pod with that pod's
    ServiceAccount token, asks the server for its executor pod: one, of the resources the values give, owned by
    the aggregator's pod (deleted with it) and locked down. That pod's container, run here, is a working executor:
    the aggregator decides through it. Stopped, the aggregator deletes its executor pod."""
    namespace = "qs-spark-on-kube"
    token_file = tmp_path / "token"
    driver_port, blocks_port, http_port = free_loopback_ports(3)
    with LocalKafkaCluster(brokers=1) as cluster:
        log_dir = Path(cluster.log_dirs(1)[0])
        conf = {"spark\\.driver\\.host": "127.0.0.1", "spark\\.driver\\.bindAddress": "127.0.0.1",  # it runs here
                "spark\\.kubernetes\\.authenticate\\.oauthTokenFile": token_file,
                "spark\\.kubernetes\\.authenticate\\.caCertFile": control_plane.ca_cert}
        settings = [f"aggregator.sparkUrl=k8s://{control_plane.server}", "aggregator.executors.instances=1",
                    "aggregator.executors.memory=512m", "aggregator.executors.cpuRequest=250m",
                    f"aggregator.driverPorts.driver={driver_port}", f"aggregator.driverPorts.blockManager={blocks_port}",
                    f"aggregator.bootstrapServers={cluster.bootstrap_servers}",
                    "aggregator.checkpoint.storageClassName=manual",
                    *(f"aggregator.sparkConf.{key}={value}" for key, value in conf.items())]
        install(control_plane, helm, namespace, settings)
        name = "qs-quota-sidecar-aggregator"
        token_file.write_text(control_plane.kubectl("create", "token", name, "-n", namespace).strip())
        driver_pod, = control_plane.json("get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/name={name}")["items"]
        sidecar_settings = [f"config.kafka\\.admin\\.bootstrap\\.servers={cluster.bootstrap_servers}",
                            "config.http\\.host=127.0.0.1", f"config.http\\.port={http_port}", *violated_limit(log_dir)]
        fields = {"metadata.name": driver_pod["metadata"]["name"], "status.podIP": "127.0.0.1"}
        executor_pods = ["get", "pods", "-n", namespace, "-l", "spark-role=executor"]
        with RenderedContainer(helm, tmp_path, settings + sidecar_settings, kind="Deployment", name="aggregator",
                               fields=fields, namespace=namespace) as aggregator:
            spark_console = Path(tempfile.gettempdir(), f"quota-sidecar-spark-{aggregator.process.pid}.log")
            with explained_by(aggregator.log_path, spark_console):
                executor_pod, = eventually(lambda: control_plane.json(*executor_pods)["items"], 180, "an executor pod",
                                           every=1)
            owner, = executor_pod["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"]) == ("Pod", driver_pod["metadata"]["uid"])
            assert executor_pod["spec"]["automountServiceAccountToken"] is False
            container, = executor_pod["spec"]["containers"]
            assert container["resources"]["requests"] == {"cpu": "250m", "memory": "896Mi"}  # 512m and its overhead
            assert container["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
            assert {"emptyDir"} == {kind for volume in executor_pod["spec"]["volumes"] for kind in volume} - {"name"}
            executor = run_as_kubelet(executor_pod, tmp_path / "executor", tmp_path / "executor.log")
            try:
                with RenderedContainer(helm, tmp_path, settings + sidecar_settings, namespace=namespace) as sidecar:
                    base = f"http://127.0.0.1:{http_port}"
                    sidecar.wait_ready(base)
                    with explained_by(aggregator.log_path, spark_console, tmp_path / "executor.log"):
                        seen = eventually(lambda: (now := status(base))["sidecar"]["decided_by"]["aggregator"] and now,
                                          240, "a decision through the executor")
                    assert seen["throttle"]["factor"] == 0.0
            finally:
                os.killpg(executor.pid, signal.SIGTERM)
                executor.wait(timeout=60)
        eventually(lambda: not control_plane.json(*executor_pods)["items"], 60, "the executor pod deleted", every=1)
