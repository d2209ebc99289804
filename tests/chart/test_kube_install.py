"""The chart installed into a real Kubernetes control plane built from Go modules (tests/chart/kube/build.sh):
etcd, kube-apiserver (server-side validation and admission), kube-scheduler, kube-controller-manager, and kwok
running fake nodes, so that `helm install --wait` reaches Running without executing anything. make test-chart.

The Prometheus operator's kinds (PodMonitor, ServiceMonitor, PrometheusRule) are checked by the same server
against the operator's own CRDs (tests/chart/crds, a released version's), applied before the installs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.agents.chart import CHART, COMBINATIONS, OPERATOR_KINDS, ROOT, render
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
    subprocess.run(["openssl", "genrsa", "-out", str(work / "sa.key"), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(work / "sa.key"), "-pubout", "-out", str(work / "sa.pub")],
                   check=True, capture_output=True)
    (work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    plane.kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"https://127.0.0.1:{api_port}",
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
    arguments = [item for setting in settings for item in ("--set", setting)]
    installed = subprocess.run([*helm, "install", "qs", str(CHART), f"--kubeconfig={control_plane.kubeconfig}",
                                "--namespace", namespace, "--create-namespace", "--wait", "--timeout", "5m",
                                *arguments], capture_output=True, text=True)

    pods = control_plane.kubectl("get", "pods", "-n", namespace, "-o", "wide")
    assert installed.returncode == 0, f"{installed.stderr}\n{pods}\n{control_plane.log_tails()}"
    assert "unknown field" not in installed.stderr  # the server only warns of fields it would drop
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
