"""The arithmetic of `quota-sidecar plan`: KIP-73's bounds and MoveTime for a reassignment, per broker.

One row per moving partition and broker role (``schemas.PLAN_SCHEMA``): a destination receives the
leader's bytes (role follower), the leader sends them to each destination (role leader). Per broker and
role, the bytes to move and the incoming rate IN of those partitions (the keep-up traffic); per broker,
KIP-73's bounds ``IN < T < N - IN/R`` (IN the larger of its two roles', N its capacity, R the smallest
replication factor of its partitions), MoveTime = bytes / (T - IN) (the slower role; null when T <= IN:
the move never ends) and, for ``within_seconds``, the smallest T that ends in time, IN + bytes / within.
Window aggregates in SQL text, so the job runs over Spark Connect too.
"""
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.schemas import PLAN_SCHEMA, frame_from_rows

_ROLE = "OVER (PARTITION BY broker_id, role)"
_BROKER = "OVER (PARTITION BY broker_id)"

BROKER_COLUMNS = ("broker_id", "receive_bytes", "send_bytes", "in_bytes_per_sec", "capacity_bytes",
                  "replication_factor", "lower_bound", "upper_bound", "throttle", "move_seconds", "needed_throttle")


def by_role(rows_df: DataFrame) -> DataFrame:
    return rows_df.selectExpr(
        "broker_id", "role",
        f"sum(bytes) {_ROLE} AS bytes",
        f"coalesce(sum(incoming_bytes_per_sec) {_ROLE}, 0D) AS incoming",
        f"max(capacity_bytes) {_ROLE} AS capacity_bytes",
        f"min(replication_factor) {_ROLE} AS replication_factor",
        f"min(throttle) {_ROLE} AS throttle",
        f"max(within_seconds) {_ROLE} AS within_seconds",
    ).distinct().selectExpr(
        "*",
        # MoveTime of this role: null when the throttle cannot beat the keep-up traffic, or is unknown
        "CASE WHEN throttle > incoming THEN bytes / (throttle - incoming) END AS role_seconds",
        "CASE WHEN throttle IS NULL OR throttle > incoming THEN 0 ELSE 1 END AS never",
        "incoming + bytes / within_seconds AS role_needed",
    )


def transform(rows_df: DataFrame) -> DataFrame:
    """One row per broker with the columns of ``BROKER_COLUMNS``."""
    return by_role(rows_df).selectExpr(
        "broker_id",
        f"coalesce(sum(CASE WHEN role = 'follower' THEN bytes END) {_BROKER}, 0L) AS receive_bytes",
        f"coalesce(sum(CASE WHEN role = 'leader' THEN bytes END) {_BROKER}, 0L) AS send_bytes",
        f"max(incoming) {_BROKER} AS in_bytes_per_sec",
        f"max(capacity_bytes) {_BROKER} AS capacity_bytes",
        f"min(replication_factor) {_BROKER} AS replication_factor",
        f"min(throttle) {_BROKER} AS throttle",
        f"CASE WHEN max(never) {_BROKER} = 0 THEN max(role_seconds) {_BROKER} END AS move_seconds",
        f"max(role_needed) {_BROKER} AS needed_throttle",
    ).distinct().selectExpr(
        "broker_id", "receive_bytes", "send_bytes", "in_bytes_per_sec", "capacity_bytes", "replication_factor",
        "in_bytes_per_sec AS lower_bound",
        "capacity_bytes - in_bytes_per_sec / replication_factor AS upper_bound",
        "throttle", "move_seconds", "needed_throttle",
    )


def decide(spark: SparkSession, rows: list[dict], params: dict | None = None) -> list[dict]:
    """The brokers of the plan, by broker id; one job."""
    rows = [{**(params or {}), **row} for row in rows]
    df = transform(frame_from_rows(spark, rows, PLAN_SCHEMA))
    result = df.selectExpr(f"sort_array(collect_list(struct({', '.join(BROKER_COLUMNS)}))) AS brokers").first()
    return [row.asDict() for row in result["brokers"]]
