"""Which volumes are too full, and the throttle factor that follows: 0.0 when any is, else 1.0.

The expressions are Spark SQL text on DataFrame methods rather than pyspark.sql.functions: those pick
classic or Connect columns from a process-wide switch, while these work on either kind of DataFrame.
"""
import argparse
import json
import sys

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.schemas import VOLUME_SCHEMA, frame_from_rows
from spark_jobs.session import get_session, stop_sessions

_AVAILABLE_RATIO = "CASE WHEN total_bytes > 0 THEN available_bytes / total_bytes ELSE 0.0D END"

# The minimum over no rows is null: no volume, nothing to protect, no throttle.
_FACTOR = "coalesce(min(CASE WHEN violated THEN 0.0D ELSE 1.0D END), 1.0D)"


def transform(volumes_df: DataFrame, params: dict) -> DataFrame:
    """Usable volumes with ``available_ratio`` and ``violated`` (at or below the limit)."""
    return (
        volumes_df.where("usable")
        .selectExpr("*", f"{_AVAILABLE_RATIO} AS available_ratio")
        .selectExpr("*", f"{_violation(params)} AS violated")
    )


def decide(spark: SparkSession, volumes: list[dict], params: dict) -> tuple[float, list[dict]]:
    """The throttle factor and every usable volume with its ratio and verdict, by broker and log dir."""
    df = transform(frame_from_rows(spark, volumes, VOLUME_SCHEMA), params)
    # One Spark job per poll: the factor and the rows come back from the same aggregation; a struct
    # array sorts by its first fields, broker_id then log_dir.
    result = df.selectExpr(f"{_FACTOR} AS factor", "sort_array(collect_list(struct(*))) AS rows").first()
    return result["factor"], [row.asDict() for row in result["rows"]]


def _violation(params: dict) -> str:
    min_bytes = params.get("min_available_bytes")
    min_ratio = params.get("min_available_ratio")
    if (min_bytes is None) == (min_ratio is None):
        raise ValueError(f"set exactly one of min_available_bytes and min_available_ratio, got {params!r}")
    # The limits enter the SQL as int and float literals only, never as text from outside.
    if min_bytes is not None:
        return f"available_bytes <= {int(min_bytes)}"
    return f"available_ratio <= {float(min_ratio)!r}D"


def main(argv: list[str] | None = None) -> int:
    """Batch run: the factor and the violated volumes of a JSON list or JSON-lines file of volumes."""
    args = _parse_args(argv)
    params = {"min_available_bytes": args.min_available_bytes, "min_available_ratio": args.min_available_ratio}
    with open(args.volumes_file, encoding="utf-8") as file:
        volumes = _read_rows(file.read())
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
                f"violated: broker {row['broker_id']} {row['log_dir']}: {row['available_bytes']} of "
                f"{row['total_bytes']} bytes available ({row['available_ratio']:.2%})"
            )
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.volume_violations", description=main.__doc__)
    parser.add_argument("volumes_file", help="rows with broker_id, log_dir, total_bytes, available_bytes, usable")
    limit = parser.add_mutually_exclusive_group(required=True)
    limit.add_argument("--min-available-bytes", type=int)
    limit.add_argument("--min-available-ratio", type=float)
    parser.add_argument("--spark-url", help="sc://host:port or a master URL; embedded local Spark if not given")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    return parser.parse_args(argv)


def _read_rows(text: str) -> list[dict]:
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
