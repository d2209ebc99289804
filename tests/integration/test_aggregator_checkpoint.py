"""The aggregator's checkpoint belongs to one pipeline (spark_jobs/checkpoint.py): aggregators of two clusters'
pipelines, one after the other on one host with the default location, keep apart checkpoints; one given another
pipeline's checkpoint stops at start with one line, before its Spark starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.spark.aggregator import Aggregator
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.configuration.keys import DECISIONS_TOPIC, OBSERVATIONS_TOPIC
from spark_jobs.checkpoint import MARKER, Owner

pytestmark = pytest.mark.integration
DEFAULT = {"aggregator.checkpoint.location": ""}  # empty: the default, under the aggregator's TMPDIR


def cluster_id(bootstrap_servers: str) -> str:
    with ClusterAdmin({"bootstrap_servers": bootstrap_servers}) as admin:
        return admin.cluster_id()


def checkpoint_used(aggregator: Aggregator) -> Path:
    """The checkpoint the aggregator's start line names, once its query has written its first offsets there."""
    line = aggregator.process.first_line("deciding for the agents of")
    location = Path(re.search(r"\(checkpoint (\S+), Spark", line.text).group(1))
    eventually(lambda: (location / "offsets" / "0").is_file(), 60, f"the first offsets in {location}")
    return location


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_two_pipelines_aggregators_on_one_host_keep_their_own_default_checkpoints(make_kafka_cluster, tmp_path):
    first, second = make_kafka_cluster(brokers=1), make_kafka_cluster(brokers=1)
    temp = tmp_path / "tmp"
    temp.mkdir()
    environment = {"TMPDIR": str(temp)}
    topics = f"(topics {OBSERVATIONS_TOPIC} -> {DECISIONS_TOPIC})"

    with Aggregator(first.bootstrap_servers, tmp_path, "aggregator-first", environment, **DEFAULT) as one:
        first_checkpoint = checkpoint_used(one)
    first_files = files_of(first_checkpoint)
    assert first_checkpoint.parent == temp
    assert Owner.from_json(first_files[MARKER].decode()) == Owner(cluster_id(first.bootstrap_servers),
                                                                  OBSERVATIONS_TOPIC, DECISIONS_TOPIC)

    # Given the first's checkpoint, the second cluster's aggregator refuses it before Spark starts: no JVM's console.
    refused = SidecarProcess("aggregator-given-the-first-checkpoint", tmp_path, {
        PREFIX + "pipeline.bootstrap.servers": second.bootstrap_servers,
        PREFIX + "aggregator.checkpoint.location": first_checkpoint}, command="aggregate", environment=environment)
    refused.start()
    pid = refused.process.pid
    assert refused.process.wait(120) == 2, refused.log_tail()
    [line] = [line for line in refused.log_tail().splitlines() if line.startswith("quota-sidecar: ")]
    assert line == (f"quota-sidecar: {PREFIX}aggregator.checkpoint.location={first_checkpoint} was written for "
                    f"cluster {cluster_id(first.bootstrap_servers)} {topics}, not this pipeline's cluster "
                    f"{cluster_id(second.bootstrap_servers)} {topics}: give another location or delete it")
    assert not (temp / f"quota-sidecar-spark-{pid}.log").exists()

    with Aggregator(second.bootstrap_servers, tmp_path, "aggregator-second", environment, **DEFAULT) as two:
        second_checkpoint = checkpoint_used(two)
        assert second_checkpoint.parent == temp and second_checkpoint != first_checkpoint
        assert Owner.from_json((second_checkpoint / MARKER).read_text()).cluster_id == \
            cluster_id(second.bootstrap_servers)
    assert files_of(first_checkpoint) == first_files  # as the first left it: the second wrote nothing there
