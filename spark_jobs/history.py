"""The history of volume observations: Parquet, partitioned by cluster and day, that `quota-sidecar report`
forecasts from.

The aggregator appends each volume's newest measurement of every observation (``transform``, ``append``) and
deletes the days older than ``history.retention`` (``expire``). ``read`` takes any Parquet with the columns of
``COLUMNS``, partitioned or not, written by the aggregator or by another tool. Times are UTC: ``day`` is the
UTC date of ``observed_at``, computed from epoch microseconds so that no session time zone shifts it.
"""
from __future__ import annotations

import os
import re
from datetime import date, datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession

# What a reader needs of every row, whoever wrote it; ``day`` and the partition folders are optional for it.
COLUMNS = ("cluster", "broker", "log_dir", "observed_at", "total_bytes", "available_bytes")
_TYPED = ("CAST(cluster AS STRING) AS cluster", "CAST(broker AS INT) AS broker", "CAST(log_dir AS STRING) AS log_dir",
          "CAST(observed_at AS TIMESTAMP) AS observed_at", "CAST(total_bytes AS BIGINT) AS total_bytes",
          "CAST(available_bytes AS BIGINT) AS available_bytes")
_DAY_FOLDER = re.compile(r"/day=(\d{4}-\d{2}-\d{2})/")
_UTC_DAY = "date_from_unix_date(CAST(floor(unix_micros(observed_at) / 86400000000D) AS INT))"


class HistoryError(ValueError):
    """A history that cannot be read as one: absent, empty, or without a needed column (one line)."""


def transform(parsed_observations: DataFrame) -> DataFrame:
    """Parsed observations (``aggregation.readable``: one row per observation, ``schemas.OBSERVATION_SCHEMA``) →
    history rows (COLUMNS and ``day``).

    Every agent of a cluster observes every broker's volumes, so a volume is recorded by its own broker's agent
    only (by every agent when the agent is unnamed): once per pass, not once per agent. Of the rows an observation
    carries for a volume (its fill window), only the newest is new; the older ones were recorded before."""
    rows = parsed_observations.where("volumes IS NOT NULL").selectExpr(
        "id", "cluster", "agent", "CAST(observed_at AS TIMESTAMP) AS observed", "explode(volumes.rows) AS v"
    ).where("v.usable AND (agent IS NULL OR v.broker_id = agent)")
    newest = rows.selectExpr(
        "id", "cluster", "observed", "v.broker_id AS broker", "v.log_dir AS log_dir", "v.total_bytes AS total_bytes",
        "v.available_bytes AS available_bytes", "v.at_seconds AS at_seconds",
        "max(v.at_seconds) OVER (PARTITION BY id, v.broker_id, v.log_dir) AS newest_at")
    return newest.where("at_seconds = newest_at").selectExpr(
        "cluster", "broker", "log_dir",
        "timestamp_micros(unix_micros(observed) + CAST(round(at_seconds * 1000000) AS BIGINT)) AS observed_at",
        "total_bytes", "available_bytes").selectExpr("*", f"{_UTC_DAY} AS day")


def append(history_rows: DataFrame, path: str) -> None:
    """Append the rows to the history at ``path``, one folder per cluster and day (cluster=…/day=…)."""
    history_rows.write.mode("append").partitionBy("cluster", "day").parquet(path)


def read(spark: SparkSession, path: str, since: datetime | None = None) -> DataFrame:
    """The history at ``path`` (COLUMNS, typed; ``observed_at`` a timestamp), the rows at or after ``since``.
    Raises HistoryError naming what is wrong: no such path, no Parquet there, the missing columns."""
    if "://" not in path and not os.path.exists(path):
        raise HistoryError(f"{path}: no such file or directory")
    # Partition folders are read as written: cluster=007 stays the string "007", day=… a date string.
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        frame = spark.read.parquet(path)
    except Exception as error:  # Spark's AnalysisException, whose first line says why (no files, not Parquet)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise HistoryError(f"{path}: cannot be read as Parquet: {first}") from error
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise HistoryError(f"{path}: the history has no column {', '.join(missing)} (it needs {', '.join(COLUMNS)})")
    if since is not None and "day" in frame.columns:  # the partitions before `since` are not even listed
        frame = frame.where(f"CAST(day AS STRING) >= '{since.date().isoformat()}'")
    typed = frame.selectExpr(*_TYPED)
    if since is not None:
        typed = typed.where(f"unix_micros(observed_at) >= {int(since.timestamp() * 1_000_000)}")
    return typed


def day_span(frame: DataFrame, since: datetime | None = None) -> tuple[float, float] | None:
    """The history's first and last moment (epoch seconds) from its day folders, a listing that reads no rows:
    from the first day's start (or ``since``) to the last day's end. None without day folders, or with fewer than
    three days (then reading the few rows for their first and last moment costs little)."""
    days = sorted({found.group(1) for file in frame.inputFiles() if (found := _DAY_FOLDER.search(file))})
    if len(days) < 3:
        return None
    first = datetime.fromisoformat(days[0]).replace(tzinfo=timezone.utc).timestamp()
    last = datetime.fromisoformat(days[-1]).replace(tzinfo=timezone.utc).timestamp() + 86400
    return max(first, since.timestamp()) if since is not None else first, last


def expired_days(days: list[str], retention: timedelta, today: date) -> list[str]:
    """The day folders' dates (yyyy-mm-dd) wholly older than ``retention`` before ``today``: those to delete.
    A name that is not a date is kept (not ours)."""
    oldest_kept = today - timedelta(days=retention.days + (1 if retention % timedelta(days=1) else 0))
    old = []
    for day in days:
        try:
            if date.fromisoformat(day) < oldest_kept:
                old.append(day)
        except ValueError:
            continue
    return old


def expire(spark: SparkSession, path: str, retention: timedelta, today: date) -> list[str]:
    """Delete the cluster=…/day=… folders of the history older than ``retention``, through Hadoop's FileSystem
    (the history may be on HDFS or S3). Returns the folders deleted. Needs a driver in this process."""
    jvm = spark.sparkContext._jvm
    root = jvm.org.apache.hadoop.fs.Path(path)
    filesystem = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not filesystem.exists(root):
        return []
    deleted = []
    for cluster in filesystem.listStatus(root):
        if not (cluster.isDirectory() and cluster.getPath().getName().startswith("cluster=")):
            continue
        folders = {status.getPath().getName()[len("day="):]: status.getPath()
                   for status in filesystem.listStatus(cluster.getPath())
                   if status.isDirectory() and status.getPath().getName().startswith("day=")}
        for day in expired_days(sorted(folders), retention, today):
            filesystem.delete(folders[day], True)
            deleted.append(folders[day].toString())
    return deleted
