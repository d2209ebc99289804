"""The Spark aggregations on tiny inline DataFrames, in one embedded session (chispa's style)."""
import json
import math
import os
import subprocess
import sys
import time

import pytest

from quota_sidecar.common.vocabulary import RULE_REASONS
from spark_jobs import replication_rates, volume_violations
from spark_jobs.schemas import BROKER_ROLE_SCHEMA, VOLUME_SCHEMA, frame_from_rows
from spark_jobs.session import SparkStartError, get_session

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1_000_000


def volume(total, available, usable=True, broker_id=1, log_dir="/data", at_seconds=0.0):
    return {"broker_id": broker_id, "log_dir": log_dir, "total_bytes": total, "available_bytes": available,
            "usable": usable, "at_seconds": at_seconds}  # fmt: skip


BYTES_LIMIT = {"min_available_bytes": 100}
RATIO_LIMIT = {"min_available_ratio": 0.1}


# (volume, limit, available_ratio, violated); None: the volume is not in the output.
VOLUME_RULES = {
    "bytes above limit": (volume(1000, 101), BYTES_LIMIT, 0.101, False),
    "bytes equal to limit is a violation": (volume(1000, 100), BYTES_LIMIT, 0.1, True),
    "bytes below limit": (volume(1000, 99), BYTES_LIMIT, 0.099, True),
    "ratio above limit": (volume(1000, 101), RATIO_LIMIT, 0.101, False),
    "ratio equal to limit is a violation": (volume(1000, 100), RATIO_LIMIT, 0.1, True),
    "ratio below limit": (volume(1000, 99), RATIO_LIMIT, 0.099, True),
    "total 0: ratio 0, violated by ratio": (volume(0, 0), RATIO_LIMIT, 0.0, True),
    "total 0: violated by bytes": (volume(0, 0), BYTES_LIMIT, 0.0, True),
    "empty volume fine by bytes": (volume(10_000, 10_000), BYTES_LIMIT, 1.0, False),
    "unusable volume dropped": (volume(1000, 0, usable=False), BYTES_LIMIT, None, None),
}


@pytest.mark.parametrize("row, params, ratio, violated", VOLUME_RULES.values(), ids=VOLUME_RULES.keys())
def test_volume_rule(spark, row, params, ratio, violated):
    df = frame_from_rows(spark, [row], VOLUME_SCHEMA)

    actual = [r.asDict() for r in volume_violations.transform(df, params).collect()]

    measured = {key: row[key] for key in ("broker_id", "log_dir", "total_bytes", "available_bytes")}
    expected = [] if violated is None else [{
        **measured, "available_ratio": ratio, "fill_bytes_per_sec": None, "seconds_to_limit": 0.0 if violated else None,
        "violated": violated, "predicted": False, "throttle_factor": 0.0 if violated else 1.0, "descending": False}]
    assert actual == expected


@pytest.mark.parametrize("params", [{}, {"min_available_bytes": 1, "min_available_ratio": 0.1}])
def test_volume_limit_is_exactly_one_of_bytes_and_ratio(spark, params):
    df = frame_from_rows(spark, [volume(10, 5)], VOLUME_SCHEMA)
    with pytest.raises(ValueError, match="exactly one"):
        volume_violations.transform(df, params)


def history(*points, total=100_000, **where):
    """One volume's measurements: (seconds relative to now, available bytes) pairs."""
    return [volume(total, available, at_seconds=float(at), **where) for at, available in points]


LEAD_30S = {"min_available_bytes": 1000, "lead_time_seconds": 30.0}
HARD_1000 = {"min_available_bytes": 1000}

# (measurements of one volume, limit, fill_bytes_per_sec, seconds_to_limit, violated, predicted)
FILL_RULES = {
    "one measurement: no fill rate": (history((0, 50_000)), HARD_1000, None, None, False, False),
    "filling 1000 B/s": (history((-10, 50_000), (0, 40_000)), HARD_1000, 1000.0, 39.0, False, False),
    "the newest row is the volume now, whatever the order": (
        history((0, 40_000), (-10, 50_000)), HARD_1000, 1000.0, 39.0, False, False),
    "least squares over uneven times": (
        history((-30, 60_000), (-10, 40_000), (0, 31_000)), HARD_1000, 6800 / 7, 30_000 / (6800 / 7), False, False),
    "refilling: negative fill, never reaches the limit": (
        history((-10, 30_000), (0, 40_000)), HARD_1000, -1000.0, None, False, False),
    "steady: zero fill": (history((-10, 40_000), (0, 40_000)), HARD_1000, 0.0, None, False, False),
    "two measurements at one time: no fill rate": (
        history((0, 40_000), (0, 40_000)), HARD_1000, None, None, False, False),
    "ratio limit: limit_bytes = ratio x total": (
        history((-10, 50_000), (0, 40_000)), {"min_available_ratio": 0.01}, 1000.0, 39.0, False, False),
    "at the limit: 0 s, not predicted": (history((-10, 2_000), (0, 1_000)), HARD_1000, 100.0, 0.0, True, False),
    "at the limit while refilling: 0 s": (history((-10, 500), (0, 1_000)), HARD_1000, -50.0, 0.0, True, False),
    "within the lead time: a predicted violation": (
        history((-10, 41_000), (0, 31_000)), LEAD_30S, 1000.0, 30.0, True, True),
    "beyond the lead time: no violation": (
        history((-10, 41_001), (0, 31_001)), LEAD_30S, 1000.0, 30.001, False, False),
    "lead time without a fill rate: no violation": (history((0, 1_001)), LEAD_30S, None, None, False, False),
}


@pytest.mark.parametrize("rows, params, fill, seconds, violated, predicted", FILL_RULES.values(), ids=FILL_RULES.keys())
def test_fill_rate_and_time_to_the_limit(spark, rows, params, fill, seconds, violated, predicted):
    df = frame_from_rows(spark, rows, VOLUME_SCHEMA)

    (actual,) = [r.asDict() for r in volume_violations.transform(df, params).collect()]

    assert actual["available_bytes"] == max(rows, key=lambda row: row["at_seconds"])["available_bytes"]
    assert (actual["fill_bytes_per_sec"] is None) == (fill is None)
    assert actual["fill_bytes_per_sec"] == pytest.approx(fill)
    assert fill != 0 or math.copysign(1, actual["fill_bytes_per_sec"]) == 1  # 0.0 in the JSON, never -0.0
    assert actual["seconds_to_limit"] == pytest.approx(seconds)
    assert (actual["violated"], actual["predicted"]) == (violated, predicted)


def test_each_volume_has_its_own_fill_rate(spark):
    rows = history((-10, 50_000), (0, 40_000)) + history((-10, 40_000), (0, 45_000), log_dir="/b")
    df = frame_from_rows(spark, rows, VOLUME_SCHEMA)

    actual = {r["log_dir"]: r["fill_bytes_per_sec"] for r in volume_violations.transform(df, HARD_1000).collect()}

    assert actual == {"/data": 1000.0, "/b": -500.0}


SOFT_BYTES = {"min_available_bytes": 1000, "soft_min_available_bytes": 3000}
SOFT_RATIO = {"min_available_ratio": 0.1, "soft_min_available_ratio": 0.3}

# (available of 10 000 bytes, limit, the volume's throttle_factor, violated)
SOFT_RULES = {
    "above soft": (5000, SOFT_BYTES, 1.0, False),
    "at soft": (3000, SOFT_BYTES, 1.0, False),
    "midway": (2000, SOFT_BYTES, 0.5, False),
    "a quarter up": (1500, SOFT_BYTES, 0.25, False),
    "at hard": (1000, SOFT_BYTES, 0.0, True),
    "below hard": (10, SOFT_BYTES, 0.0, True),
    "ratio midway": (2000, SOFT_RATIO, 0.5, False),
    "ratio at soft": (3000, SOFT_RATIO, 1.0, False),
    "ratio at hard": (1000, SOFT_RATIO, 0.0, True),
    "no soft limit: 1 above hard": (1001, HARD_1000, 1.0, False),
}


@pytest.mark.parametrize("available, params, factor, violated", SOFT_RULES.values(), ids=SOFT_RULES.keys())
def test_soft_factor(spark, available, params, factor, violated):
    df = frame_from_rows(spark, [volume(10_000, available)], VOLUME_SCHEMA)

    (actual,) = volume_violations.transform(df, params).collect()

    assert actual["throttle_factor"] == pytest.approx(factor) and actual["violated"] == violated


def test_a_predicted_violation_in_the_soft_zone_stops_producers(spark):
    rows = history((-10, 2_600), (0, 2_000), total=10_000)

    factor, (row,) = volume_violations.decide(spark, rows, {**SOFT_BYTES, "lead_time_seconds": 20.0})

    assert (factor, row["predicted"], row["seconds_to_limit"]) == (0.0, True, pytest.approx(1000 / 60))


def test_the_cluster_factor_is_the_smallest_soft_factor(spark):
    rows = [volume(10_000, 2500, log_dir="/a"), volume(10_000, 1500, log_dir="/b", broker_id=2),
            volume(10_000, 9000, log_dir="/c")]

    factor, judged = volume_violations.decide(spark, rows, SOFT_BYTES)

    assert factor == pytest.approx(0.25)
    assert [r["throttle_factor"] for r in judged] == pytest.approx([0.75, 1.0, 0.25])
    assert not any(r["violated"] for r in judged)


def test_soft_limit_of_another_kind_is_refused(spark):
    df = frame_from_rows(spark, [volume(10, 5)], VOLUME_SCHEMA)
    with pytest.raises(ValueError, match="kind"):
        volume_violations.transform(df, {"min_available_bytes": 1, "soft_min_available_ratio": 0.5})


FACTOR_CASES = {
    "no volumes": ([], 1.0),
    "all healthy": ([volume(1000, 500), volume(1000, 900, log_dir="/b")], 1.0),
    "one violated": ([volume(1000, 500), volume(1000, 50, log_dir="/b")], 0.0),
    "only an unusable one is full": ([volume(1000, 500), volume(1000, 0, usable=False, log_dir="/b")], 1.0),
}


@pytest.mark.parametrize("rows, factor", FACTOR_CASES.values(), ids=FACTOR_CASES.keys())
def test_throttle_factor(spark, rows, factor):
    assert volume_violations.decide(spark, rows, BYTES_LIMIT)[0] == factor


def test_decide_returns_every_usable_volume_by_broker_and_log_dir(spark):
    volumes = [
        volume(1000, 50, broker_id=2, log_dir="/a"),
        volume(1000, 500, broker_id=1, log_dir="/b"),
        volume(1000, 0, broker_id=1, log_dir="/c", usable=False),
        volume(1000, 100, broker_id=1, log_dir="/a"),
    ]

    factor, rows = volume_violations.decide(spark, volumes, RATIO_LIMIT)

    assert factor == 0.0
    assert [(r["broker_id"], r["log_dir"], r["available_ratio"], r["violated"]) for r in rows] == [
        (1, "/a", 0.1, True),
        (1, "/b", 0.5, False),
        (2, "/a", 0.05, True),
    ]


def test_decide_runs_one_spark_job_per_poll(spark):
    context = spark.sparkContext
    context.setJobGroup("one-poll", "decide")
    try:
        rows = history((-20, 900), (-10, 700), (0, 500)) + history((-10, 80), (0, 50), log_dir="/b")
        volume_violations.decide(spark, rows, {**SOFT_BYTES, "lead_time_seconds": 30.0})
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)

    assert len(_finished_jobs(context, "one-poll")) == 1


def _finished_jobs(context, group, timeout=10.0):
    # The status tracker learns of jobs through Spark's asynchronous listener bus.
    tracker = context.statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        jobs = tracker.getJobIdsForGroup(group)
        if jobs and all(tracker.getJobInfo(job).status == "SUCCEEDED" for job in jobs):
            return jobs
        assert time.monotonic() < deadline, f"jobs of {group} not finished: {jobs}"
        time.sleep(0.05)


def test_rows_without_a_required_field_are_refused(spark):
    row = volume(1000, 50)
    del row["usable"]
    with pytest.raises(ValueError, match="usable"):
        frame_from_rows(spark, [row], VOLUME_SCHEMA)


def test_batch_main_prints_factor_and_violations(tmp_path):
    lines = [volume(1000, 50, broker_id=2), volume(1000, 500), volume(1000, 0, usable=False, broker_id=3)]
    (tmp_path / "volumes.jsonl").write_text("".join(json.dumps(v) + "\n" for v in lines))

    run = subprocess.run(
        [sys.executable, "-m", "spark_jobs.volume_violations", "volumes.jsonl", "--min-available-ratio", "0.1",
         "--json"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    output = json.loads(run.stdout)
    assert output["throttle_factor"] == 0.0
    assert [(v["broker_id"], v["available_ratio"]) for v in output["violations"]] == [(2, 0.05)]
    assert os.listdir(tmp_path) == ["volumes.jsonl"]  # no spark-warehouse/ or metastore_db/ in the cwd


def broker_role(role="leader", **values):
    row = {
        "broker_id": 1,
        "role": role,
        "capacity_bytes": 100 * MB,
        "used_bytes_per_sec": None,
        "applied_rate": None,
        "measured_replication_bytes_per_sec": None,
        "max_percent": 80.0,
        "min_rate": 10 * MB,
        "change_threshold_percent": 0.0,
        "consecutive_failures": 0,
        "failure_threshold": 1,
        "keep_up_floor_bytes_per_sec": None,
    }
    return {**row, **values}


# (broker role, rate, reason); C = 100 MB/s and min_rate = 10 MB/s unless the row says otherwise.
REPLICATION_RULES = {
    "leader U=70 P=0 pct=80": (broker_role(used_bytes_per_sec=70e6, applied_rate=0), 24 * MB, "computed"),
    "leader U=80 P=70": (broker_role(used_bytes_per_sec=80e6, applied_rate=70 * MB), 72 * MB, "computed"),
    "leader U=110 P=70: beyond capacity": (
        broker_role(used_bytes_per_sec=110e6, applied_rate=70 * MB), 40 * MB, "computed"),
    "leader U=200 P=70: floor at min_rate": (
        broker_role(used_bytes_per_sec=200e6, applied_rate=70 * MB), 10 * MB, "computed"),
    "used below P: all capacity free": (broker_role(used_bytes_per_sec=50e6, applied_rate=70 * MB), 80 * MB, "computed"),
    "follower U=70 pct=60": (broker_role("follower", used_bytes_per_sec=70e6, max_percent=60.0), 18 * MB, "computed"),
    "105 within 10% of 100: unchanged": (
        broker_role(capacity_bytes=210 * MB, used_bytes_per_sec=100e6, applied_rate=100 * MB, max_percent=50.0,
                    change_threshold_percent=10.0), 100 * MB, "unchanged"),
    "110 is 10% off 100: not within": (
        broker_role(capacity_bytes=220 * MB, used_bytes_per_sec=100e6, applied_rate=100 * MB, max_percent=50.0,
                    change_threshold_percent=10.0), 110 * MB, "computed"),
    "no threshold for P=0": (
        broker_role(used_bytes_per_sec=70e6, applied_rate=0, change_threshold_percent=1000.0), 24 * MB, "computed"),
    "measured 30 replaces P=70": (
        broker_role(used_bytes_per_sec=80e6, applied_rate=70 * MB, measured_replication_bytes_per_sec=30e6),
        40 * MB, "computed"),
    "failed read, failures = threshold: keep P": (
        broker_role(applied_rate=50 * MB, consecutive_failures=1, failure_threshold=1), 50 * MB, "kept"),
    "failed read, failures > threshold: fail safe": (
        broker_role(applied_rate=50 * MB, consecutive_failures=2, failure_threshold=1), 10 * MB, "fail_safe"),
    "failed read, no P: fail safe": (broker_role(consecutive_failures=0), 10 * MB, "fail_safe"),
    "keep_up floor 24 above computed 18": (
        broker_role("follower", used_bytes_per_sec=70e6, max_percent=60.0, keep_up_floor_bytes_per_sec=24e6),
        24 * MB, "keep_up"),
    "keep_up floor 15 below computed 18: the rule stands": (
        broker_role("follower", used_bytes_per_sec=70e6, max_percent=60.0, keep_up_floor_bytes_per_sec=15e6),
        18 * MB, "computed"),
    "keep_up floor above the fail-safe rate": (
        broker_role(consecutive_failures=0, keep_up_floor_bytes_per_sec=30e6), 30 * MB, "keep_up"),
    "keep_up floor above a kept rate": (
        broker_role(applied_rate=20 * MB, consecutive_failures=1, keep_up_floor_bytes_per_sec=30e6), 30 * MB,
        "keep_up"),
}


def test_the_rule_gives_exactly_the_reasons_throttles_spells():
    assert {reason for _, _, reason in REPLICATION_RULES.values()} == set(RULE_REASONS)


@pytest.mark.parametrize("row, rate, reason", REPLICATION_RULES.values(), ids=REPLICATION_RULES.keys())
def test_replication_rule(spark, row, rate, reason):
    df = frame_from_rows(spark, [row], BROKER_ROLE_SCHEMA)

    actual = [r.asDict() for r in replication_rates.transform(df).selectExpr(*replication_rates.RATE_COLUMNS).collect()]

    assert actual == [{**row, "rate": rate, "reason": reason, "keep_up_capped": False}]


def test_keep_up_floor_is_capped_at_the_share_of_capacity_and_says_so(spark):
    # C = 100 MB/s at 80 %: the cap is 80 MB/s, below the floor of 95 MB/s (KIP-73's upper bound broken)
    row = broker_role("follower", used_bytes_per_sec=0.0, applied_rate=0, keep_up_floor_bytes_per_sec=95e6)
    df = frame_from_rows(spark, [row, {**row, "broker_id": 2, "keep_up_floor_bytes_per_sec": 20e6},
                                 {**row, "broker_id": 3, "used_bytes_per_sec": 90e6,
                                  "keep_up_floor_bytes_per_sec": 50e6}], BROKER_ROLE_SCHEMA)

    actual = [(r["broker_id"], r["rate"], r["reason"], r["keep_up_capped"])
              for r in replication_rates.transform(df).collect()]

    assert sorted(actual) == [(1, 80 * MB, "computed", True), (2, 80 * MB, "computed", False),
                              (3, 50 * MB, "keep_up", False)]


def test_replication_decide_sorts_and_fills_shared_settings(spark):
    settings = {**{key: value for key, value in broker_role().items()
                   if key not in ("broker_id", "role", "keep_up_floor_bytes_per_sec")},
                "stuck_after_seconds": 120.0, "keep_up_margin_percent": 20.0, "moving_replicas": []}
    rows = [
        {"broker_id": 2, "role": "leader", "used_bytes_per_sec": 70e6, "applied_rate": 0},
        {"broker_id": 1, "role": "leader", "used_bytes_per_sec": 80e6, "applied_rate": 70 * MB},
        {"broker_id": 1, "role": "follower", "used_bytes_per_sec": 70e6, "max_percent": 60.0},
    ]

    result = replication_rates.decide(spark, rows, settings)

    assert [(r["broker_id"], r["role"], r["rate"], r["reason"]) for r in result["rates"]] == [
        (1, "follower", 18 * MB, "computed"),
        (1, "leader", 72 * MB, "computed"),
        (2, "leader", 24 * MB, "computed"),
    ]


def test_session_is_built_once(spark):
    assert get_session() is spark
    assert get_session("") is spark


def test_second_in_process_driver_is_refused_naming_the_url(spark):
    with pytest.raises(SparkStartError, match=r"local\[2\]"):
        get_session("local[2]")


DESCENT = {"min_available_bytes": 1000, "descent_min_available_bytes": 2000, "descent_horizon_seconds": 60.0}

# (measurements of one volume, limit, descending): producer quotas go down in steps (decide/descent.py)
DESCENT_RULES = {
    "filling below the descent's start": (history((-10, 2_500), (0, 1_500)), DESCENT, True),
    "filling, reaching the limit within the horizon": (history((-10, 60_000), (0, 50_000)), DESCENT, True),
    "filling, beyond the horizon and above the start": (history((-10, 100_000), (0, 99_000)), DESCENT, False),
    "below the start but not filling (room came back)": (history((-10, 1_200), (0, 1_500)), DESCENT, False),
    "at the limit: violated, the hard limit's quota": (history((-10, 2_000), (0, 900)), DESCENT, False),
    "no descent configured": (history((-10, 2_500), (0, 1_500)), HARD_1000, False),
    "one measurement: no fill rate, no descent": (history((0, 1_500)), DESCENT, False),
    "slowed by the descent, judged at the rate it began from": (
        history((-10, 101_000), (0, 100_000)), {**DESCENT, "descent_rate_bytes_per_sec": 5_000.0}, True),
    "room back beyond the horizon at that rate: lifted": (
        history((-10, 401_000), (0, 400_000)), {**DESCENT, "descent_rate_bytes_per_sec": 5_000.0}, False),
}


@pytest.mark.parametrize("name", list(DESCENT_RULES))
def test_a_volume_descends_while_it_fills_near_the_limit(spark, name):
    rows, limit, descending = DESCENT_RULES[name]
    [row] = volume_violations.transform(frame_from_rows(spark, rows, VOLUME_SCHEMA), limit).collect()
    assert row["descending"] is descending
