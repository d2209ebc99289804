"""The progress rule (spark_jobs/move_progress.py) on tiny inline rows, in the replication pass's job: rates,
ETA, both stuck reasons, per-destination sums and the keep_up floors."""
import pytest

from spark_jobs import replication_rates

MB = 1_000_000


def broker_role(broker_id=1, role="leader", moving=(), **values):
    """A broker role whose rule gives 80 MB/s ('computed') unless `values` say otherwise, with the moves'
    settings and the `moving` replicas."""
    return {"broker_id": broker_id, "role": role, "capacity_bytes": 100 * MB, "used_bytes_per_sec": 0.0,
            "applied_rate": 0, "measured_replication_bytes_per_sec": None, "max_percent": 80.0, "min_rate": MB,
            "change_threshold_percent": 0.0, "consecutive_failures": 0, "failure_threshold": 1,
            "stuck_after_seconds": 120.0, "keep_up_margin_percent": 20.0, "moving_replicas": list(moving), **values}


def judged(spark, *replicas, roles=((1, "leader"),)):
    return replication_rates.decide(spark, [broker_role(b, role, replicas) for b, role in roles])


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
    [move] = judged(spark, row)["moves"]

    assert (move["catch_up_bytes_per_sec"], move["incoming_bytes_per_sec"], move["eta_seconds"], move["state"],
            move["stuck_reason"]) == (catch_up, incoming, eta, state, reason)


def test_destinations_sum_the_lag_and_take_the_slowest_eta(spark):
    rows = [replica(0), replica(1, bytes_behind=3_000_000), replica(2, broker=2, leader=3, bytes_behind=0),
            replica(0, broker=4, replica_growth_bytes=0)]

    result = judged(spark, *rows)

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
    roles = [(3, "follower"), (2, "follower"), (1, "leader"), (2, "leader"), (3, "leader"), (4, "follower")]

    rates = judged(spark, *rows, roles=roles)["rates"]

    floors = {(r["broker_id"], r["role"]): r["keep_up_floor_bytes_per_sec"] for r in rates}
    assert floors == pytest.approx({(3, "follower"): 30e6, (2, "follower"): 6e6, (1, "leader"): 18e6,
                                    (2, "leader"): 18e6, (3, "leader"): None, (4, "follower"): None})
    # (the rule gives 80 MB/s: a floor of 18 or 30 MB/s leaves it be)
    assert {(r["rate"], r["reason"]) for r in rates} == {(80 * MB, "computed")}


def test_the_floor_raises_the_rule_rate_up_to_the_cap(spark):
    # 25 MB/s into the partition: a floor of 30 MB/s above the rule's 24; 90 MB/s: 108 MB/s above the 80 MB/s cap
    busy = broker_role(moving=[replica(leader_growth_bytes=250_000_000)], used_bytes_per_sec=70e6)
    flooded = broker_role(moving=[replica(leader_growth_bytes=900_000_000)])

    [raised] = replication_rates.decide(spark, [busy])["rates"]
    [capped] = replication_rates.decide(spark, [flooded])["rates"]

    assert (raised["rate"], raised["reason"], raised["keep_up_capped"]) == (30 * MB, "keep_up", False)
    assert (capped["rate"], capped["reason"], capped["keep_up_capped"]) == (80 * MB, "computed", True)


def test_no_moving_replica_no_progress_and_no_floor(spark):
    result = judged(spark)

    assert (result["moves"], result["destinations"]) == ([], [])
    assert [(r["keep_up_floor_bytes_per_sec"], r["rate"], r["reason"]) for r in result["rates"]] == [
        (None, 80 * MB, "computed")]
