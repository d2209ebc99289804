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

from pyspark.sql import Column, DataFrame, SparkSession

from spark_jobs import columns, session

# What a reader needs of every row, whoever wrote it, and its type; ``day`` and the partition folders are optional
# for it.
_TYPES = {"cluster": "string", "broker": "int", "log_dir": "string", "observed_at": "timestamp",
         "total_bytes": "bigint", "available_bytes": "bigint"}
COLUMNS = tuple(_TYPES)
# The S3A connector's jars as pom-s3a.xml resolves them (`make s3a`).
S3A_CLASSPATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "s3a.classpath")
_DAY_FOLDER = re.compile(r"/day=(\d{4}-\d{2}-\d{2})/")
_MICROS_A_DAY = 86_400_000_000


class HistoryError(ValueError):
    """A history that cannot be read as one: absent, empty, or without a needed column (one line)."""


def filesystem_jars(location: str, configured: tuple[str, ...] = ()) -> list[str]:
    """The jars Spark needs to open the history at ``location`` beyond its own: ``configured`` (history.jars), else
    for s3a:// those of build/s3a.classpath when `make s3a` resolved them (an image may have them on Spark's
    classpath instead: then none, and without them Spark says in one line that S3AFileSystem is not found)."""
    if configured:
        return list(configured)
    if not location.startswith("s3a://"):
        return []
    try:
        with open(S3A_CLASSPATH, encoding="utf-8") as file:
            return [jar for jar in file.read().strip().split(":") if jar]
    except OSError:
        return []


def transform(parsed_observations: DataFrame) -> DataFrame:
    """Parsed observations (``aggregation.readable``: one row per observation, ``schemas.OBSERVATION_SCHEMA``) →
    history rows (COLUMNS and ``day``).

    Every agent of a cluster observes every broker's volumes, so a volume is recorded by its own broker's agent
    only (by every agent when the agent is unnamed): once per pass, not once per agent. Of the rows an observation
    carries for a volume (its fill window), only the newest is new; the older ones were recorded before."""
    F = columns.functions(parsed_observations)
    v, agent = F.col("v"), F.col("agent")
    rows = (parsed_observations.where(F.col("volumes").isNotNull())
            .select("id", "cluster", "agent", F.col("observed_at").cast("timestamp").alias("observed"),
                    F.explode("volumes.rows").alias("v"))
            .where(v["usable"] & (agent.isNull() | (v["broker_id"] == agent))))
    volume = columns.window(rows).partitionBy(F.col("id"), v["broker_id"], v["log_dir"])
    newest = rows.select("id", "cluster", "observed", v["broker_id"].alias("broker"), v["log_dir"].alias("log_dir"),
                         v["total_bytes"].alias("total_bytes"), v["available_bytes"].alias("available_bytes"),
                         v["at_seconds"].alias("at_seconds"), F.max(v["at_seconds"]).over(volume).alias("newest_at"))
    observed_at = F.timestamp_micros(F.unix_micros("observed") + F.round(F.col("at_seconds") * 1_000_000).cast("bigint"))
    return (newest.where(F.col("at_seconds") == F.col("newest_at"))
            .select("cluster", "broker", "log_dir", observed_at.alias("observed_at"), "total_bytes", "available_bytes")
            .select("*", _utc_day(F).alias("day")))


def _utc_day(F) -> Column:
    """The UTC date of ``observed_at``, from epoch microseconds: no session time zone shifts it."""
    return F.date_from_unix_date(F.floor(F.unix_micros("observed_at") / float(_MICROS_A_DAY)).cast("int"))


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
    except Exception as error:  # Spark's AnalysisException (no files, not Parquet) or its filesystem's error
        raise HistoryError(f"{path}: cannot be read as Parquet: {session.reason(error)}") from error
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise HistoryError(f"{path}: the history has no column {', '.join(missing)} (it needs {', '.join(COLUMNS)})")
    F = columns.functions(frame)
    if since is not None and "day" in frame.columns:  # the partitions before `since` are not even listed
        frame = frame.where(F.col("day").cast("string") >= since.date().isoformat())
    typed = frame.select(*(F.col(name).cast(kind).alias(name) for name, kind in _TYPES.items()))
    if since is not None:
        typed = typed.where(F.unix_micros("observed_at") >= int(since.timestamp() * 1_000_000))
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
