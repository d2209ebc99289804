"""The plan arithmetic (spark_jobs/move_plan.py): KIP-73's bounds and MoveTime per broker."""
import pytest

from spark_jobs import move_plan


def row(broker_id, role, bytes_, incoming, **values):
    base = {"topic": "t", "partition": 0, "broker_id": broker_id, "role": role, "bytes": bytes_,
            "incoming_bytes_per_sec": incoming, "capacity_bytes": 10_000, "replication_factor": 2,
            "throttle": 1_000, "within_seconds": None}
    return {**base, **values}


def test_bounds_and_move_time_per_broker(spark):
    rows = [row(3, "follower", 60_000, 200.0), row(3, "follower", 30_000, 100.0, partition=1),
            row(1, "leader", 60_000, 200.0), row(2, "leader", 30_000, 100.0, partition=1)]

    brokers = {b["broker_id"]: b for b in move_plan.decide(spark, rows)}

    three = brokers[3]
    assert (three["receive_bytes"], three["send_bytes"], three["in_bytes_per_sec"]) == (90_000, 0, 300.0)
    assert (three["lower_bound"], three["upper_bound"]) == (300.0, 10_000 - 300.0 / 2)
    assert three["move_seconds"] == pytest.approx(90_000 / (1_000 - 300))
    assert brokers[1]["move_seconds"] == pytest.approx(60_000 / 800) and brokers[1]["send_bytes"] == 60_000


def test_a_throttle_at_or_below_the_incoming_rate_never_ends(spark):
    [broker] = move_plan.decide(spark, [row(3, "follower", 1_000, 1_000.0)])
    assert broker["move_seconds"] is None


def test_within_asks_for_in_plus_bytes_over_the_time(spark):
    rows = [row(3, "follower", 60_000, 200.0, throttle=None, within_seconds=100.0),
            row(1, "leader", 60_000, 200.0, throttle=None, within_seconds=100.0)]
    brokers = move_plan.decide(spark, rows)
    assert [b["needed_throttle"] for b in brokers] == [800.0, 800.0]
    assert [b["move_seconds"] for b in brokers] == [None, None]
