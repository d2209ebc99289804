"""charts/quota-sidecar (make test-chart): `helm lint` and `helm template` of every supported values combination,
each manifest validated offline against Kubernetes' schemas (kubernetes-validate --strict), the alerts through
`promtool test rules`, and the rendered sidecar container run as the kubelet would run it, against a real local
Kafka cluster: the chart and the CLI cannot drift apart.

helm comes from $HELM, build/tools/bin/helm (`make test-chart` installs it there from the Go module proxy) or PATH;
promtool from PATH (Debian's prometheus package). Without them the tests skip and say so.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from harness.agents.chart import (CHART, COMBINATIONS, KUBE_VERSION, OPERATOR_KINDS, ROOT, container_env, containers_named,
                           render)
from harness.agents.rendered_container import RenderedContainer, status, violated_limit
from harness.spark.aggregator import Aggregator
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.cluster.secure_lab import SecureLab, grant
from harness.cluster.ports import free_loopback_ports
from harness.agents.sidecar_process import EXECUTABLE
from harness.waiting import eventually
from quota_sidecar.configuration.properties import SIDECAR_CLIENT_ID
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

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
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz?strict=1&max_age=120"  # asked for
    assert sidecar["image"] == "quota-sidecar:0.1.0"  # the agent: no JVM
    assert sidecar["resources"]["limits"]["memory"] == "192Mi"
    assert {d["kind"] for d in documents} >= {"PodMonitor", "ServiceMonitor", "PrometheusRule", "Deployment"}


@pytest.mark.parametrize("name", ["example", "example-native-sidecar"])
def test_by_default_readiness_and_start_need_only_the_endpoint_and_its_local_watch(helm, name):
    """A broker pod is Ready only when its sidecar is: stale decisions must not take brokers out of service, nor
    hold a native sidecar's broker until the aggregator has decided once."""
    sidecar, = containers_named(render(helm, COMBINATIONS[name]), "quota-sidecar")

    assert sidecar["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_a_readiness_max_age_without_strict_readiness_is_refused_in_one_line(helm):
    rendered = subprocess.run([*helm, "template", "qs", str(CHART), "--kube-version", KUBE_VERSION, "--set",
                               "example.enabled=true", "--set", "probes.readinessMaxAge=120"],
                              capture_output=True, text=True)

    assert rendered.returncode != 0
    assert "probes.readinessMaxAge is the strict readiness's: set probes.readinessStrict=true" in rendered.stderr


def test_one_aggregator_decides_for_the_release_from_its_own_locked_down_workload(helm):
    documents = render(helm, COMBINATIONS["example"])

    aggregator = next(d for d in documents if d["kind"] == "Deployment")
    assert aggregator["spec"]["replicas"] == 1 and aggregator["spec"]["strategy"] == {"type": "Recreate"}
    container, = aggregator["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "quota-sidecar-spark:0.1.0"
    assert container["args"] == ["aggregate", "--config", "/etc/quota-sidecar/aggregator.properties"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    checkpoint = next(v for v in aggregator["spec"]["template"]["spec"]["volumes"] if v["name"] == "checkpoint")
    claim = next(d for d in documents if d["kind"] == "PersistentVolumeClaim")
    assert checkpoint["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    data = next(d for d in documents if d["metadata"]["name"] == "qs-quota-sidecar-config")["data"]
    # The agents reach the pipeline through their own broker; the aggregator through the example's Service.
    assert "pipeline.bootstrap.servers" not in data["sidecar.properties"]
    aggregator_properties = data["aggregator.properties"].splitlines()
    assert "client.quota.callback.static.pipeline.bootstrap.servers=qs-quota-sidecar-kafka:9092" in aggregator_properties
    assert ("client.quota.callback.static.aggregator.checkpoint.location=/var/lib/quota-sidecar-aggregator/checkpoint"
            in aggregator_properties)
    assert not any("storage.local.log.dirs" in line for line in aggregator_properties)
    # its driver's heap, which its container's memory covers
    assert "client.quota.callback.static.aggregator.driver.memory=512m" in aggregator_properties
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert "aggregator.driver.memory" not in data["sidecar.properties"]
    # the history beside the checkpoint, its forecast on the metrics port
    assert "client.quota.callback.static.history.location=/var/lib/quota-sidecar-aggregator/history" in aggregator_properties
    assert "client.quota.callback.static.aggregator.metrics.port=9404" in aggregator_properties
    assert container["ports"] == [{"name": "metrics", "containerPort": 9404}]


def test_with_monitoring_prometheus_scrapes_the_aggregators_forecast(helm):
    documents = render(helm, COMBINATIONS["example-everything"])

    monitors = {d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "PodMonitor"}
    aggregator = monitors["qs-quota-sidecar-aggregator"]
    assert aggregator["selector"]["matchLabels"]["app.kubernetes.io/name"] == "qs-quota-sidecar-aggregator"
    assert aggregator["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]


@pytest.mark.parametrize("settings, pipeline", [
    (COMBINATIONS["defaults"], "kafka:9092"),  # Bitnami's Service of a release named kafka
    (COMBINATIONS["aggregator-elsewhere"], "my-kafka-0.my-kafka:9092"),
    (COMBINATIONS["separate-pipeline"], "kafka-ops:9092"),  # the agents' own pipeline cluster
])
def test_the_aggregator_reaches_the_pipeline_the_agents_publish_to(helm, settings, pipeline):
    data = next(d for d in render(helm, settings) if d["kind"] == "ConfigMap")["data"]

    assert f"client.quota.callback.static.pipeline.bootstrap.servers={pipeline}" in data["aggregator.properties"]


def test_without_the_aggregator_the_chart_renders_none(helm):
    documents = render(helm, COMBINATIONS["example-no-aggregator"])

    assert not [d for d in documents if d["kind"] in ("Deployment", "PersistentVolumeClaim")]
    assert "aggregator.properties" not in next(d for d in documents if d["kind"] == "ConfigMap")["data"]


def spark_defaults(documents: list[dict]) -> dict[str, str]:
    conf = next(d for d in documents if d["metadata"]["name"] == "qs-quota-sidecar-aggregator-spark")
    lines = [line for line in conf["data"]["spark-defaults.conf"].splitlines() if line and not line.startswith("#")]
    return dict(line.split(" ", 1) for line in lines)


@pytest.mark.parametrize("name", ["spark-standalone", "spark-kubernetes"])
def test_on_a_spark_cluster_the_executors_reach_the_driver_back_through_a_headless_service(helm, name):
    documents = render(helm, COMBINATIONS[name])

    service = next(d for d in documents if d["kind"] == "Service" and d["metadata"]["name"].endswith("-driver"))
    assert service["spec"]["clusterIP"] == "None"
    aggregator = next(d for d in documents if d["kind"] == "Deployment")
    assert service["spec"]["selector"] == aggregator["spec"]["selector"]["matchLabels"]
    conf = spark_defaults(documents)
    assert conf["spark.driver.host"] == "qs-quota-sidecar-aggregator-driver.default.svc"
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    container, = aggregator["spec"]["template"]["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["spark-driver"] == int(conf["spark.driver.port"]) == 7078
    assert ports["spark-blocks"] == int(conf["spark.blockManager.port"]) == 7079
    assert {port["port"] for port in service["spec"]["ports"]} == {7078, 7079}
    env = container_env(container, {"metadata.name": "qs-quota-sidecar-aggregator-0", "status.podIP": "10.0.0.7"})
    assert env["SPARK_LOCAL_IP"] == "10.0.0.7"  # the image's loopback would put the driver out of their reach
    mount = next(m for m in container["volumeMounts"] if m["name"] == "spark-conf")
    assert env["SPARK_CONF_DIR"] == mount["mountPath"]
    properties = next(d for d in documents if d["metadata"]["name"] == "qs-quota-sidecar-config")["data"]["aggregator.properties"]
    url = next(s.split("=", 1)[1] for s in COMBINATIONS[name] if s.startswith("aggregator.sparkUrl="))
    assert f"client.quota.callback.static.spark.url={url}" in properties.splitlines()


def test_on_a_standalone_cluster_the_aggregator_takes_at_most_its_executors_cores(helm):
    documents = render(helm, COMBINATIONS["spark-standalone"] + ["aggregator.executors.instances=3"])

    assert spark_defaults(documents)["spark.cores.max"] == "3"  # else it takes every core the Workers have
    assert not [d for d in documents if d["kind"] in ("ServiceAccount", "Role", "RoleBinding")]


def test_on_kubernetes_the_aggregator_starts_locked_down_executor_pods_of_its_own_image(helm):
    documents = render(helm, COMBINATIONS["spark-kubernetes"])

    conf = spark_defaults(documents)
    assert conf["spark.kubernetes.container.image"] == "quota-sidecar-spark:0.1.0"
    assert conf["spark.executor.instances"] == "2" and conf["spark.kubernetes.namespace"] == "default"
    assert conf["spark.kubernetes.executor.label.team"] == "platform"  # aggregator.sparkConf
    template_path = conf["spark.kubernetes.executor.podTemplateFile"]
    spark = next(d for d in documents if d["metadata"]["name"] == "qs-quota-sidecar-aggregator-spark")
    template = yaml.safe_load(spark["data"][Path(template_path).name])
    executor, = template["spec"]["containers"]
    assert executor["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]
    assert executor["securityContext"]["runAsNonRoot"] and executor["securityContext"]["readOnlyRootFilesystem"]
    assert executor["workingDir"] in {m["mountPath"] for m in executor["volumeMounts"]}  # the driver's jars go there
    assert template["spec"]["automountServiceAccountToken"] is False  # executors need no API access
    assert container_env(executor, {"status.podIP": "10.0.0.8"})["SPARK_LOCAL_IP"] == "10.0.0.8"
    aggregator = next(d for d in documents if d["kind"] == "Deployment")
    pod = aggregator["spec"]["template"]["spec"]
    binding = next(d for d in documents if d["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    rule, = next(d for d in documents if d["kind"] == "Role")["rules"]  # pods only: no ConfigMap, no claims
    assert rule["resources"] == ["pods"] and {"create", "delete", "watch"} <= set(rule["verbs"])
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
    env = container_env(pod["containers"][0], {"metadata.name": "qs-quota-sidecar-aggregator-x1",
                                                "status.podIP": "10.0.0.7"})
    assert "spark.kubernetes.driver.pod.name=qs-quota-sidecar-aggregator-x1" in env["PYSPARK_SUBMIT_ARGS"]


@pytest.mark.parametrize("name", ["defaults", "spark-connect"])
def test_with_spark_in_its_pod_or_on_a_connect_server_the_aggregator_publishes_no_driver(helm, name):
    documents = render(helm, COMBINATIONS[name])

    assert not [d for d in documents if d["kind"] in ("Service", "ServiceAccount", "Role")
                or d["metadata"]["name"].endswith("-spark")]
    container, = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container_env(container, {})["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_a_spark_url_of_no_known_kind_is_refused_in_one_line(helm):
    rendered = subprocess.run([*helm, "template", "qs", str(CHART), "--set", "aggregator.sparkUrl=yarn"],
                              capture_output=True, text=True)

    assert rendered.returncode != 0
    assert 'aggregator.sparkUrl "yarn": expected spark://host:port' in rendered.stderr


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


def test_with_https_the_network_policy_fences_both_of_the_sidecars_ports(helm):
    policy = next(d for d in render(helm, ["httpTls.secretName=tls", "httpTls.plainPort=9100"])
                  if d["kind"] == "NetworkPolicy")

    anyone, scrapers = policy["spec"]["ingress"]
    assert [p for p in anyone["ports"] if p["protocol"] == "TCP"] == [
        {"protocol": "TCP", "port": 1, "endPort": 8079}, {"protocol": "TCP", "port": 8081, "endPort": 9099},
        {"protocol": "TCP", "port": 9101, "endPort": 65535}]
    assert scrapers["ports"] == [{"protocol": "TCP", "port": 8080}, {"protocol": "TCP", "port": 9100}]


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


def test_the_rendered_agent_and_aggregator_run_against_a_real_cluster_and_the_uninstall_hook_hands_back(
        helm, tmp_path):
    """The agent's pipeline is the watched cluster (its default), where the rendered aggregator decides. Once they
    stopped as their pods stop (nothing handed back), the pre-delete hook's Job removes the quotas they wrote."""
    with LocalKafkaCluster(brokers=1) as cluster:
        log_dir = Path(cluster.log_dirs(1)[0])
        port, = free_loopback_ports(1)
        settings = ["secrets.api\\.token=s3cret", f"config.kafka\\.admin\\.bootstrap\\.servers={cluster.bootstrap_servers}",
                    f"aggregator.bootstrapServers={cluster.bootstrap_servers}", "config.http\\.host=127.0.0.1",
                    f"config.http\\.port={port}", *violated_limit(log_dir)]
        with RenderedContainer(helm, tmp_path, settings, kind="Deployment", name="aggregator") as aggregator, \
                RenderedContainer(helm, tmp_path, settings) as sidecar:
            base = f"http://127.0.0.1:{port}"
            sidecar.wait_ready(base)
            # the local verdict may throttle first; the rendered aggregator's decision follows
            seen = eventually(lambda: (found := status(base))["sidecar"]["decided_by"]["aggregator"] and found, 240,
                              "a decision of the rendered aggregator: " + aggregator.log()[-3000:])
            assert seen["throttle"]["factor"] == 0.0  # the limit is violated: producers throttled
            assert seen["sidecar"]["broker_id"] == 1  # the pod's ordinal, through $(POD_INDEX)
            assert seen["local_watch"]["watched"] == [str(log_dir)]  # the data volume, read-only
            assert sidecar.set_override(base, "s3cret") == 200  # the token came from the Secret
            assert "s3cret" not in sidecar.log() and "s3cret" not in aggregator.log()
            checkpoint = Path(aggregator.mounts["/var/lib/quota-sidecar-aggregator"], "checkpoint")
            assert (checkpoint / "offsets").is_dir()  # on the checkpoint's volume
        with ClusterAdmin({"bootstrap_servers": [cluster.bootstrap_servers]}) as admin:
            written = [None, (None, SIDECAR_CLIENT_ID)]
            assert admin.describe_user_quotas(written)[None] == {PRODUCE: 1.0}, "stopped, the agent handed back"
            hook = RenderedContainer(helm, tmp_path, settings, kind="Job", name="cleanup")
            done = hook.run()
            assert done.returncode == 0, done.stdout + done.stderr
            assert "producer_byte_rate: 1 -> none" in done.stdout, done.stdout
            assert not any(admin.describe_user_quotas(written).values()), admin.describe_user_quotas(written)


def test_the_rendered_sidecar_runs_with_mutual_tls_under_the_authorizer_with_the_notes_acls(helm, tmp_path):
    """The chart's TLS: the agent reaches a broker with StandardAuthorizer over mutual TLS with the CA, certificate
    and key of a cert-manager-style Secret (kafkaTls), granted exactly the ACLs `quota-sidecar acls` prints for its
    rendered config; its endpoint speaks https with the certificate of a kubernetes.io/tls Secret (httpTls), the
    probes on the plain port."""
    security = SecureLab(tmp_path / "tls")
    with LocalKafkaCluster(brokers=1, security=security) as cluster, \
            Aggregator(cluster.bootstrap_servers, tmp_path / "aggregator"):  # the lab's super user: PLAINTEXT
        log_dir = Path(cluster.log_dirs(1)[0])
        client_cert, client_key = security.client_certificate("quota-sidecar")  # User:quota-sidecar
        endpoint = security.ca.issue_cert("127.0.0.1")
        https_port, plain_port = free_loopback_ports(2)
        kafka_tls = {"ca.crt": security.ca_file.read_text(), "tls.crt": client_cert.read_text(),
                     "tls.key": client_key.read_text()}
        http_tls = {"tls.crt": endpoint.cert_chain_pems[0].bytes().decode(),
                    "tls.key": endpoint.private_key_pem.bytes().decode()}
        settings = [
            "secrets.api\\.token=s3cret", "kafkaTls.secretName=kafka-client-tls",
            "kafkaTls.certificateKey=tls.crt", "kafkaTls.privateKeyKey=tls.key",
            "httpTls.secretName=sidecar-endpoint-tls", f"httpTls.plainPort={plain_port}",
            f"config.kafka\\.admin\\.bootstrap\\.servers={cluster.secure_bootstrap_servers('SSL')}",
            "config.kafka\\.admin\\.security\\.protocol=SSL", "config.sidecar\\.principal=User:quota-sidecar",
            "config.http\\.host=127.0.0.1", f"config.http\\.port={https_port}", *violated_limit(log_dir)]
        with RenderedContainer(helm, tmp_path, settings, secrets={"kafka-client-tls": kafka_tls,
                                                                "sidecar-endpoint-tls": http_tls}) as sidecar:
            printed = subprocess.run([str(EXECUTABLE), "acls", "--principal", "User:quota-sidecar", "--json",
                                      *sidecar.command[2:]], capture_output=True, text=True, check=True)
            grant(cluster.bootstrap_servers, json.loads(printed.stdout))
            plain, https = f"http://127.0.0.1:{plain_port}", f"https://127.0.0.1:{https_port}"
            sidecar.wait_ready(plain)
            trusting = ssl.create_default_context(cafile=str(security.ca_file))
            seen = status(https, trusting)
            assert seen["throttle"]["factor"] == 0.0, seen  # DescribeLogDirs over mutual TLS, quotas written
            assert seen["sidecar"]["broker_id"] == 1
            assert sidecar.set_override(https, "s3cret", trusting) == 200  # https and the token
            assert sidecar.set_override(https, "wrong", trusting) == 401
            assert "s3cret" not in sidecar.log() and "PRIVATE KEY" not in sidecar.log()
