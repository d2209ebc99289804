"""How far every move is, when it ends, and what throttle keeps it going (KIP-73 Q&A, KAFKA-1546).

One row per adding replica (``schemas.MOVING_REPLICA_SCHEMA``), built by ``quota_sidecar.moves`` from the
readings of past passes. Out come three things: each replica's rates, ETA, state and stuck reason; per
destination broker its SumReplicaLag and the ETA of its slowest replica; and per broker and role the
keep_up floor, (1 + margin) x the incoming rates of the moving partitions it receives (follower) or leads
(leader), which ``replication_rates`` compares with the rule's rate. Spark SQL text, as in the other jobs.
"""
from pyspark.sql import DataFrame, SparkSession

from quota_sidecar.moves import CANNOT_KEEP_UP, CAUGHT_UP, MOVING, NO_PROGRESS, STUCK
from quota_sidecar.observation import FOLLOWER, LEADER
from spark_jobs.schemas import MOVING_REPLICA_SCHEMA, frame_from_rows

# Growth from the oldest reading in the network window to now; a replica that shrank (retention) grew 0.
_CATCH_UP = "CASE WHEN replica_growth_seconds > 0 THEN greatest(replica_growth_bytes, 0) / replica_growth_seconds END"
_INCOMING = "CASE WHEN leader_growth_seconds > 0 THEN greatest(leader_growth_bytes, 0) / leader_growth_seconds END"

# Caught up: 0. Catching up faster than the leader grows: the gap over the difference. Else it never ends.
_ETA = """CASE
    WHEN bytes_behind = 0 THEN 0.0
    WHEN bytes_behind IS NOT NULL AND catch_up_bytes_per_sec > incoming_bytes_per_sec
        THEN bytes_behind / (catch_up_bytes_per_sec - incoming_bytes_per_sec)
END"""

_STUCK_REASON = f"""CASE
    WHEN bytes_behind = 0 THEN NULL
    WHEN incoming_bytes_per_sec > 0 AND catch_up_bytes_per_sec <= incoming_bytes_per_sec THEN '{CANNOT_KEEP_UP}'
    WHEN lag_seconds >= stuck_after_seconds AND bytes_behind >= behind_then THEN '{NO_PROGRESS}'
END"""

_STATE = f"""CASE
    WHEN bytes_behind = 0 THEN '{CAUGHT_UP}'
    WHEN stuck_reason IS NOT NULL THEN '{STUCK}'
    ELSE '{MOVING}'
END"""

MOVE_COLUMNS = ("topic", "partition", "broker", "leader", "bytes_behind", "lag_seconds", "catch_up_bytes_per_sec",
                "incoming_bytes_per_sec", "eta_seconds", "state", "stuck_reason")


def transform(replicas_df: DataFrame) -> DataFrame:
    """Every adding replica with its rates (bytes/s), ``eta_seconds``, ``state`` and ``stuck_reason``."""
    return (
        replicas_df.selectExpr("*", f"{_CATCH_UP} AS catch_up_bytes_per_sec", f"{_INCOMING} AS incoming_bytes_per_sec")
        .selectExpr("*", f"{_ETA} AS eta_seconds", f"{_STUCK_REASON} AS stuck_reason")
        .selectExpr("*", f"{_STATE} AS state")
    )


def destinations(moves_df: DataFrame) -> DataFrame:
    """Per destination broker: its replicas, SumReplicaLag and the ETA of the slowest (null: one never ends).

    Window aggregates in SQL text rather than groupBy().agg(Column): Spark Connect has no classic Columns."""
    each = "OVER (PARTITION BY broker)"
    return moves_df.selectExpr(
        "broker",
        f"count(1) {each} AS replicas",
        f"sum(bytes_behind) {each} AS sum_replica_lag_bytes",
        f"CASE WHEN count(eta_seconds) {each} = count(1) {each} THEN max(eta_seconds) {each} END AS eta_seconds",
        f"count(CASE WHEN state = '{STUCK}' THEN 1 END) {each} AS stuck",
    ).distinct()


def keep_up_floors(moves_df: DataFrame) -> DataFrame:
    """Per broker and role, (1 + margin/100) x the incoming rates of the moving partitions through it;
    null where no incoming rate is known yet."""
    received = moves_df.selectExpr("broker AS broker_id", f"'{FOLLOWER}' AS role", "incoming_bytes_per_sec",
                                   "keep_up_margin_percent")
    led = moves_df.selectExpr("leader AS broker_id", f"'{LEADER}' AS role", "incoming_bytes_per_sec",
                              "keep_up_margin_percent")
    each = "OVER (PARTITION BY broker_id, role)"
    return received.unionByName(led).selectExpr(
        "broker_id", "role",
        f"sum(incoming_bytes_per_sec) {each} * (1 + max(keep_up_margin_percent) {each} / 100) "
        "AS keep_up_floor_bytes_per_sec",
    ).distinct()


def decide(spark: SparkSession, rows: list[dict], params: dict | None = None) -> dict[str, list[dict]]:
    """{"moves": sorted by topic, partition, broker; "destinations": by broker; "floors": by broker, role}.

    ``params`` holds settings shared by every row (stuck_after_seconds, keep_up_margin_percent). One job.
    """
    rows = [{**(params or {}), **row} for row in rows]
    moves = transform(frame_from_rows(spark, rows, MOVING_REPLICA_SCHEMA))
    result = (
        moves.selectExpr(f"sort_array(collect_list(struct({', '.join(MOVE_COLUMNS)}))) AS moves")
        .crossJoin(destinations(moves).selectExpr("sort_array(collect_list(struct(*))) AS destinations"))
        .crossJoin(keep_up_floors(moves).selectExpr("sort_array(collect_list(struct(*))) AS floors"))
        .first()
    )
    return {name: [row.asDict() for row in result[name]] for name in ("moves", "destinations", "floors")}
