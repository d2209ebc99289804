"""The sawtooth-aware forecast (spark_jobs/forecast.py) on histories of known growth: the generator's sawtooth
says when a volume truly reaches a level, independently of the regression."""
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from spark_jobs import forecast
from spark_jobs.forecast import ForecastParams

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from history_generator import GIB, START, Sawtooth, rows  # noqa: E402

SCHEMA = "cluster string, broker int, log_dir string, observed_at timestamp, total_bytes bigint, available_bytes bigint"
LIMIT = 100 * GIB  # min available bytes


def forecast_of(spark, volumes, days, interval=timedelta(hours=1), params=ForecastParams(LIMIT), noise=0.0,
                span=None):
    history = [{key: row[key] for key in SCHEMA_COLUMNS} for row in rows(volumes, days, interval, noise)]
    frame = spark.createDataFrame([tuple(row.values()) for row in history], SCHEMA)
    return {(row["cluster"], row["broker"]): row.asDict()
            for row in forecast.transform(frame, params, span).collect()}


SCHEMA_COLUMNS = [part.split()[0] for part in SCHEMA.split(", ")]


def at(seconds):
    return datetime.fromtimestamp(seconds, timezone.utc)


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_a_sawtooth_reaches_the_limit_when_its_peaks_do_within_10_percent(spark, noise):
    # 1000 GiB, writes 30 GiB a day, retention keeps 3 GiB a day of them: 12 cycles of 7 days over 84 days, the
    # peaks at 662 GiB by then and at the limit (900 GiB) some 80 days later
    tooth = Sawtooth(1000 * GIB, 200 * GIB, 30 * GIB, 3 * GIB, timedelta(days=7), phase=timedelta(days=2))
    days = 84

    (row,) = forecast_of(spark, [("a", 1, "/data", tooth)], days, noise=noise).values()

    end = START + timedelta(days=days)
    true_limit = tooth.first_reaching(1000 * GIB - LIMIT)
    true_full = tooth.first_reaching(1000 * GIB)
    assert row["method"] == "peaks"
    assert row["filling"] is True
    assert row["cycles"] == 12
    assert row["growth_bytes_per_day"] == pytest.approx(3 * GIB, rel=0.02)
    for predicted, truth in ((row["limit_at_seconds"], true_limit), (row["full_at_seconds"], true_full)):
        assert abs(at(predicted) - truth) <= 0.1 * (truth - end), (at(predicted), truth)
    assert row["limit_earliest_seconds"] <= row["limit_at_seconds"] <= row["limit_latest_seconds"]
    assert end < true_limit


def test_a_long_history_is_judged_on_its_bins_lowest_and_highest_observations(spark):
    """At one row a minute, 84 days are 120,961 rows a volume, each of the 500 bins ~242 of them: the same cycles,
    growth and dates as the hourly history, with the span read from the rows or given (history.day_span)."""
    tooth = Sawtooth(1000 * GIB, 200 * GIB, 30 * GIB, 3 * GIB, timedelta(days=7), phase=timedelta(days=2))
    hourly = forecast_of(spark, [("a", 1, "/data", tooth)], 84)[("a", 1)]
    span = (START.timestamp(), (START + timedelta(days=85)).timestamp())

    for row in (forecast_of(spark, [("a", 1, "/data", tooth)], 84, timedelta(minutes=1), span=given)[("a", 1)]
                for given in (None, span)):
        assert (row["method"], row["cycles"], row["points"]) == ("peaks", 12, 84 * 24 * 60 + 1)
        assert row["growth_bytes_per_day"] == pytest.approx(hourly["growth_bytes_per_day"], rel=0.01)
        assert abs(row["limit_at_seconds"] - hourly["limit_at_seconds"]) < 86400


def test_a_volume_that_only_cycles_is_not_filling(spark):
    tooth = Sawtooth(1000 * GIB, 300 * GIB, 60 * GIB, 0.0, timedelta(days=7))

    (row,) = forecast_of(spark, [("a", 1, "/data", tooth)], 56, noise=0.5).values()

    assert row["method"] == "peaks"
    assert row["filling"] is False
    assert abs(row["growth_bytes_per_day"]) < 0.02 * 60 * GIB
    assert row["growth_low_bytes_per_day"] <= 0  # the band reaches below no growth
    assert (row["limit_at_seconds"], row["full_at_seconds"], row["limit_earliest_seconds"]) == (None, None, None)


@pytest.mark.parametrize("days, method", [(15, "linear"), (22, "peaks")])
def test_fewer_than_three_cycles_fall_back_to_a_line_through_every_observation(spark, days, method):
    # drops at days 7 and 14 (two complete cycles) in 15 days; a third at 21 in 22 days
    tooth = Sawtooth(1000 * GIB, 300 * GIB, 40 * GIB, 5 * GIB, timedelta(days=7))

    (row,) = forecast_of(spark, [("a", 1, "/data", tooth)], days).values()

    assert (row["method"], row["cycles"]) == (method, days // 7)


def test_a_line_through_every_observation_of_a_steady_climb(spark):
    steady = Sawtooth(1000 * GIB, 200 * GIB, 10 * GIB, 10 * GIB, timedelta(days=1000))

    (row,) = forecast_of(spark, [("a", 1, "/data", steady)], 10).values()

    assert row["method"] == "linear"
    assert row["growth_bytes_per_day"] == pytest.approx(10 * GIB)
    # 200 GiB used at the start, 900 GiB at the limit: 70 days at 10 GiB a day
    assert at(row["limit_at_seconds"]) == pytest.approx(START + timedelta(days=70), abs=timedelta(seconds=1))
    assert at(row["full_at_seconds"]) == pytest.approx(START + timedelta(days=80), abs=timedelta(seconds=1))


def test_a_ratio_limit_and_no_limit(spark):
    steady = Sawtooth(1000 * GIB, 200 * GIB, 10 * GIB, 10 * GIB, timedelta(days=1000))
    volumes = [("a", 1, "/data", steady)]

    (by_ratio,) = forecast_of(spark, volumes, 10, params=ForecastParams(min_available_ratio=0.2)).values()
    (unlimited,) = forecast_of(spark, volumes, 10, params=ForecastParams()).values()

    assert at(by_ratio["limit_at_seconds"]) == pytest.approx(START + timedelta(days=60), abs=timedelta(seconds=1))
    assert by_ratio["limit_bytes"] == pytest.approx(200 * GIB)
    assert unlimited["limit_at_seconds"] == unlimited["full_at_seconds"]


def test_one_observation_has_no_method_and_is_not_filling(spark):
    tooth = Sawtooth(1000 * GIB, 300 * GIB, 40 * GIB, 5 * GIB, timedelta(days=7))

    (row,) = forecast_of(spark, [("a", 1, "/data", tooth)], 0).values()

    assert (row["method"], row["filling"], row["limit_at_seconds"]) == ("none", False, None)


def test_by_cluster_names_the_first_volume_to_reach_the_limit_and_the_headroom(spark):
    slow = Sawtooth(1000 * GIB, 200 * GIB, 10 * GIB, 10 * GIB, timedelta(days=1000))
    fast = Sawtooth(1000 * GIB, 300 * GIB, 20 * GIB, 20 * GIB, timedelta(days=1000))
    flat = Sawtooth(1000 * GIB, 300 * GIB, 60 * GIB, 0.0, timedelta(days=7))
    history = [{key: row[key] for key in SCHEMA_COLUMNS} for row in rows(
        [("a", 1, "/d", slow), ("a", 2, "/d", fast), ("b", 1, "/d", flat)], 28, timedelta(hours=1))]
    frame = spark.createDataFrame([tuple(row.values()) for row in history], SCHEMA)

    clusters = {row["cluster"]: row.asDict() for row in forecast.by_cluster(
        forecast.transform(frame, ForecastParams(LIMIT))).collect()}

    # fast: 300 GiB used at the start, 900 at the limit, 20 GiB a day: day 30, 2 days after the newest at day 28
    assert (clusters["a"]["first_broker"], clusters["a"]["filling"], clusters["a"]["volumes"]) == (2, 2, 2)
    assert clusters["a"]["headroom_days"] == pytest.approx(30 - 28)
    assert clusters["a"]["growth_bytes_per_day"] == pytest.approx(30 * GIB)
    assert (clusters["b"]["first_broker"], clusters["b"]["headroom_days"], clusters["b"]["filling"]) == (None, None, 0)
