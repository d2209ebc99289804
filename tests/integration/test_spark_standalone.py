"""The aggregator on a Spark standalone cluster (Spark's own Master and two Workers, harness/spark/standalone.py):
it decides for the agents of a 3-broker cluster with its micro-batches run by the Workers' executors (the Kafka
connector's jars shipped to them by spark.jars), and after a SIGKILL it starts again from its checkpoint and decides
again on the same cluster, without a stop of its query on the way."""

from __future__ import annotations

import signal
from contextlib import ExitStack
from pathlib import Path

import pytest

from harness.agents.sidecar_process import SidecarProcess
from harness.spark.aggregator import Aggregator
from harness.spark.standalone import StandaloneSpark
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX as P
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = [pytest.mark.integration, pytest.mark.spark_cluster]
APPLICATION = "quota-sidecar-aggregator"


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
