"""The aggregator and the capacity report on a Spark standalone cluster (Spark's own Master and two Workers,
harness/spark/standalone.py). The aggregator decides for the agents of a 3-broker cluster with its micro-batches run
by the Workers' executors (the Kafka connector's jars shipped to them by spark.jars), and after a SIGKILL it starts
again from its checkpoint and decides again on the same cluster, without a stop of its query on the way. The report
runs beside it, on the core the aggregator leaves free, over the history its executors append to an S3-compatible
server (MinIO, through S3A), where executors on any host can reach it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from harness.agents.sidecar_process import EXECUTABLE, SidecarProcess
from harness.spark.aggregator import Aggregator
from harness.spark.standalone import StandaloneSpark
from harness.storage.minio import SECRET_KEY, MinioServer
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX as P
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = [pytest.mark.integration, pytest.mark.spark_cluster]
APPLICATION = "quota-sidecar-aggregator"
REPORT = "quota-sidecar-report"


@pytest.fixture
def standalone(tmp_path):
    with StandaloneSpark(tmp_path / "spark", workers=2) as spark:
        yield spark


def test_the_aggregator_decides_on_a_standalone_cluster_and_resumes_from_its_checkpoint(
        standalone, make_kafka_cluster, tmp_path):
    cluster = make_kafka_cluster(brokers=3)
    aggregator = Aggregator(cluster.bootstrap_servers, tmp_path, **{"spark.url": standalone.url})
    with ExitStack() as stack:
        aggregator.start().wait_ready()
        stack.callback(aggregator.stop)
        [application] = standalone.applications(APPLICATION)
        assert application["cores"] == 2, application  # one executor on each Worker
        agents = [stack.enter_context(SidecarProcess(f"agent-{broker}", tmp_path, {
            P + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, P + "broker.id": broker,
            P + "storage.check.interval": "PT1S", P + "produce": 1024,
            # every volume is below a petabyte: the hard limit on every broker
            P + "storage.per.volume.limit.min.available.bytes": 1 << 50, **aggregator.agent_properties}))
            for broker in (1, 2, 3)]
        for agent in agents:
            agent.wait_ready()
        decided_by_it(agents, aggregator)
        with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
            assert admin.describe_user_quotas([None])[None][PRODUCE] == 1.0
        ran = {worker["id"]: worker["coresused"] for worker in standalone.state()["workers"]}
        assert sorted(ran.values()) == [1, 1], ran

        aggregator.stop(signal.SIGKILL)
        before = batches(tmp_path / "aggregator-checkpoint")
        eventually(lambda: standalone.applications(APPLICATION) == [], 60, "the killed driver's application gone")
        aggregator.start().wait_ready()
        decided_by_it(agents, aggregator)
        assert len(standalone.applications(APPLICATION)) == 1
        after = batches(tmp_path / "aggregator-checkpoint") - before
        assert before and after and min(after) > max(before), (before, after)  # its micro-batches went on
        assert aggregator.process.problems() == []  # no query stopped and waited to start again


def test_the_report_runs_beside_the_aggregator_on_a_standalone_cluster_over_its_history_on_s3(
        make_kafka_cluster, tmp_path):
    cluster = make_kafka_cluster(brokers=3)
    history = "s3a://history/fleet"
    store = MinioServer(tmp_path / "minio", buckets=("history",))
    # An application takes every free core unless told otherwise: the aggregator leaves the second Worker to the
    # report, through Spark's own defaults file as an operator would.
    aggregator_environment = store.client_environment(tmp_path / "spark-conf", "spark.cores.max 1\n")
    with ExitStack() as stack:
        stack.enter_context(store)
        # The Workers have no credentials: Spark hands the driver's (AWS_* in its environment) to the executors in
        # the job's Hadoop configuration.
        standalone = stack.enter_context(StandaloneSpark(tmp_path / "spark", workers=2))
        aggregator = Aggregator(cluster.bootstrap_servers, tmp_path, environment=aggregator_environment, **{
            "spark.url": standalone.url, "history.location": history, "history.interval": "PT2S"})
        aggregator.start().wait_ready()
        stack.callback(aggregator.stop)
        [application] = standalone.applications(APPLICATION)
        assert application["cores"] == 1, application
        for broker in (1, 2, 3):
            stack.enter_context(SidecarProcess(f"agent-{broker}", tmp_path, {
                P + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, P + "broker.id": broker,
                P + "storage.check.interval": "PT1S", P + "storage.per.volume.limit.min.available.bytes": 1 << 20,
                **aggregator.agent_properties})).wait_ready()
        eventually(lambda: len(store.objects("history", ".parquet")) >= 3, 180, "the history appended by the executors")

        report_environment = store.client_environment(tmp_path / "report-conf")
        done = subprocess.run([str(EXECUTABLE), "report", "--history", history, "--since", "ALL", "-o", "json",
                               "--out", str(tmp_path / "report"), "--set", f"spark.url={standalone.url}"],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, **report_environment, "SPARK_LOCAL_IP": "127.0.0.1"})
        assert done.returncode == 0, done.stderr
        volumes = json.loads(done.stdout)["volumes"]
        assert {volume["broker"] for volume in volumes} == {1, 2, 3}, volumes
        assert all(volume["observations"] >= 2 for volume in volumes), volumes
        [report] = standalone.applications(REPORT, finished=True)
        assert report["cores"] == 1, report  # on the cluster, not in a Spark of its own
        assert len(standalone.applications(APPLICATION)) == 1  # the aggregator ran on meanwhile
        assert SECRET_KEY not in aggregator.process.log_path.read_text(errors="replace") + done.stdout + done.stderr


def batches(checkpoint: Path) -> set[int]:
    """The micro-batches the decisions' query committed in its checkpoint."""
    return {int(path.name) for path in (checkpoint / "commits").iterdir() if path.name.isdigit()}


def decided_by_it(agents: list[SidecarProcess], aggregator: Aggregator) -> None:
    """Each agent's last decision is the hard limit's, from this aggregator process, and fresh."""
    def decided(agent: SidecarProcess) -> dict:
        status = agent.status()
        decided_by = status["sidecar"].get("decided_by") or {}
        assert status["throttle"]["source"] == "computed" and decided_by.get("aggregator") == aggregator.name, status
        return status

    for agent in agents:
        status = eventually(lambda: decided(agent), 90, f"{agent.name} decided by {aggregator.name}")
        assert status["throttle"]["factor"] == 0.0
        assert status["sidecar"]["decided_by"]["decision_age_seconds"] < 10, status["sidecar"]
