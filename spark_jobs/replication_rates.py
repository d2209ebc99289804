"""The replication throttle rate of every broker role: what the network leaves to replication, and at least
what keeps the moves through it going; with the moves' progress, in one Spark job per pass.

Every input of the rule is a column of ``schemas.BROKER_ROLE_SCHEMA``. The reason is decided first and
the rate follows from it. What comes before the rule (the disk guard, the operators' overrides) is
``quota_sidecar.decide.throttles.with_overrides``; the reasons are spelled in
``quota_sidecar.common.vocabulary``. The keep_up floor and the moves' progress are ``move_progress``'s,
computed in the same job (``decide``).
"""
from pyspark.sql import DataFrame, SparkSession

from quota_sidecar.common.vocabulary import COMPUTED, FAIL_SAFE, KEEP_UP, KEPT, UNCHANGED
from spark_jobs import columns, move_progress
from spark_jobs.schemas import BROKER_ROLE_SCHEMA, REPLICATION_PASS_SCHEMA, frame_from_rows

RATE_COLUMNS = (*BROKER_ROLE_SCHEMA.fieldNames(), "rate", "reason", "keep_up_capped")


def transform(brokers_df: DataFrame) -> DataFrame:
    """Every broker role with its ``rate`` (bytes/s), the ``reason`` for it, and ``keep_up_capped`` when even
    the cap is below the keep_up floor, after the rule's steps (computed_rate, rule_reason, rule_rate,
    keep_up_rate)."""
    F = columns.functions(brokers_df)
    capacity, used, applied = F.col("capacity_bytes"), F.col("used_bytes_per_sec"), F.col("applied_rate")
    max_percent, min_rate, floor = F.col("max_percent"), F.col("min_rate"), F.col("keep_up_floor_bytes_per_sec")
    # P': the replication traffic in the used figure; measured when we have it, else the rate in force.
    replication = F.coalesce(F.col("measured_replication_bytes_per_sec"), applied, F.lit(0))
    # What is left of the capacity after the traffic that is not replication, and after any overshoot beyond
    # the capacity; max_percent of that, never below min_rate.
    computed = F.greatest(F.floor((capacity - F.greatest(used - replication, F.lit(0))
                                   - F.greatest(used - capacity, F.lit(0))) * max_percent / 100), min_rate)
    # Multiplied out rather than divided by applied_rate: no division by zero, same comparison for P > 0.
    small_change = F.abs(F.col("computed_rate") - applied) * 100 < F.col("change_threshold_percent") * applied
    no_figure = used.isNull()
    reason = (F.when(no_figure & (F.col("consecutive_failures") > F.col("failure_threshold")), F.lit(FAIL_SAFE))
              .when(no_figure & applied.isNull(), F.lit(FAIL_SAFE))
              .when(no_figure, F.lit(KEPT))
              .when((applied > 0) & small_change, F.lit(UNCHANGED))
              .otherwise(F.lit(COMPUTED)))
    rule_reason = F.col("rule_reason")
    rule_rate = (F.when(rule_reason == FAIL_SAFE, min_rate).when(rule_reason.isin(KEPT, UNCHANGED), applied)
                 .otherwise(F.col("computed_rate")).cast("bigint"))
    # KIP-73's lower bound: the moves through the broker must get more than they take in, or they never end;
    # never above what the rule may give at most (the cap), which the status then reports. (least() skips
    # nulls: no floor known must stay null, not become the cap.)
    cap = F.floor(capacity * max_percent / 100)
    keep_up_rate = F.when(floor.isNotNull(), F.least(F.ceil(floor), cap)).cast("bigint")
    raised = F.col("keep_up_rate") > F.col("rule_rate")
    return (brokers_df.select("*", computed.alias("computed_rate"))
            .select("*", reason.alias("rule_reason"))
            .select("*", rule_rate.alias("rule_rate"), keep_up_rate.alias("keep_up_rate"))
            .select("*", F.when(raised, F.col("keep_up_rate")).otherwise(F.col("rule_rate")).alias("rate"),
                    F.when(raised, F.lit(KEEP_UP)).otherwise(rule_reason).alias("reason"),
                    F.coalesce(floor > cap, F.lit(False)).alias("keep_up_capped")))


def decide(spark: SparkSession, rows: list[dict], params: dict | None = None) -> dict[str, list[dict]]:
    """{"rates": the rows (``schemas.REPLICATION_PASS_SCHEMA``) with ``rate``, ``reason`` and their keep_up
    floor, by broker and role; "moves": every adding replica's progress (``move_progress.MOVE_COLUMNS``), by
    topic, partition and broker; "destinations": by broker}. No row, no moves: the moves come with the rates
    of the brokers they go through.

    ``params`` holds settings shared by every row (e.g. ``max_percent``); a row's own value wins.
    """
    rows = [{**(params or {}), **row} for row in rows]
    df = transform(move_progress.transform(frame_from_rows(spark, rows, REPLICATION_PASS_SCHEMA)))
    result = df.select(*decision(df)).first()  # one job brings everything back
    return {name: [row.asDict() for row in result[name] or ()] for name in ("rates", "moves", "destinations")}


def decision(df: DataFrame) -> list:
    """One decision's parts, as aggregates: over every row of a pass, or per observation in the aggregator. A
    struct array sorts by its first fields, broker_id then role; the moves and destinations are the same on every
    row of a pass. (A row without a role, which the aggregator adds for each observation, is left out.)"""
    F = columns.functions(df)
    rates = F.when(F.col("role").isNotNull(), F.struct(*RATE_COLUMNS))
    return [F.sort_array(F.collect_list(rates)).alias("rates"),
            F.coalesce(F.any_value("moves", True), F.array()).alias("moves"),
            F.coalesce(F.any_value("destinations", True), F.array()).alias("destinations")]
