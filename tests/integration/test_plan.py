"""`quota-sidecar plan` against a real cluster: its MoveTime for a move with a producer writing into the
moving partition (KIP-73 test plan (b): progress = throttle - inbound), against the move Kafka's own
kafka-reassign-partitions then runs under the same throttle."""

import json
import subprocess
import time

import pytest

from harness.cluster import kafka_tools
from harness.agents.sidecar_process import EXECUTABLE
from harness.waiting import eventually
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = pytest.mark.integration

RECORD = 32 << 10
FILL, PRODUCE, THROTTLE = 48 << 20, 300_000, 3_000_000
TOLERANCE = 0.30


def test_plan_move_time_is_within_30_percent_of_the_move_kafka_runs(kafka_cluster, unique_name, tmp_path):
    servers = kafka_cluster.bootstrap_servers
    admin = ClusterAdmin({"bootstrap_servers": servers}, retry_deadline=30.0)
    producer = None
    try:
        admin.create_topic(unique_name, 1, 1)
        admin.alter_reassignments({(unique_name, 0): [1]})
        eventually(lambda: not any(m.topic == unique_name for m in admin.list_reassignments()), 60, "topic on 1")
        fill = kafka_tools.producer_performance(servers, unique_name, FILL // RECORD, RECORD, -1,
                                                tmp_path / "fill.log", acks=1)
        assert fill.wait(300) == 0, (tmp_path / "fill.log").read_text()
        producer = kafka_tools.producer_performance(servers, unique_name, 10**9, RECORD, PRODUCE / RECORD,
                                                    tmp_path / "produce.log", acks=1)
        time.sleep(5)  # the producer at its pace
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": unique_name, "partition": 0, "replicas": [2]}]}))
        planned = subprocess.run(
            [str(EXECUTABLE), "plan", "--reassignment", str(plan_file),
             "--throttle", str(THROTTLE), "--measure", "5s", "-o", "json",
             "--set", f"kafka.admin.bootstrap.servers={servers}",
             "--set", "replication.capacity.bytes.per.second=100000000",
             "--set", "storage.per.volume.limit.min.available.bytes=1"],
            capture_output=True, text=True, timeout=300)
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)

        executed = kafka_tools.reassign_partitions(servers, {(unique_name, 0): [2]}, "--execute",
                                                   "--throttle", str(THROTTLE))
        started = time.monotonic()  # the tool returns once the move is under way (its JVM's start not counted)
        assert executed.returncode == 0, executed.stdout + executed.stderr
        eventually(lambda: not any(m.topic == unique_name for m in admin.list_reassignments()), 240, "the move")
        took = time.monotonic() - started
    finally:
        if producer is not None:
            producer.terminate()
            producer.wait(30)
        kafka_tools.reassign_partitions(servers, {(unique_name, 0): [2]}, "--verify")  # removes the throttle
        admin.close()

    [source] = [b for b in plan["brokers"] if b["broker_id"] == 1]
    assert source["in_bytes_per_sec"] == pytest.approx(PRODUCE, rel=0.3), plan
    assert plan["move_ratio"] > 0 and plan["move_seconds"] is not None, plan
    assert abs(plan["move_seconds"] - took) <= TOLERANCE * took, \
        f"plan said {plan['move_seconds']:.1f}s, the move took {took:.1f}s: {plan}"
