"""The arithmetic of `quota-sidecar plan`: KIP-73's bounds and MoveTime for a reassignment, per broker.

One row per moving partition and broker role (``schemas.PLAN_SCHEMA``): a destination receives the
leader's bytes (role follower), the leader sends them to each destination (role leader). Per broker and
role, the bytes to move and the incoming rate IN of those partitions (the keep-up traffic); per broker,
KIP-73's bounds ``IN < T < N - IN/R`` (IN the larger of its two roles', N its capacity, R the smallest
replication factor of its partitions), MoveTime = bytes / (T - IN) (the slower role; null when T <= IN:
the move never ends) and, for ``within_seconds``, the smallest T that ends in time, IN + bytes / within.
"""
from pyspark.sql import DataFrame, SparkSession

from quota_sidecar.common.observation import FOLLOWER, LEADER
from spark_jobs import columns
from spark_jobs.schemas import PLAN_SCHEMA, frame_from_rows

BROKER_COLUMNS = ("broker_id", "receive_bytes", "send_bytes", "in_bytes_per_sec", "capacity_bytes",
                  "replication_factor", "lower_bound", "upper_bound", "throttle", "move_seconds", "needed_throttle")


def by_role(rows_df: DataFrame) -> DataFrame:
    F = columns.functions(rows_df)
    bytes_, incoming, throttle = F.col("bytes"), F.col("incoming"), F.col("throttle")
    return rows_df.groupBy("broker_id", "role").agg(
        F.sum("bytes").alias("bytes"),
        F.coalesce(F.sum("incoming_bytes_per_sec"), F.lit(0.0)).alias("incoming"),
        F.max("capacity_bytes").alias("capacity_bytes"),
        F.min("replication_factor").alias("replication_factor"),
        F.min("throttle").alias("throttle"),
        F.max("within_seconds").alias("within_seconds"),
    ).select(
        "*",
        # MoveTime of this role: null when the throttle cannot beat the keep-up traffic, or is unknown
        F.when(throttle > incoming, bytes_ / (throttle - incoming)).alias("role_seconds"),
        F.when(throttle.isNull() | (throttle > incoming), 0).otherwise(1).alias("never"),
        (incoming + bytes_ / F.col("within_seconds")).alias("role_needed"),
    )


def transform(rows_df: DataFrame) -> DataFrame:
    """One row per broker with the columns of ``BROKER_COLUMNS``."""
    F = columns.functions(rows_df)
    role, bytes_ = F.col("role"), F.col("bytes")
    return by_role(rows_df).groupBy("broker_id").agg(
        F.coalesce(F.sum(F.when(role == FOLLOWER, bytes_)), F.lit(0).cast("bigint")).alias("receive_bytes"),
        F.coalesce(F.sum(F.when(role == LEADER, bytes_)), F.lit(0).cast("bigint")).alias("send_bytes"),
        F.max("incoming").alias("in_bytes_per_sec"),
        F.max("capacity_bytes").alias("capacity_bytes"),
        F.min("replication_factor").alias("replication_factor"),
        F.min("throttle").alias("throttle"),
        F.when(F.max("never") == 0, F.max("role_seconds")).alias("move_seconds"),
        F.max("role_needed").alias("needed_throttle"),
    ).select(
        "broker_id", "receive_bytes", "send_bytes", "in_bytes_per_sec", "capacity_bytes", "replication_factor",
        F.col("in_bytes_per_sec").alias("lower_bound"),
        (F.col("capacity_bytes") - F.col("in_bytes_per_sec") / F.col("replication_factor")).alias("upper_bound"),
        "throttle", "move_seconds", "needed_throttle",
    )


def decide(spark: SparkSession, rows: list[dict], params: dict | None = None) -> list[dict]:
    """The brokers of the plan, by broker id; one job."""
    rows = [{**(params or {}), **row} for row in rows]
    df = transform(frame_from_rows(spark, rows, PLAN_SCHEMA))
    F = columns.functions(df)
    result = df.select(F.sort_array(F.collect_list(F.struct(*BROKER_COLUMNS))).alias("brokers")).first()
    return [row.asDict() for row in result["brokers"]]
