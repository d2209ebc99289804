"""The replication throttle rate of every broker role: what the network leaves to replication, and at least
what keeps the moves through it going; with the moves' progress, in one Spark job per pass.

Every input of the rule is a column of ``schemas.BROKER_ROLE_SCHEMA``. The reason is decided first and
the rate follows from it. Spark SQL text, so that one transform serves classic and
Connect DataFrames. What comes before the rule (the disk guard, the operators' overrides) is
``quota_sidecar.decide.throttles.with_overrides``; the reasons are spelled in
``quota_sidecar.common.vocabulary``. The keep_up floor and the moves' progress are ``move_progress``'s,
computed in the same job (``decide``).
"""
from pyspark.sql import DataFrame, SparkSession

from quota_sidecar.common.vocabulary import COMPUTED, FAIL_SAFE, KEEP_UP, KEPT, UNCHANGED
from spark_jobs import move_progress
from spark_jobs.schemas import BROKER_ROLE_SCHEMA, REPLICATION_PASS_SCHEMA, frame_from_rows

# P': the replication traffic in the used figure; measured when we have it, else the rate in force.
_REPLICATION = "coalesce(measured_replication_bytes_per_sec, applied_rate, 0)"

# What is left of the capacity after the traffic that is not replication, and after any overshoot
# beyond the capacity; max_percent of that, never below min_rate.
_COMPUTED_RATE = f"""greatest(
    floor(
        (capacity_bytes
         - greatest(used_bytes_per_sec - {_REPLICATION}, 0)
         - greatest(used_bytes_per_sec - capacity_bytes, 0))
        * max_percent / 100),
    min_rate)"""

# Multiplied out rather than divided by applied_rate: no division by zero, same comparison for P > 0.
_SMALL_CHANGE = "abs(computed_rate - applied_rate) * 100 < change_threshold_percent * applied_rate"

_REASON = f"""CASE
    WHEN used_bytes_per_sec IS NULL AND consecutive_failures > failure_threshold THEN '{FAIL_SAFE}'
    WHEN used_bytes_per_sec IS NULL AND applied_rate IS NULL THEN '{FAIL_SAFE}'
    WHEN used_bytes_per_sec IS NULL THEN '{KEPT}'
    WHEN applied_rate > 0 AND {_SMALL_CHANGE} THEN '{UNCHANGED}'
    ELSE '{COMPUTED}'
END"""

_RATE = f"""CAST(CASE rule_reason
    WHEN '{FAIL_SAFE}' THEN min_rate
    WHEN '{KEPT}' THEN applied_rate
    WHEN '{UNCHANGED}' THEN applied_rate
    ELSE computed_rate
END AS BIGINT)"""


# KIP-73's lower bound: the moves through the broker must get more than they take in, or they never end;
# never above what the rule may give at most (the upper bound), which the status then reports.
_CAP = "floor(capacity_bytes * max_percent / 100)"
# (least() skips nulls: no floor known must stay null, not become the cap)
_KEEP_UP_RATE = f"CAST(CASE WHEN keep_up_floor_bytes_per_sec IS NOT NULL THEN least(ceil(keep_up_floor_bytes_per_sec), {_CAP}) END AS BIGINT)"

RATE_COLUMNS = (*BROKER_ROLE_SCHEMA.fieldNames(), "rate", "reason", "keep_up_capped")


def transform(brokers_df: DataFrame) -> DataFrame:
    """Every broker role with its ``rate`` (bytes/s), the ``reason`` for it, and ``keep_up_capped`` when even
    the cap is below the keep_up floor, after the rule's steps (computed_rate, rule_reason, rule_rate,
    keep_up_rate). One projection: each column uses those before it, and the driver analyses one plan."""
    return brokers_df.selectExpr(
        "*",
        f"{_COMPUTED_RATE} AS computed_rate",
        f"{_REASON} AS rule_reason",
        f"{_RATE} AS rule_rate",
        f"{_KEEP_UP_RATE} AS keep_up_rate",
        "CASE WHEN keep_up_rate > rule_rate THEN keep_up_rate ELSE rule_rate END AS rate",
        f"CASE WHEN keep_up_rate > rule_rate THEN '{KEEP_UP}' ELSE rule_reason END AS reason",
        f"coalesce(keep_up_floor_bytes_per_sec > {_CAP}, false) AS keep_up_capped",
    )


def decide(spark: SparkSession, rows: list[dict], params: dict | None = None) -> dict[str, list[dict]]:
    """{"rates": the rows (``schemas.REPLICATION_PASS_SCHEMA``) with ``rate``, ``reason`` and their keep_up
    floor, by broker and role; "moves": every adding replica's progress (``move_progress.MOVE_COLUMNS``), by
    topic, partition and broker; "destinations": by broker}. No row, no moves: the moves come with the rates
    of the brokers they go through.

    ``params`` holds settings shared by every row (e.g. ``max_percent``); a row's own value wins.
    """
    rows = [{**(params or {}), **row} for row in rows]
    df = transform(move_progress.transform(frame_from_rows(spark, rows, REPLICATION_PASS_SCHEMA)))
    # One job brings everything back.
    result = df.selectExpr(*DECISION).first()
    return {name: [row.asDict() for row in result[name] or ()] for name in ("rates", "moves", "destinations")}


# One decision's parts: over every row of a pass, or per observation in the aggregator. A struct array sorts
# by its first fields, broker_id then role; the moves and destinations are the same on every row of a pass.
# (A row without a role, which the aggregator adds for each observation, is left out.)
DECISION = (f"sort_array(collect_list(CASE WHEN role IS NOT NULL THEN struct({', '.join(RATE_COLUMNS)}) END)) AS rates",
            "coalesce(any_value(moves, true), array()) AS moves",
            "coalesce(any_value(destinations, true), array()) AS destinations")
