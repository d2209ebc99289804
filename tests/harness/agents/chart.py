"""charts/quota-sidecar for the tests of tests/chart: where it is, the values combinations it supports, helm."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "quota-sidecar"
# The Prometheus operator's kinds: kubernetes-validate has no schema for them, the API server has their CRDs.
OPERATOR_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
KUBE_VERSION = "1.32.0"  # the chart needs 1.28+ (the pod-index label); helm built without ldflags says 1.20

# Every supported combination of values: name -> --set arguments.
COMBINATIONS = {
    "defaults": [],
    "secrets": ["secrets.api\\.token=s3cret",
                "secrets.kafka\\.admin\\.sasl\\.jaas\\.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                "required username=\"qs\" password=\"pw\";"],
    "existing-secret": ["existingSecret=my-secret"],
    "bitnami-broker-properties": ["brokerId=none", "brokerProperties=/opt/bitnami/kafka/config/server.properties",
                                  "dataVolume.mountPath=/bitnami/kafka", "dataVolume.logDirs=/bitnami/kafka/data",
                                  "extraVolumeMounts[0].name=kafka-config",
                                  "extraVolumeMounts[0].mountPath=/opt/bitnami/kafka/config",
                                  "extraVolumeMounts[0].readOnly=true"],
    "example": ["example.enabled=true"],
    "example-native-sidecar": ["example.enabled=true", "example.nativeSidecar=true"],
    "example-no-aggregator": ["example.enabled=true", "aggregator.enabled=false"],
    "aggregator-elsewhere": ["aggregator.bootstrapServers=my-kafka-0.my-kafka:9092",
                             "aggregator.checkpoint.storageClassName=fast", "aggregator.image.tag=0.1.0-rc1"],
    "separate-pipeline": ["config.pipeline\\.bootstrap\\.servers=kafka-ops:9092"],
    "spark-standalone": ["aggregator.sparkUrl=spark://spark-master.spark:7077"],
    "spark-kubernetes": ["aggregator.sparkUrl=k8s://https://kubernetes.default.svc",
                         "aggregator.sparkConf.spark\\.kubernetes\\.executor\\.label\\.team=platform"],
    "spark-connect": ["aggregator.sparkUrl=sc://spark-connect:15002"],
    "example-everything": ["example.enabled=true", "secrets.api\\.token=s3cret",
                           "monitoring.podMonitor=true", "monitoring.serviceMonitor=true",
                           "monitoring.prometheusRule=true", "monitoring.dashboard=true",
                           "probes.readinessStrict=true", "probes.readinessMaxAge=120"],
    "monitoring": ["monitoring.podMonitor=true", "monitoring.serviceMonitor=true", "monitoring.prometheusRule=true",
                   "monitoring.dashboard=true", "monitoring.labels.release=kube-prometheus-stack",
                   "monitoring.interval=15s"],
    "no-probes-no-policy": ["probes.liveness=false", "probes.readiness=false", "networkPolicy.enabled=false"],
    "tls": ["example.enabled=true", "kafkaTls.secretName=kafka-client-tls", "kafkaTls.certificateKey=tls.crt",
            "kafkaTls.privateKeyKey=tls.key", "httpTls.secretName=sidecar-endpoint-tls",
            "config.kafka\\.admin\\.security\\.protocol=SSL", "monitoring.podMonitor=true",
            "monitoring.serviceMonitor=true"],
}


def find_helm() -> str | None:
    """$HELM, build/tools/bin/helm (make test-chart installs it there) or helm on PATH."""
    candidates = [os.environ.get("HELM"), str(ROOT / "build" / "tools" / "bin" / "helm"), shutil.which("helm")]
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None)


def helm_or_skip(home: Path) -> list[str]:
    """helm as a command, with its cache, config and data homes under `home` (nothing in ~); else a skip."""
    found = find_helm()
    if not found:
        pytest.skip("helm not found ($HELM, build/tools/bin/helm, PATH): `make test-chart` installs it")
    os.environ.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
                      HELM_DATA_HOME=str(home / "data"))
    return [found]


def render(helm: list[str], settings: list[str], release: str = "qs", namespace: str = "default") -> list[dict]:
    arguments = [item for setting in settings for item in ("--set", setting)]
    output = subprocess.run([*helm, "template", release, str(CHART), "--kube-version", KUBE_VERSION,
                             "--namespace", namespace, *arguments],
                            check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(output) if doc]


def containers_named(documents: list[dict], name: str) -> list[dict]:
    found = []
    for document in documents:
        spec = document.get("spec", {}).get("template", {}).get("spec", {})
        found += [c for c in spec.get("containers", []) + spec.get("initContainers", []) if c["name"] == name]
    return found


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion of command and args ($$ escapes; an unknown one stays as written)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def container_env(container: dict, fields: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet makes it: each fieldRef from `fields` (fieldPath -> value),
    each value with the variables before it expanded."""
    env: dict[str, str] = {}
    for variable in container.get("env", []):
        env[variable["name"]] = (fields[variable["valueFrom"]["fieldRef"]["fieldPath"]] if "valueFrom" in variable
                                 else expand(variable["value"], env))
    return env


def volume_files(documents: list[dict], volume: dict) -> dict[str, str]:
    """The files a pod's volume holds when it is one of the rendered ConfigMaps or Secrets; else none."""
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    if "configMap" in volume:
        return by_name[("ConfigMap", volume["configMap"]["name"])]["data"]
    if "secret" in volume:
        return by_name[("Secret", volume["secret"]["secretName"])]["stringData"]
    return {}
