"""Each usable volume's fill rate, time to the limit and verdict, and the throttle factor that follows.

The rows are measurements (``schemas.VOLUME_SCHEMA``): one per volume and moment, the current poll's and
the earlier ones within the fill window. A volume's newest row is its state now; all its rows give its
fill rate. A volume violates when it is at or below the hard limit now, or, with a lead time, when at its
fill rate it gets there within the lead time (a predicted violation). The factor is 0.0 when any volume
violates, else the smallest soft factor: 1.0 at or above the soft limit (or without one), falling
linearly to 0.0 at the hard limit.

The limits are columns of the rows, and the rows are grouped by the observation they came with: one job
judges one poll (``decide``), or the questions of many agents of many clusters at once (the aggregator,
``aggregation``). The expressions are Spark SQL text on DataFrame methods rather than pyspark.sql.functions:
those pick classic or Connect columns from a process-wide switch, while these work on either kind of DataFrame.
"""
import argparse
import json
import sys

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.schemas import VOLUME_SCHEMA, frame_from_rows
from spark_jobs.session import get_session, stop_sessions

# A volume's rows: those of one observation (an agent's question to the aggregator; '' in a batch run).
_BY_VOLUME = "PARTITION BY observation, broker_id, log_dir"
_NEWEST = f"row_number() OVER ({_BY_VOLUME} ORDER BY at_seconds DESC) = 1"
# The least-squares slope (nΣxy − ΣxΣy) / (nΣx² − (Σx)²) of available bytes over seconds, negated: the bytes
# filled per second. regr_slope computes it from central moments (no cancellation on terabyte-sized
# volumes) and is null with fewer than two measurements at distinct times. 0 - slope, not -slope: a
# steady volume fills 0.0 B/s, not -0.0.
_FILL = f"0.0D - regr_slope(available_bytes, at_seconds) OVER ({_BY_VOLUME})"
_AVAILABLE_RATIO = "CASE WHEN total_bytes > 0 THEN available_bytes / total_bytes ELSE 0.0D END"

# The limits are columns of each row (LIMIT_COLUMNS), so that one job judges volumes of clusters with
# different limits. The hard limit is in bytes when min_available_bytes is set, else a ratio; the soft limit
# is of the same kind.
_IN_BYTES = "min_available_bytes IS NOT NULL"
_VALUE = f"CASE WHEN {_IN_BYTES} THEN CAST(available_bytes AS DOUBLE) ELSE available_ratio END"
_HARD = f"CASE WHEN {_IN_BYTES} THEN CAST(min_available_bytes AS DOUBLE) ELSE min_available_ratio END"
_SOFT = f"CASE WHEN {_IN_BYTES} THEN CAST(soft_min_available_bytes AS DOUBLE) ELSE soft_min_available_ratio END"
_DESCENT = f"CASE WHEN {_IN_BYTES} THEN CAST(descent_min_available_bytes AS DOUBLE) ELSE descent_min_available_ratio END"
_LIMIT_BYTES = f"CASE WHEN {_IN_BYTES} THEN CAST(min_available_bytes AS DOUBLE) ELSE min_available_ratio * total_bytes END"
# 0 at the limit; null when the volume is not filling (a refilling or steady volume never gets there).
_SECONDS_TO_LIMIT = """CASE WHEN at_limit THEN 0.0D
    WHEN fill_bytes_per_sec > 0 THEN (available_bytes - limit_bytes) / fill_bytes_per_sec END"""
# 1.0 at or above the soft limit (or without one), falling linearly to 0.0 at the hard limit.
_FACTOR_OF_VOLUME = """CASE WHEN violated THEN 0.0D WHEN soft_value IS NULL OR value >= soft_value THEN 1.0D
    ELSE (value - hard_value) / (soft_value - hard_value) END"""
# Producer quotas go down in steps (quota_sidecar/decide/descent.py) while a volume not yet violated fills within
# the descent's start or horizon; a volume that stopped filling (room returned) lifts them. Once begun, the horizon
# is judged at the rate the descent began from (descent_rate_bytes_per_sec) when that is faster: the fill the
# throttle slowed is not the one a lift would bring back.
_DESCENDING = """CASE WHEN violated OR coalesce(fill_bytes_per_sec, 0.0D) <= 0.0D THEN false
    ELSE coalesce(value <= descent_value OR (available_bytes - limit_bytes)
        / greatest(fill_bytes_per_sec, coalesce(descent_rate_bytes_per_sec, 0.0D)) <= descent_horizon_seconds, false)
    END"""
_COLUMNS = ("broker_id", "log_dir", "total_bytes", "available_bytes", "available_ratio", "fill_bytes_per_sec",
            "seconds_to_limit", "violated", "predicted", "throttle_factor", "descending")
LIMIT_COLUMNS = ("min_available_bytes", "min_available_ratio", "soft_min_available_bytes",
                 "soft_min_available_ratio", "lead_time_seconds", "descent_min_available_bytes",
                 "descent_min_available_ratio", "descent_horizon_seconds", "descent_rate_bytes_per_sec")

# The minimum over no rows is null: no volume, nothing to protect, no throttle.
FACTOR = "coalesce(min(throttle_factor), 1.0D)"
# One struct per volume; an array of them sorts by its first fields, broker_id then log_dir. (A row without a
# volume, which the aggregator adds for each observation, is left out: collect_list skips nulls.)
JUDGED_ROWS = f"sort_array(collect_list(CASE WHEN log_dir IS NOT NULL THEN struct({', '.join(_COLUMNS)}) END))"


def transform(volumes_df: DataFrame, params: dict) -> DataFrame:
    """Every usable volume, as its newest row, with ``available_ratio``, ``fill_bytes_per_sec``,
    ``seconds_to_limit``, ``violated``, ``predicted`` and its ``throttle_factor``, all under the limits of
    ``params``."""
    return judge(with_limits(volumes_df.where("usable"), params)).selectExpr(*_COLUMNS)


def with_limits(volumes_df: DataFrame, params: dict) -> DataFrame:
    """The rows with the limits of ``params`` as their columns, all of one observation."""
    limits = checked_limits(params)
    literals = [f"CAST({'NULL' if limits[name] is None else repr(limits[name])} AS {_TYPES[name]}) AS {name}"
                for name in LIMIT_COLUMNS]
    return volumes_df.selectExpr("*", "'' AS observation", *literals)


def judge(volumes_df: DataFrame) -> DataFrame:
    """Rows of usable volumes (``schemas.VOLUME_SCHEMA``) that carry their limits (LIMIT_COLUMNS) and an
    ``observation`` key: every volume of each observation as its newest row, judged; with ``observation``."""
    # One projection after the windows: each column may use those before it (lateral column aliases), and
    # the driver analyses three plans per decision instead of eight.
    return (
        volumes_df
        .selectExpr("*", f"{_NEWEST} AS newest", f"{_FILL} AS fill_bytes_per_sec")
        .where("newest")
        .selectExpr(
            "observation", "broker_id", "log_dir", "total_bytes", "available_bytes",
            f"{_AVAILABLE_RATIO} AS available_ratio",
            "fill_bytes_per_sec",
            f"{_VALUE} AS value", f"{_HARD} AS hard_value", f"{_SOFT} AS soft_value", f"{_DESCENT} AS descent_value",
            "value <= hard_value AS at_limit",
            f"{_LIMIT_BYTES} AS limit_bytes",
            f"{_SECONDS_TO_LIMIT} AS seconds_to_limit",
            "at_limit OR coalesce(seconds_to_limit <= coalesce(lead_time_seconds, 0.0D), false) AS violated",
            "violated AND NOT at_limit AS predicted",
            f"{_FACTOR_OF_VOLUME} AS throttle_factor",
            f"{_DESCENDING} AS descending",
        )
        .selectExpr("observation", *_COLUMNS)
    )


def decide(spark: SparkSession, volumes: list[dict], params: dict) -> tuple[float, list[dict]]:
    """The throttle factor and every usable volume with its forecast and verdict, by broker and log dir."""
    df = transform(frame_from_rows(spark, volumes, VOLUME_SCHEMA), params)
    # One Spark job per poll: the factor and the rows come back from the same aggregation.
    result = df.selectExpr(f"{FACTOR} AS factor", f"{JUDGED_ROWS} AS rows").first()
    return result["factor"], [row.asDict() for row in result["rows"]]


_TYPES = {"min_available_bytes": "BIGINT", "min_available_ratio": "DOUBLE", "soft_min_available_bytes": "BIGINT",
          "soft_min_available_ratio": "DOUBLE", "lead_time_seconds": "DOUBLE", "descent_min_available_bytes": "BIGINT",
          "descent_min_available_ratio": "DOUBLE", "descent_horizon_seconds": "DOUBLE",
          "descent_rate_bytes_per_sec": "DOUBLE"}


def checked_limits(params: dict) -> dict:
    """The limits of ``params`` (LIMIT_COLUMNS, None when unset), as int and float values only: exactly one
    hard limit, a soft limit of its kind. ValueError otherwise."""
    hard = [kind for kind in ("bytes", "ratio") if params.get(f"min_available_{kind}") is not None]
    if len(hard) != 1:
        raise ValueError(f"set exactly one of min_available_bytes and min_available_ratio, got {params!r}")
    kind, = hard
    other = "ratio" if kind == "bytes" else "bytes"
    if params.get(f"soft_min_available_{other}") is not None:
        raise ValueError(f"the soft limit must be of the hard limit's kind ({kind}), got {params!r}")
    limits = {name: params.get(name) for name in LIMIT_COLUMNS}
    return {name: None if value is None else (int(value) if _TYPES[name] == "BIGINT" else float(value))
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
