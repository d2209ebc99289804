"""charts/quota-sidecar (make test-chart): `helm lint` and `helm template` of every supported values combination,
each manifest validated offline against Kubernetes' schemas (kubernetes-validate --strict), the alerts through
`promtool test rules`, and the rendered sidecar container run as the kubelet would run it, against a real local
Kafka cluster: the chart and the CLI cannot drift apart.

helm comes from $HELM, build/tools/bin/helm (`make test-chart` installs it there from the Go module proxy) or PATH;
promtool from PATH (Debian's prometheus package). Without them the tests skip and say so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from harness.chart import (CHART, COMBINATIONS, KUBE_VERSION, OPERATOR_KINDS, ROOT, container_env, containers_named,
                           expand, render, volume_files)
from harness.aggregator import Aggregator
from harness.local_cluster import LocalKafkaCluster
from harness.ports import free_loopback_ports
from harness.sidecar_process import EXECUTABLE
from harness.waiting import eventually

pytestmark = pytest.mark.chart

@pytest.mark.parametrize("name", COMBINATIONS)
def test_helm_lint_is_clean(helm, name):
    arguments = [item for setting in COMBINATIONS[name] for item in ("--set", setting)]
    linted = subprocess.run([*helm, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *arguments],
                            capture_output=True, text=True)

    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "[WARNING]" not in linted.stdout and "[ERROR]" not in linted.stdout


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_combination_renders_manifests_kubernetes_accepts(helm, name):
    documents = render(helm, COMBINATIONS[name])

    validated = []
    for document in documents:
        if document["kind"] in OPERATOR_KINDS:  # no schema offline: the API server checks them (test_kube_install)
            continue
        kubernetes_validate.validate(document, KUBE_VERSION, strict=True)
        validated.append(document["kind"])
    assert "ConfigMap" in validated and "NetworkPolicy" in validated or name == "no-probes-no-policy"


def test_the_example_runs_one_locked_down_sidecar_per_broker_pod(helm):
    documents = render(helm, COMBINATIONS["example-everything"])

    statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
    sidecar, = containers_named([statefulset], "quota-sidecar")
    locked = {"runAsNonRoot": True, "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    assert sidecar["securityContext"].items() >= locked.items()
    data = next(m for m in sidecar["volumeMounts"] if m["name"] == "data")
    assert data["readOnly"] is True and data["mountPath"] == "/var/lib/kafka"
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz?max_age=120"
    assert sidecar["image"] == "quota-sidecar-thin:0.1.0"  # Spark Connect: no JVM in the sidecar
    properties = next(d for d in documents if d["metadata"]["name"] == "qs-quota-sidecar-config")
    assert "client.quota.callback.static.spark.url=sc://qs-quota-sidecar-spark-connect:15002" in (
        properties["data"]["sidecar.properties"])
    assert {d["kind"] for d in documents} >= {"PodMonitor", "ServiceMonitor", "PrometheusRule", "Deployment"}


def test_the_native_sidecar_is_an_init_container_that_restarts(helm):
    statefulset = next(d for d in render(helm, COMBINATIONS["example-native-sidecar"]) if d["kind"] == "StatefulSet")

    spec = statefulset["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["kafka"]
    assert [(c["name"], c.get("restartPolicy")) for c in spec["initContainers"]] == [
        ("kafka-format", None), ("quota-sidecar", "Always")]  # the log dir is there before the sidecar starts


def test_the_network_policy_fences_only_the_sidecars_port(helm):
    policy = next(d for d in render(helm, []) if d["kind"] == "NetworkPolicy")

    anyone, scrapers = policy["spec"]["ingress"]
    assert "from" not in anyone and {"protocol": "TCP", "port": 1, "endPort": 8079} in anyone["ports"]
    assert {"protocol": "TCP", "port": 8081, "endPort": 65535} in anyone["ports"]
    assert scrapers["ports"] == [{"protocol": "TCP", "port": 8080}] and scrapers["from"]


def test_the_bitnami_examples_carry_the_charts_container(helm):
    """examples/kubernetes/*.yaml hold the container for Bitnami's values, written out: it must be the chart's."""
    settings = COMBINATIONS["bitnami-broker-properties"] + ["example.enabled=true", "secrets.api\\.token=x"]
    rendered, = containers_named(render(helm, settings, release="quota-sidecar"), "quota-sidecar")
    for example, where in (("bitnami-values.yaml", "sidecars"), ("bitnami-native-values.yaml", "initContainers")):
        values = yaml.safe_load((ROOT / "examples" / "kubernetes" / example).read_text())
        shipped, = values["broker"][where]
        shipped = {key: value for key, value in shipped.items() if key != "restartPolicy"}
        for key in ("command", "args", "env", "ports", "startupProbe", "livenessProbe", "readinessProbe",
                    "securityContext", "volumeMounts"):
            assert shipped[key] == rendered[key], f"{example}: broker.{where}[0].{key} differs from the chart's"


def test_promtool_rule_tests_pass():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not found: Debian's prometheus package has it (make test-chart installs it as root)")
    tested = subprocess.run([promtool, "test", "rules", "alerts_test.yaml"], cwd=Path(__file__).parent,
                            capture_output=True, text=True)

    assert tested.returncode == 0, tested.stdout + tested.stderr


# ---------------------------------------------------------------- the rendered container, run for real


def mounted(path: str, mounts: dict[str, str]) -> str:
    """A path in the container as it is here: under the directory standing for the mount that holds it."""
    holders = [mount for mount in mounts if path == mount or path.startswith(mount + "/")]
    if not holders:
        return path
    mount = max(holders, key=len)
    return mounts[mount] + path[len(mount):]


def test_the_rendered_sidecar_container_runs_against_a_real_cluster(helm, tmp_path):
    """The container of the example StatefulSet, run as the kubelet would: its command, args and env, its
    ConfigMap and Secret as files at their mount paths (under a temp dir: no root filesystem of ours is touched),
    the broker's data dir at the data volume's mount path, pod ordinal 1 in the pod-index label. The agent's
    pipeline is the watched cluster (its default), where an aggregator decides."""
    with LocalKafkaCluster(brokers=1) as cluster, Aggregator(cluster.bootstrap_servers, tmp_path / "aggregator"):
        log_dir = Path(cluster.log_dirs(1)[0])
        port, = free_loopback_ports(1)
        documents = render(helm, [
            "example.enabled=true", "secrets.api\\.token=s3cret",
            f"config.kafka\\.admin\\.bootstrap\\.servers={cluster.bootstrap_servers}",
            "config.http\\.host=127.0.0.1", f"config.http\\.port={port}",
            "config.storage\\.check\\.interval=PT2S",
            "config.storage\\.per\\.volume\\.limit\\.min\\.available\\.bytes=1000000000000000000",  # violated
            f"dataVolume.mountPath={log_dir.parent}", f"dataVolume.logDirs={log_dir}"])
        statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
        container, = containers_named([statefulset], "quota-sidecar")
        volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}

        mounts = {}  # mountPath in the container -> the directory that stands for it here
        for mount in container["volumeMounts"]:
            volume = volumes.get(mount["name"])
            if volume is None:  # the volume claim template: the broker's data volume
                assert mount["readOnly"] and mount["mountPath"] == str(log_dir.parent)
                continue
            directory = tmp_path / mount["name"]
            directory.mkdir()
            for file_name, content in volume_files(documents, volume).items():
                (directory / file_name).write_text(content)
            mounts[mount["mountPath"]] = str(directory)

        env = container_env(container, {"metadata.labels['apps.kubernetes.io/pod-index']": "1"})
        env = {name: mounted(value, mounts) for name, value in env.items()}  # HOME=/tmp: the emptyDir
        command = [mounted(expand(item, env), mounts) for item in container["command"] + container["args"]]
        assert command[0] == "quota-sidecar"
        command[0] = str(EXECUTABLE)

        log_path = tmp_path / "sidecar.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, **env}, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"

            def probe(path: str) -> int:
                if process.poll() is not None:  # not retried: a sidecar that exited is not a slow one
                    raise RuntimeError(f"the sidecar exited:\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(base + path, timeout=5) as response:
                        return response.status
                except urllib.error.HTTPError as error:
                    return error.code
                except urllib.error.URLError:  # not listening yet
                    return 0

            readiness = container["readinessProbe"]["httpGet"]["path"]
            try:
                eventually(lambda: probe(readiness) == 200, timeout=240, what=f"{readiness} answering 200", every=1)
            except AssertionError as error:
                raise AssertionError(f"{error}\n{log_path.read_text()[-3000:]}") from None
            assert probe(container["livenessProbe"]["httpGet"]["path"]) == 200

            with urllib.request.urlopen(base + "/status", timeout=5) as response:
                status = json.load(response)
            assert status["throttle"]["factor"] == 0.0  # the limit is violated: producers throttled
            assert status["sidecar"]["broker_id"] == 1  # the pod's ordinal, through $(POD_INDEX)
            assert status["local_watch"]["watched"] == [str(log_dir)]  # the data volume, read-only
            override = urllib.request.Request(base + "/throttle/1", method="PUT", data=b'{"rate": 5000000}',
                                              headers={"Authorization": "Bearer s3cret",
                                                       "Content-Type": "application/json"})
            with urllib.request.urlopen(override, timeout=10) as response:  # the token came from the Secret
                assert response.status == 200
            assert "s3cret" not in log_path.read_text()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=60)
