"""Each usable volume's fill rate, time to the limit and verdict, and the throttle factor that follows.

The rows are measurements (``schemas.VOLUME_SCHEMA``): one per volume and moment, the current poll's and
the earlier ones within the fill window. A volume's newest row is its state now; all its rows give its
fill rate. A volume violates when it is at or below the hard limit now, or, with a lead time, when at its
fill rate it gets there within the lead time (a predicted violation). The factor is 0.0 when any volume
violates, else the smallest soft factor: 1.0 at or above the soft limit (or without one), falling
linearly to 0.0 at the hard limit.

The rule itself (the verdict, the time to the limit, the factors) is quota_sidecar.common.storage_rule's, whose
terms the agent's local verdict evaluates in Python and this job renders as Spark columns; the fill rate is this job's own.
The limits are columns of the rows, and the rows are grouped by the observation they came with: one job
judges one poll (``decide``), or the questions of many agents of many clusters at once (the aggregator,
``aggregation``). The columns are built with the functions of the DataFrame's kind (spark_jobs.columns), so that
the same job runs on a driver in this process and on Spark Connect.
"""
import argparse
import json
import sys
from types import ModuleType

from pyspark.sql import Column, DataFrame, SparkSession

from quota_sidecar.common import storage_rule
from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import columns
from spark_jobs.schemas import VOLUME_SCHEMA, frame_from_rows
from spark_jobs.session import get_session, stop_sessions

_COLUMNS = ("broker_id", "log_dir", "total_bytes", "available_bytes", "available_ratio", "fill_bytes_per_sec",
            "seconds_to_limit", "violated", "predicted", "throttle_factor", "descending")
LIMIT_COLUMNS = tuple(storage_rule.LIMIT_TYPES)


def factor(F: ModuleType) -> Column:
    """The throttle factor of a group of judged rows. The minimum over no rows is null: no volume, nothing to
    protect, no throttle."""
    return F.coalesce(F.min("throttle_factor"), F.lit(1.0))


def judged_rows(F: ModuleType) -> Column:
    """One struct per volume of a group of judged rows; an array of them sorts by its first fields, broker_id then
    log_dir. (A row without a volume, which the aggregator adds for each observation, is left out: collect_list
    skips nulls.)"""
    return F.sort_array(F.collect_list(F.when(F.col("log_dir").isNotNull(), F.struct(*_COLUMNS))))


def transform(volumes_df: DataFrame, params: dict) -> DataFrame:
    """Every usable volume, as its newest row, with ``available_ratio``, ``fill_bytes_per_sec``,
    ``seconds_to_limit``, ``violated``, ``predicted`` and its ``throttle_factor``, all under the limits of
    ``params``."""
    F = columns.functions(volumes_df)
    return judge(with_limits(volumes_df.where(F.col("usable")), params)).select(*_COLUMNS)


def with_limits(volumes_df: DataFrame, params: dict) -> DataFrame:
    """The rows with the limits of ``params`` as their columns, all of one observation."""
    F = columns.functions(volumes_df)
    limits = storage_rule.limit_columns(F, checked_limits(params))
    return volumes_df.select("*", F.lit("").alias("observation"), *(limits[name].alias(name) for name in LIMIT_COLUMNS))


def judge(volumes_df: DataFrame) -> DataFrame:
    """Rows of usable volumes (``schemas.VOLUME_SCHEMA``) that carry their limits (LIMIT_COLUMNS) and an
    ``observation`` key: every volume of each observation as its newest row, judged; with ``observation``."""
    F, Window = columns.functions(volumes_df), columns.window(volumes_df)
    # A volume's rows: those of one observation (an agent's question to the aggregator; '' in a batch run).
    by_volume = Window.partitionBy("observation", "broker_id", "log_dir")
    # The least-squares slope (nΣxy − ΣxΣy) / (nΣx² − (Σx)²) of available bytes over seconds, negated: the bytes
    # filled per second. regr_slope computes it from central moments (no cancellation on terabyte-sized
    # volumes) and is null with fewer than two measurements at distinct times. 0 - slope, not -slope: a
    # steady volume fills 0.0 B/s, not -0.0.
    fill = F.lit(0.0) - F.regr_slope("available_bytes", "at_seconds").over(by_volume)
    # One projection after the windows: each column may use those before it (lateral column aliases), and
    # the driver analyses three plans per decision instead of eight.
    return (
        volumes_df
        .select("*", (F.row_number().over(by_volume.orderBy(F.col("at_seconds").desc())) == 1).alias("newest"),
                fill.alias("fill_bytes_per_sec"))
        .where(F.col("newest"))
        .select("observation", "broker_id", "log_dir", "total_bytes", "available_bytes", "fill_bytes_per_sec",
                *(term.definition(F).alias(term.name) for term in storage_rule.JUDGED))
        .select("observation", *_COLUMNS)
    )


def decide(spark: SparkSession, volumes: list[dict], params: dict) -> tuple[float, list[dict]]:
    """The throttle factor and every usable volume with its forecast and verdict, by broker and log dir."""
    df = transform(frame_from_rows(spark, volumes, VOLUME_SCHEMA), params)
    F = columns.functions(df)
    # One Spark job per poll: the factor and the rows come back from the same aggregation.
    result = df.select(factor(F).alias("factor"), judged_rows(F).alias("rows")).first()
    return result["factor"], [row.asDict() for row in result["rows"]]


def checked_limits(params: dict) -> dict:
    """The limits of ``params`` (LIMIT_COLUMNS, None when unset), as int and float values only: one limit
    (StorageLimit). ValueError otherwise."""
    StorageLimit.from_params(params)
    limits = {name: params.get(name) for name in LIMIT_COLUMNS}
    return {name: None if value is None else (int(value) if storage_rule.LIMIT_TYPES[name] == "BIGINT" else float(value))
            for name, value in {**limits, "lead_time_seconds": limits["lead_time_seconds"] or 0.0}.items()}


def main(argv: list[str] | None = None) -> int:
    """Batch run: the factor and the violated volumes of a JSON list or JSON-lines file of volumes (rows
    without ``at_seconds`` are taken as measured now)."""
    args = _parse_args(argv)
    params = {"min_available_bytes": args.min_available_bytes, "min_available_ratio": args.min_available_ratio,
              "lead_time_seconds": args.lead_time_seconds}
    with open(args.volumes_file, encoding="utf-8") as file:
        volumes = [{"at_seconds": 0.0, **row} for row in _read_rows(file.read())]
    try:
        factor, rows = decide(get_session(args.spark_url), volumes, params)
    finally:
        stop_sessions()
    violations = [row for row in rows if row["violated"]]
    if args.json:
        print(json.dumps({"throttle_factor": factor, "violations": violations}, indent=2))
    else:
        print(f"throttle factor: {factor}")
        for row in violations:
            print(
                f"violated{' (predicted)' if row['predicted'] else ''}: broker {row['broker_id']} {row['log_dir']}: "
                f"{row['available_bytes']} of {row['total_bytes']} bytes available ({row['available_ratio']:.2%})"
            )
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.volume_violations", description=main.__doc__)
    parser.add_argument("volumes_file",
                        help="rows with broker_id, log_dir, total_bytes, available_bytes, usable (and at_seconds)")
    limit = parser.add_mutually_exclusive_group(required=True)
    limit.add_argument("--min-available-bytes", type=int)
    limit.add_argument("--min-available-ratio", type=float)
    parser.add_argument("--lead-time-seconds", type=float, default=0.0,
                        help="a volume also violates when it reaches the limit within this time at its fill rate")
    parser.add_argument("--spark-url", help="sc://host:port or a master URL; embedded local Spark if not given")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    return parser.parse_args(argv)


def _read_rows(text: str) -> list[dict]:
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
