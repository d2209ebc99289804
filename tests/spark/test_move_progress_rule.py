"""The progress rule (spark_jobs/move_progress.py) on tiny inline rows: rates, ETA, both stuck reasons,
per-destination sums and the keep_up floors."""
import pytest

from spark_jobs import move_progress

SETTINGS = {"stuck_after_seconds": 120.0, "keep_up_margin_percent": 20.0}


def replica(partition=0, broker=3, leader=1, **values):
    row = {"topic": "t", "partition": partition, "broker": broker, "leader": leader, "bytes_behind": 1_000_000,
           "lag_seconds": 10.0, "behind_then": None, "replica_growth_bytes": 200_000, "replica_growth_seconds": 10.0,
           "leader_growth_bytes": 100_000, "leader_growth_seconds": 10.0}
    return {**row, **values}


PROGRESS = {
    "catching up faster than the leader grows": (replica(), 20_000, 10_000, 100.0, "moving", None),
    "caught up": (replica(bytes_behind=0), 20_000, 10_000, 0.0, "caught_up", None),
    "no second reading yet": (
        replica(replica_growth_bytes=None, replica_growth_seconds=None, leader_growth_bytes=None,
                leader_growth_seconds=None), None, None, None, "moving", None),
    "a replica that shrank grew 0": (replica(replica_growth_bytes=-5_000, leader_growth_bytes=0), 0.0, 0.0, None,
                                     "moving", None),
    "slower than incoming: cannot keep up": (replica(replica_growth_bytes=100_000, leader_growth_bytes=150_000),
                                             10_000, 15_000, None, "stuck", "cannot_keep_up"),
    "as fast as incoming: cannot keep up": (replica(leader_growth_bytes=200_000), 20_000, 20_000, None, "stuck",
                                            "cannot_keep_up"),
    "no incoming, no progress for stuck.after: no progress": (
        replica(lag_seconds=120.0, behind_then=1_000_000, replica_growth_bytes=0, leader_growth_bytes=0),
        0.0, 0.0, None, "stuck", "no_progress"),
    "behind less than at now - stuck.after: moving": (
        replica(lag_seconds=300.0, behind_then=1_000_001), 20_000, 10_000, 100.0, "moving", None),
    "not behind for stuck.after yet": (
        replica(lag_seconds=119.0, behind_then=1_000_000, replica_growth_bytes=0, leader_growth_bytes=0),
        0.0, 0.0, None, "moving", None),
}


@pytest.mark.parametrize("row, catch_up, incoming, eta, state, reason", PROGRESS.values(), ids=PROGRESS.keys())
def test_progress_of_one_replica(spark, row, catch_up, incoming, eta, state, reason):
    [move] = move_progress.decide(spark, [row], SETTINGS)["moves"]

    assert (move["catch_up_bytes_per_sec"], move["incoming_bytes_per_sec"], move["eta_seconds"], move["state"],
            move["stuck_reason"]) == (catch_up, incoming, eta, state, reason)


def test_destinations_sum_the_lag_and_take_the_slowest_eta(spark):
    rows = [replica(0), replica(1, bytes_behind=3_000_000), replica(2, broker=2, leader=3, bytes_behind=0),
            replica(0, broker=4, replica_growth_bytes=0)]

    result = move_progress.decide(spark, rows, SETTINGS)

    assert [(m["partition"], m["broker"]) for m in result["moves"]] == [(0, 3), (0, 4), (1, 3), (2, 2)]
    assert result["destinations"] == [
        {"broker": 2, "replicas": 1, "sum_replica_lag_bytes": 0, "eta_seconds": 0.0, "stuck": 0},
        {"broker": 3, "replicas": 2, "sum_replica_lag_bytes": 4_000_000, "eta_seconds": 300.0, "stuck": 0},
        {"broker": 4, "replicas": 1, "sum_replica_lag_bytes": 1_000_000, "eta_seconds": None, "stuck": 1},
    ]


def test_keep_up_floors_sum_the_incoming_rates_through_each_broker_and_role(spark):
    rows = [replica(0, broker=3, leader=1, leader_growth_bytes=100_000_000),
            replica(1, broker=3, leader=2, leader_growth_bytes=150_000_000),
            replica(2, broker=2, leader=1, leader_growth_bytes=50_000_000),
            replica(3, broker=2, leader=1, leader_growth_bytes=None, leader_growth_seconds=None)]

    floors = {(f["broker_id"], f["role"]): f["keep_up_floor_bytes_per_sec"]
              for f in move_progress.decide(spark, rows, SETTINGS)["floors"]}

    assert floors == pytest.approx({(3, "follower"): 30e6, (2, "follower"): 6e6, (1, "leader"): 18e6,
                                    (2, "leader"): 18e6})
