"""Agents and one aggregator on real clusters (the session's, conftest.py): `quota-sidecar aggregate` decides
for every agent that publishes to its pipeline cluster, whatever cluster the agent watches; the conformance
cases give the same decisions through it as in one process; a pipeline that cannot be reached fails each pass
with one WARNING; an observation of a version it does not read is refused in one line, and the others decided."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from harness.agents.conformance_cases import case_folders
from harness.cluster.ports import free_loopback_ports
from harness.agents.sidecar_process import EXECUTABLE, SidecarProcess
from harness.waiting import eventually
from quota_sidecar.common.observation import BrokerLoad, Reassignment, ReplicationObservation
from quota_sidecar.configuration.settings import ReplicationConfig
from quota_sidecar.configuration.properties import PREFIX as P
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.decide.throttles import rate_inputs
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.pipeline import messages
from quota_sidecar.configuration.keys import DECISIONS_TOPIC, OBSERVATIONS_TOPIC
from quota_sidecar.pipeline.transport import Pipeline

pytestmark = pytest.mark.integration
CONFORMANCE = Path(os.environ.get("CONFORMANCE", Path(__file__).resolve().parents[2] / "../shared/conformance"))


def agent(name: str, work: Path, watched: str, pipeline: str, **props) -> SidecarProcess:
    return SidecarProcess(name, work, {
        P + "kafka.admin.bootstrap.servers": watched, P + "pipeline.bootstrap.servers": pipeline,
        P + "storage.check.interval": "PT1S", P + "broker.id": 1, P + "produce": 1024,
        **{P + key: value for key, value in props.items()}})


def test_one_aggregator_decides_for_the_agents_of_two_clusters(aggregator, kafka_cluster, make_kafka_cluster,
                                                                tmp_path):
    full, roomy = make_kafka_cluster(brokers=1), make_kafka_cluster(brokers=1)
    # The same disks, told apart by their limits: every volume is below a petabyte, none below one byte.
    with agent("agent-full", tmp_path, full.bootstrap_servers, kafka_cluster.bootstrap_servers,
               **{"storage.per.volume.limit.min.available.bytes": 1 << 50}) as on_full, \
            agent("agent-roomy", tmp_path, roomy.bootstrap_servers, kafka_cluster.bootstrap_servers,
                  **{"storage.per.volume.limit.min.available.bytes": 1}) as on_roomy:
        on_full.wait_ready(), on_roomy.wait_ready()
        for sidecar, factor in ((on_full, 0.0), (on_roomy, 1.0)):
            eventually(lambda: sidecar.status()["throttle"]["source"] == "computed", 60, f"{sidecar.name} decided")
            status = sidecar.status()
            assert status["throttle"]["factor"] == factor
            decided_by = status["sidecar"]["decided_by"]
            assert decided_by["aggregator"] == aggregator.name
            assert 0 <= decided_by["lag_seconds"] < 10 and decided_by["decision_age_seconds"] < 10, decided_by
        for cluster, rate in ((full, 1.0), (roomy, 1024.0)):
            with ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
                assert admin.describe_user_quotas([None])[None][PRODUCE] == rate
                cluster_id = admin.cluster_id()
            decisions = decisions_of(kafka_cluster.bootstrap_servers, f"{cluster_id}/1")
            assert decisions and {d["aggregator"] for d in decisions} <= {aggregator.name}
        last_resort = [line for line in on_full.problems() if "the hard limit: producer quota 1 B/s on" in line]
        assert len(last_resort) == 1, on_full.problems()  # said once, and nothing else went wrong
        assert [line for line in on_full.problems() if line not in last_resort] == [] and on_roomy.problems() == []


def test_every_conformance_folder_gives_the_same_decisions_through_a_running_aggregator(aggregator, kafka_cluster):
    folders = case_folders(CONFORMANCE)
    if not (CONFORMANCE / "run.py").is_file():
        pytest.skip(f"no conformance cases at {CONFORMANCE}")
    command = f"{EXECUTABLE} evaluate --set pipeline.bootstrap.servers={kafka_cluster.bootstrap_servers}"
    # All folders at once: the aggregator decides their observations together, in the same micro-batches.
    running = {folder.name: subprocess.Popen([sys.executable, str(CONFORMANCE / "run.py"), str(folder), "--cmd", command],
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for folder in folders}
    for name, run in running.items():
        output, _ = run.communicate(timeout=600)
        assert run.returncode == 0 and re.search(r"\b0 failed", output), f"{name}:\n{output}"


def test_a_pipeline_that_cannot_be_reached_fails_each_pass_with_one_warning(make_kafka_cluster, tmp_path):
    watched = make_kafka_cluster(brokers=1)
    nowhere = f"127.0.0.1:{free_loopback_ports(1)[0]}"
    with agent("agent-alone", tmp_path, watched.bootstrap_servers, nowhere,
               **{"storage.per.volume.limit.min.available.bytes": 1, "poll.timeout": "PT3S"}) as alone:
        alone.wait_ready()
        alone.wait_for_polls(3, 60)
        failures = alone.metrics()["quota_sidecar_poll_failures_total"]
        warnings = alone.problems()
    failed = [line for line in warnings if "poll failed: " in line]
    assert len(failed) >= 3 and all(f"cannot reach any bootstrap server {nowhere}" in line for line in failed), warnings
    assert len(failed) in (failures, failures + 1)  # a pass may fail between the metric's read and the stop
    # and the heartbeats (cover.after) going nowhere, said once
    assert [line for line in warnings if line not in failed and "heartbeat failed: " not in line] == []
    assert len([line for line in warnings if "heartbeat failed: " in line]) <= 1


def test_a_question_asked_ahead_is_answered_with_the_next_one_and_not_published_twice(aggregator, kafka_cluster):
    """A pass's rate question goes out with its volumes' (decider.Decider.ask_rates_ahead): one round trip."""
    cluster = "ask-ahead"
    move = ReplicationObservation(broker_load={1: BrokerLoad(1e6, 1e6)},
                                  reassignments=(Reassignment("t", 0, (1, 2), adding=(2,)),))
    rows = rate_inputs(move, ReplicationConfig(capacity_default=10_000_000), {1}, {})
    volume = {"broker_id": 1, "log_dir": "/d", "total_bytes": 1 << 30, "available_bytes": 1 << 29, "usable": True,
              "at_seconds": 0.0}
    pipeline = Pipeline({"bootstrap_servers": kafka_cluster.bootstrap_servers}, lambda: cluster, 1, 60.0)
    try:
        pipeline.ask_rates_ahead(rows)
        factor, _ = pipeline.judge_volumes([volume], {"min_available_bytes": 1})
        ahead = pipeline.judge_rates(rows)
        asked_again = pipeline.judge_rates(rows)  # nothing asked ahead now: published
    finally:
        pipeline.close()
    assert factor == 1.0 and ahead["rates"] and ahead == asked_again
    published = decisions_of(kafka_cluster.bootstrap_servers, f"{cluster}/1", OBSERVATIONS_TOPIC)
    assert [bool(o["replication"]) for o in published] == [True, False, True]


def test_an_observation_of_a_version_the_aggregator_does_not_know_is_refused_in_one_line_the_next_decided(
        aggregator, kafka_cluster):
    """An agent of a newer release during a rolling upgrade publishes version 2: the aggregator skips it with one
    WARNING naming the version, the agent and where the record is, and answers this release's question after it."""
    cluster, servers = "newer-release", kafka_cluster.bootstrap_servers
    volume = {"broker_id": 4, "log_dir": "/d", "total_bytes": 1 << 30, "available_bytes": 1 << 29, "usable": True,
              "at_seconds": 0.0}
    newer = {**messages.observation(cluster, 4, datetime.now(timezone.utc), volumes=[volume], limits={}),
             "version": 2}
    producer = KafkaProducer(bootstrap_servers=servers)
    try:
        sent = producer.send(OBSERVATIONS_TOPIC, key=messages.key(cluster, 4).encode(),
                             value=messages.encode(newer)).get(timeout=30)
    finally:
        producer.close()
    pipeline = Pipeline({"bootstrap_servers": servers}, lambda: cluster, 4, 60.0)
    try:
        factor, _ = pipeline.judge_volumes([volume], {"min_available_bytes": 1})
    finally:
        pipeline.close()

    assert factor == 1.0
    assert [d["answers"] for d in decisions_of(servers, f"{cluster}/4")] == [pipeline.last_decision["answers"]]
    (refused,) = [line for line in aggregator.process.problems() if f"of cluster {cluster} " in line]
    assert (f"refused an observation of version 2 from the agent of broker 4 of cluster {cluster} at "
            f"{OBSERVATIONS_TOPIC}-{sent.partition} offset {sent.offset}: this aggregator reads version 1") in refused


def decisions_of(bootstrap: str, key: str, topic: str = DECISIONS_TOPIC) -> list[dict]:
    """The decisions (or observations) under `key` in their topic, up to its end now (the agents go on asking)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        found = []
        while any(consumer.position(p) < ends[p] for p in partitions):
            for records in consumer.poll(timeout_ms=1000).values():
                found += [json.loads(r.value) for r in records if r.key == key.encode() and r.offset < ends[
                    TopicPartition(r.topic, r.partition)]]
        return found
    finally:
        consumer.close()



def test_the_aggregator_at_the_default_heap_runs_the_small_driver_without_pandas(aggregator):
    """aggregator.driver.memory's default: a 512 MiB heap on the serial collector, and no numpy, pandas or pyarrow
    in its Python process, which pyspark would otherwise load."""
    process = psutil.Process(aggregator.process.process.pid)
    jvm = next(child for child in process.children(recursive=True) if child.name() == "java")
    options = jvm.cmdline()
    assert "-Xmx512m" in options and "-XX:+UseSerialGC" in options, options
    loaded = sorted({region.path for region in process.memory_maps() if any(
        f"site-packages/{library}" in region.path for library in ("numpy", "pandas", "pyarrow"))})
    assert loaded == [], loaded
