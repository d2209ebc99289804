"""The history of volume observations (spark_jobs/history.py): what the aggregator appends of a micro-batch,
partitioned by cluster and day, read back, and the days past the retention deleted."""
from datetime import date, datetime, timedelta, timezone

import pytest

from quota_sidecar.pipeline import messages
from spark_jobs import aggregation, history

AT = datetime(2026, 11, 25, 23, 59, 50, tzinfo=timezone.utc)
GIB = 1 << 30


def volume(broker_id, available, at_seconds=0.0, log_dir="/data", usable=True):
    return {"broker_id": broker_id, "log_dir": log_dir, "total_bytes": 10 * GIB, "available_bytes": available,
            "usable": usable, "at_seconds": at_seconds}


def kafka_rows(spark, *observations):
    return spark.createDataFrame([(messages.encode(o),) for o in observations] + [(b"not json",)],
                                 "value binary")


def test_a_micro_batch_appends_each_volume_once_by_its_own_broker_s_agent_at_its_newest_time(spark, tmp_path):
    every_broker = [volume(1, 5 * GIB, -20.0), volume(1, 4 * GIB), volume(2, 8 * GIB, -30.0),
                    volume(2, 7 * GIB, -10.0), volume(2, 0, log_dir="/offline", usable=False)]
    batch = kafka_rows(
        spark,
        messages.observation("cluster-a", 1, AT, volumes=every_broker, limits={"min_available_bytes": 1}),
        messages.observation("cluster-a", 2, AT + timedelta(seconds=30), volumes=every_broker,
                             limits={"min_available_bytes": 1}),
        messages.observation("cluster-b", None, AT, volumes=[volume(5, GIB)], limits={}),
        messages.observation("cluster-b", 5, AT, replication=[]))
    location = str(tmp_path / "history")

    aggregation.record_history(batch, location, timedelta(days=90), {})

    rows = sorted((row["cluster"], row["broker"], row["log_dir"], row["observed_at"], row["available_bytes"])
                  for row in history.read(spark, location).selectExpr(
                      "cluster", "broker", "log_dir", "date_format(observed_at, \"yyyy-MM-dd'T'HH:mm:ssXXX\") AS "
                      "observed_at", "available_bytes").collect())
    assert rows == [
        ("cluster-a", 1, "/data", "2026-11-25T23:59:50Z", 4 * GIB),  # agent 1's own volume, its newest row
        ("cluster-a", 2, "/data", "2026-11-26T00:00:10Z", 7 * GIB),  # agent 2's, 10 s before its observation
        ("cluster-b", 5, "/data", "2026-11-25T23:59:50Z", GIB),  # an unnamed agent records every volume
    ]
    days = sorted(str(path.relative_to(location)) for path in (tmp_path / "history").glob("cluster=*/day=*"))
    assert days == ["cluster=cluster-a/day=2026-11-25", "cluster=cluster-a/day=2026-11-26",
                    "cluster=cluster-b/day=2026-11-25"]


def test_read_keeps_what_since_asks_for_and_a_cluster_named_by_digits_stays_a_string(spark, tmp_path):
    location = str(tmp_path / "history")
    rows = [("007", 1, "/d", datetime(2026, 11, day, 12, tzinfo=timezone.utc), 10, 5, f"2026-11-{day:02}")
            for day in (1, 2, 3)]
    history.append(spark.createDataFrame(rows, "cluster string, broker int, log_dir string, observed_at timestamp, "
                                               "total_bytes bigint, available_bytes bigint, day string"), location)

    read = history.read(spark, location, since=datetime(2026, 11, 2, 6, tzinfo=timezone.utc)).collect()

    assert sorted((row["cluster"], row["observed_at"].day) for row in read) == [("007", 2), ("007", 3)]


def test_the_span_comes_from_the_day_folders_without_reading_a_row_when_there_are_three_days_or_more(spark, tmp_path):
    def written(days, name):
        rows = [("c", 1, "/d", datetime(2026, 11, day, 12, tzinfo=timezone.utc), 10, 5, f"2026-11-{day:02}")
                for day in days]
        history.append(spark.createDataFrame(rows, "cluster string, broker int, log_dir string, observed_at "
                                                   "timestamp, total_bytes bigint, available_bytes bigint, day string"),
                       str(tmp_path / name))
        return history.read(spark, str(tmp_path / name))

    three, two = written([1, 2, 4], "three"), written([1, 2], "two")
    since = datetime(2026, 11, 1, 6, tzinfo=timezone.utc)

    assert history.day_span(three) == (datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp(),
                                       datetime(2026, 11, 5, tzinfo=timezone.utc).timestamp())
    assert history.day_span(three, since)[0] == since.timestamp()
    assert history.day_span(two) is None  # a short history: its rows are read for its first and last moment


def test_expire_deletes_the_days_past_the_retention_of_every_cluster(spark, tmp_path):
    for folder in ("cluster=a/day=2026-08-01", "cluster=a/day=2026-08-28", "cluster=a/day=2026-08-29",
                   "cluster=b/day=2026-07-01", "cluster=b/day=not-a-date", "elsewhere/day=2020-01-01"):
        (tmp_path / folder).mkdir(parents=True)

    deleted = history.expire(spark, str(tmp_path), timedelta(days=90), date(2026, 11, 27))

    assert sorted(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1] for path in deleted) == [
        "cluster=a/day=2026-08-01", "cluster=a/day=2026-08-28", "cluster=b/day=2026-07-01"]
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/day=*")) == [
        "cluster=a/day=2026-08-29", "cluster=b/day=not-a-date", "elsewhere/day=2020-01-01"]


@pytest.mark.parametrize("retention, oldest_kept", [
    (timedelta(days=90), "2026-08-29"),  # 90 days before the day of the clock below
    (timedelta(days=1), "2026-11-26"),
    (timedelta(hours=36), "2026-11-25"),  # a part of a day keeps the whole day
])
def test_expired_days_are_those_before_the_retention(retention, oldest_kept):
    days = ["2026-08-28", "2026-08-29", "2026-11-24", "2026-11-25", "2026-11-26", "2026-11-27", "latest"]

    expired = history.expired_days(days, retention, date(2026, 11, 27))

    assert expired == [day for day in days[:-1] if day < oldest_kept]
