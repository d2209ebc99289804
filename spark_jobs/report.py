"""`quota-sidecar report`: one Spark batch job over the history → the capacity report, one plain structure
rendered three ways: JSON for machines (``as_json``), a table for the terminal (``as_text``) and an HTML page
with a chart per volume at risk (``report_page.html``).

The forecast is ``forecast.transform`` under the agents' storage limit. A volume is **at risk** when it is
filling and reaches the limit within the ``at_risk`` horizon (90 days by default): its chart shows its available
bytes over the history and the forecast drawn ahead to the limit. Days left count from the cluster's newest
observation, so a report of the same history says the same whenever it is made.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.sql import SparkSession

from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import columns, forecast, history
from spark_jobs.forecast import DAY, ForecastParams

AT_RISK = timedelta(days=90)
CHART_POINTS = 400  # per chart: each of that many time buckets gives its lowest and highest available bytes
_TIMES = ("limit_at", "limit_earliest", "limit_latest", "full_at")


def build(spark: SparkSession, path: str, since: timedelta | None, limit: StorageLimit | None, now: datetime,
          at_risk: timedelta = AT_RISK) -> dict:
    """The report of the history at ``path`` (its rows of the last ``since`` before ``now``; all with None), in
    ``spark``: a session set for much data (session.for_large_data), which its caller makes once and reuses.
    Raises history.HistoryError for a history that cannot be read."""
    # Read twice, not cached: the forecast groups the rows, and the charts read only the volumes at risk.
    start = None if since is None else now - since
    rows = history.read(spark, path, start)
    span = history.day_span(rows, start)
    judged = forecast.transform(rows, ForecastParams.of(limit), span).cache()
    try:
        volume_rows = [row.asDict() for row in judged.collect()]
        cluster_rows = [row.asDict() for row in forecast.by_cluster(judged).collect()]
    finally:
        judged.unpersist()
    as_of = {row["cluster"]: row["as_of_seconds"] for row in cluster_rows}
    volumes = sorted((_volume(row, as_of[row["cluster"]]) for row in volume_rows), key=_by_days_left)
    horizon_days = at_risk / timedelta(days=1)
    risky = [v for v in volumes if v["days_to_limit"] is not None and v["days_to_limit"] <= horizon_days]
    fits = {_volume_key(row): row for row in volume_rows}
    series = _series(spark, rows, [fits[_volume_key(v)] for v in risky])
    charts = [{"volume": v, "fit": _fit(fits[_volume_key(v)]), "points": series.get(_volume_key(v), [])}
              for v in risky]
    return {"generated_at": _iso(now.timestamp()), "history": path,
            "since": _iso((now - since).timestamp()) if since is not None else None,
            "limit": limit.describe() if limit is not None else "none configured: the filesystem (0 bytes available)",
            "at_risk_days": at_risk / timedelta(days=1),
            "clusters": [_cluster(row) for row in cluster_rows], "volumes": volumes, "charts": charts}


def as_json(report: dict) -> dict:
    """What ``--json`` writes: everything but the charts' points."""
    return {key: value for key, value in report.items() if key != "charts"}


def as_text(report: dict) -> str:
    """The volumes by days left, for the terminal."""
    header = ("cluster", "broker", "log dir", "available", "growth/day", "limit at", "days left", "method")
    lines = [header]
    for v in report["volumes"]:
        lines.append((v["cluster"], str(v["broker"]), v["log_dir"], _gib(v["available_bytes"]),
                      _gib(v["growth_bytes_per_day"]) if v["growth_bytes_per_day"] is not None else "-",
                      v["limit_at"] or "not filling",
                      f"{v['days_to_limit']:.1f}" if v["days_to_limit"] is not None else "-", v["method"]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines)


def _volume(row: dict, as_of_seconds: float) -> dict:
    days_left = (row["limit_at_seconds"] - as_of_seconds) / DAY if row["limit_at_seconds"] is not None else None
    return {"cluster": row["cluster"], "broker": row["broker"], "log_dir": row["log_dir"],
            "observed_at": _iso(row["last_seconds"]), "total_bytes": row["total_bytes"],
            "available_bytes": row["available_bytes"], "limit_available_bytes": _whole(row["limit_bytes"]),
            "growth_bytes_per_day": _whole(row["growth_bytes_per_day"]),
            "growth_band_bytes_per_day": [_whole(row["growth_low_bytes_per_day"]),
                                          _whole(row["growth_high_bytes_per_day"])],
            "filling": row["filling"],
            **{name: _iso(row[f"{name}_seconds"]) for name in _TIMES},
            "days_to_limit": None if days_left is None else round(days_left, 3),
            "method": row["method"], "cycles": row["cycles"], "observations": row["points"]}


def _cluster(row: dict) -> dict:
    first = None if row["limit_at_seconds"] is None else {
        "broker": row["first_broker"], "log_dir": row["first_log_dir"], "limit_at": _iso(row["limit_at_seconds"])}
    return {"cluster": row["cluster"], "volumes": row["volumes"], "filling": row["filling"],
            "total_bytes": row["total_bytes"], "available_bytes": row["available_bytes"],
            "growth_bytes_per_day": _whole(row["growth_bytes_per_day"]), "observed_at": _iso(row["as_of_seconds"]),
            "first_to_limit": first,
            "headroom_days": None if row["headroom_days"] is None else round(row["headroom_days"], 3)}


def _fit(row: dict) -> dict:
    """The forecast's line as the chart draws it: used bytes = y + growth × (t − x) / day, and its band."""
    return {"x_seconds": row["fit_x_seconds"], "y_bytes": row["fit_y_bytes"], "total_bytes": row["total_bytes"],
            "limit_bytes": row["limit_bytes"], "growth": row["growth_bytes_per_day"],
            "growth_low": row["growth_low_bytes_per_day"], "growth_high": row["growth_high_bytes_per_day"],
            "first_seconds": row["first_seconds"], "last_seconds": row["last_seconds"],
            "limit_at_seconds": row["limit_at_seconds"], "limit_latest_seconds": row["limit_latest_seconds"]}


def _series(spark: SparkSession, rows, risky: list[dict]) -> dict:
    """Each risky volume's available bytes over time (`risky`: their forecast rows, which know when each history
    begins and ends), at most 2 × CHART_POINTS points: the lowest and the highest of each time bucket (the
    sawtooth's tips survive the thinning), in time order. One Spark job, grouped, not sorted."""
    if not risky:
        return {}
    wanted = spark.createDataFrame(
        [(v["cluster"], v["broker"], v["log_dir"], v["first_seconds"], max(v["last_seconds"] - v["first_seconds"], 1.0))
         for v in risky], "cluster string, broker int, log_dir string, t0 double, span double")
    F = columns.functions(rows)
    seconds = F.unix_micros("observed_at") / 1_000_000.0
    bucket = F.floor((seconds - F.col("t0")) / F.col("span") * CHART_POINTS).cast("int")
    points = (rows.join(wanted, ["cluster", "broker", "log_dir"])
              .select("cluster", "broker", "log_dir", seconds.alias("t"), "available_bytes", bucket.alias("bucket"))
              .groupBy("cluster", "broker", "log_dir", "bucket")
              .agg(F.min_by("t", "available_bytes").alias("low_t"), F.min("available_bytes").alias("low"),
                   F.max_by("t", "available_bytes").alias("high_t"), F.max("available_bytes").alias("high"))
              .collect())
    series: dict = {}
    for row in points:
        key = _volume_key(row)
        series.setdefault(key, set()).update({(row["low_t"], row["low"]), (row["high_t"], row["high"])})
    return {key: sorted(values) for key, values in series.items()}


def _volume_key(row) -> tuple:
    return row["cluster"], row["broker"], row["log_dir"]


def _by_days_left(volume: dict) -> tuple:
    days = volume["days_to_limit"]
    return (days is None, days if days is not None else 0.0, volume["cluster"], volume["broker"], volume["log_dir"])


def _iso(seconds: float | None) -> str | None:
    """Epoch seconds → ISO 8601 UTC to the second ("2026-11-22T12:00:00Z")."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(round(seconds), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _whole(value: float | None) -> int | None:
    return None if value is None else round(value)


def _gib(value: float) -> str:
    return f"{value / (1 << 30):,.1f} GiB".replace("-0.0 ", "0.0 ")  # a shrinking volume's -0.0 is 0.0
