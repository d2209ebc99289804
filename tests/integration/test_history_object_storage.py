"""The history on object storage: the aggregator appends it to a real S3-compatible server (MinIO, through Hadoop's
S3A connector that `make s3a` resolves) and `quota-sidecar report` reads it from there. Credentials come as the
AWS SDK reads them (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), the server's address through spark-defaults.conf,
as an operator would set them; the secret reaches no log and no output.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness.agents.sidecar_process import EXECUTABLE, SidecarProcess
from harness.spark.aggregator import Aggregator
from harness.storage.minio import SECRET_KEY, MinioServer
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = [pytest.mark.integration, pytest.mark.capacity]
MiB = 1 << 20


@pytest.fixture
def store(tmp_path):
    with MinioServer(tmp_path / "minio", buckets=("history",)) as server:
        yield server


def pipeline_topics(unique_name: str) -> dict[str, str]:
    return {f"pipeline.{kind}.topic": f"{unique_name}-{kind}" for kind in ("observations", "decisions", "heartbeats")}


def agent_of(watched, aggregator: Aggregator, pipeline: dict[str, str], tmp_path) -> SidecarProcess:
    """An agent beside the watched cluster's broker 1, observing its volume every second for the aggregator."""
    return SidecarProcess("agent", tmp_path, {
        "node.id": 1, PREFIX + "kafka.admin.bootstrap.servers": watched.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT1S", PREFIX + "storage.local.log.dirs": watched.log_dirs(1)[0],
        PREFIX + "storage.per.volume.limit.min.available.bytes": str(16 * MiB),
        **aggregator.agent_properties, **{PREFIX + key: value for key, value in pipeline.items()}})


def report(history: str, environment: dict[str, str], out) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXECUTABLE), "report", "--history", history, "--since", "ALL", "-o", "json",
                           "--out", str(out), "--set", f"storage.per.volume.limit.min.available.bytes={16 * MiB}"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **environment})


def test_the_aggregator_appends_the_history_to_an_s3_server_and_the_report_reads_it_there(
        kafka_cluster, make_kafka_cluster, store, unique_name, tmp_path):
    environment = store.client_environment(tmp_path / "spark-conf")
    pipeline = pipeline_topics(unique_name)
    aggregator = Aggregator(kafka_cluster.bootstrap_servers, tmp_path / "aggregator", environment=environment,
                            **pipeline, **{"history.location": "s3a://history/fleet", "history.interval": "PT5S"})
    agent = agent_of(make_kafka_cluster(brokers=1), aggregator, pipeline, tmp_path)
    with aggregator, agent:
        agent.wait_ready()
        aggregator.wait_ready()
        eventually(lambda: len(store.objects("history", ".parquet")) >= 3, 120, "three appends in the bucket")
        aggregator_log = aggregator.process.log_path.read_text(errors="replace")

    assert all(key.startswith("fleet/cluster=") and "/day=" in key for key in store.objects("history", ".parquet"))
    done = report("s3a://history/fleet", environment, tmp_path / "report")
    assert done.returncode == 0, done.stderr
    volumes = [v for v in json.loads(done.stdout)["volumes"] if v["broker"] == 1]
    assert volumes and all(v["observations"] >= 3 for v in volumes), volumes
    assert SECRET_KEY not in aggregator_log + done.stdout + done.stderr


def test_a_bucket_that_does_not_exist_is_said_in_one_line_and_the_decisions_go_on(
        kafka_cluster, make_kafka_cluster, store, unique_name, tmp_path):
    environment = store.client_environment(tmp_path / "spark-conf")
    done = report("s3a://no-such-bucket/fleet", environment, tmp_path / "report")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "s3a://no-such-bucket/fleet" in line and "NoSuchBucket" in line, line
    print(line)

    pipeline = pipeline_topics(unique_name)
    aggregator = Aggregator(kafka_cluster.bootstrap_servers, tmp_path / "aggregator", environment=environment,
                            **pipeline, **{"history.location": "s3a://no-such-bucket/fleet",
                                           "history.interval": "PT2S"})
    agent = agent_of(make_kafka_cluster(brokers=1), aggregator, pipeline, tmp_path)
    with aggregator, agent:
        agent.wait_ready()
        stopped = aggregator.process.wait_for_line("the history at s3a://no-such-bucket/fleet stopped", timeout=180)
        eventually(lambda: agent.status()["throttle"]["source"] == "computed", 60,
                   "a decision of the aggregator whose history cannot be written")
    assert "NoSuchBucket" in stopped.text, stopped
    assert SECRET_KEY not in aggregator.process.log_path.read_text(errors="replace")
