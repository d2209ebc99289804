"""`quota-sidecar plan`'s pure parts: the plan file, one line per mistake; the rows of the Spark job; the verdict."""

import json
from datetime import timedelta

import pytest

from quota_sidecar.common.observation import Partition
from quota_sidecar.configuration.settings import ReplicationConfig
from quota_sidecar.decide.planning import ClusterReading, PlanError, PlannedMove, plan_rows, read_plan, summary


def written(tmp_path, content) -> str:
    path = tmp_path / "plan.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_a_kafka_reassign_partitions_plan_is_read(tmp_path):
    path = written(tmp_path, {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}]})
    assert read_plan(path) == [PlannedMove("t", 0, (3, 1))]


BAD_PLANS = {
    "not JSON": ("{", "is not JSON"),
    "no partitions": ({"version": 1}, 'expected {"version": 1, "partitions": [...]}'),
    "version 2": ({"version": 2, "partitions": []}, "only version 1"),
    "no topic": ({"partitions": [{"partition": 0, "replicas": [1]}]}, "partitions[0]: topic=None"),
    "negative partition": ({"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]},
                           "partitions[0]: partition=-1"),
    "no replicas": ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "partitions[0]: replicas=[]"),
    "repeated broker": ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "replicas=[1, 1]"),
    "partition twice": ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                        {"topic": "t", "partition": 0, "replicas": [2]}]}, "t-0 is listed twice"),
}


@pytest.mark.parametrize("content, said", BAD_PLANS.values(), ids=BAD_PLANS.keys())
def test_a_malformed_plan_is_one_line_naming_what_is_wrong(tmp_path, content, said):
    with pytest.raises(PlanError) as error:
        read_plan(written(tmp_path, content))
    assert said in str(error.value) and "\n" not in str(error.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(PlanError, match="cannot read reassignment file .*nothing.json"):
        read_plan(str(tmp_path / "nothing.json"))


CLUSTER = ClusterReading(
    partitions={("t", 0): Partition(1, (1, 2), (1, 2)), ("t", 1): Partition(2, (2, 1), (2, 1)),
                ("u", 0): Partition(1, (1,), (1,)), ("u", 1): Partition(3, (3,), (3,))},
    sizes={("t", 0): 1000, ("t", 1): 2000, ("u", 0): 500},
    growth={("t", 0): 10.0, ("t", 1): 0.0, ("u", 0): 5.0},
    rates_in_force={b: {"leader": 700, "follower": 800} for b in (1, 2, 3)},
)
PLAN = [PlannedMove("t", 0, (3, 2)), PlannedMove("t", 1, (1, 2)), PlannedMove("u", 0, (3, 2))]


def test_rows_are_the_destinations_and_the_leaders_with_the_rates_in_force_unless_a_throttle_is_given():
    rows = plan_rows(PLAN, CLUSTER, ReplicationConfig(capacity_default=10_000), None, None)
    shown = [(r["topic"], r["partition"], r["broker_id"], r["role"], r["bytes"], r["throttle"]) for r in rows]
    assert shown == [("t", 0, 3, "follower", 1000, 800), ("t", 0, 1, "leader", 1000, 700),
                     ("u", 0, 3, "follower", 500, 800), ("u", 0, 2, "follower", 500, 800),
                     ("u", 0, 1, "leader", 1000, 700)]  # t-1 only reorders: nothing moves
    given = plan_rows(PLAN, CLUSTER, ReplicationConfig(), 5000, None)
    assert {r["throttle"] for r in given} == {5000} and {r["capacity_bytes"] for r in given} == {None}


def test_within_gives_the_smallest_throttle_or_refuses_past_the_upper_bound():
    brokers = [{"broker_id": 1, "receive_bytes": 0, "send_bytes": 2000, "upper_bound": 9000.0,
                "needed_throttle": 1200.0, "move_seconds": None},
               {"broker_id": 3, "receive_bytes": 1500, "send_bytes": 0, "upper_bound": 1000.0,
                "needed_throttle": 800.0, "move_seconds": None}]
    result = summary(PLAN, CLUSTER, brokers, None, timedelta(seconds=10))
    assert result["move_ratio"] == pytest.approx(2 / 4) and result["throttle"] == 1201
    assert "broker(s) 3 (1,000 B/s)" in result["refused"]
    fine = summary(PLAN, CLUSTER, [brokers[0]], None, timedelta(seconds=10))
    assert fine["refused"] is None and fine["move_seconds"] == 10.0
