"""When each volume reaches the storage limit, and its filesystem, from days of history: a forecast that
knows Kafka's retention.

A Kafka volume's used bytes are a sawtooth: they grow as producers write and drop when retention deletes old
segments. The slope of the last minutes or hours (``predict_linear`` over 6 h) is the fill phase's slope and
forecasts a full disk that retention never lets happen. What fills a disk is the growth that retention does not
take back: the rise of the sawtooth's peaks from one retention cycle to the next.

- A **drop** is a fall of the used bytes between two observations by more than ``min_drop_ratio`` of the volume
  (0.1 %: a default 1 GiB segment of a 1 TiB disk); the drops cut the history into **cycles**.
- **peaks**: with at least ``min_cycles`` complete cycles (each ended by a drop: the last cycle's maximum is not
  a peak yet), the least-squares line through each cycle's peak (its maximum used bytes, at its time). The disk
  reaches the limit at the top of a tooth: the first tooth whose top is past the line's crossing, up to a cycle ×
  (1 − growth / writes) later than the date given, which errs early by that much at most.
- **linear**: with fewer cycles, the least-squares line through every observation (a history shorter than a few
  retention cycles: the slope includes the fill phase, so the dates come early). **none**: fewer than two times.
- The band: the slope ± ``sigmas`` standard errors (from the residuals about the line). A volume is **filling**
  when its growth is above ``min_growth_ratio_per_day`` of its size a day and the band's lower slope is above 0;
  otherwise its dates are null: a volume that only cycles (retention keeps its peaks flat) is not filling.

Dates are epoch seconds (UTC); the report writes them ISO 8601. ``transform`` gives one row per volume,
``by_cluster`` one per cluster: the first volume to reach the limit and the headroom in days.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame

from quota_sidecar.common.vocabulary import StorageLimit

DAY = 86400.0


@dataclass(frozen=True)
class ForecastParams:
    min_available_bytes: int | None = None  # the storage limit, as the agents have it (at most one of the two);
    min_available_ratio: float | None = None  # none: the filesystem is the limit
    min_drop_ratio: float = 0.001
    min_cycles: int = 3
    sigmas: float = 2.0
    min_growth_ratio_per_day: float = 1e-5  # 1 TiB growing 10 MiB a day: 270 years to fill, not filling

    @classmethod
    def of(cls, limit: StorageLimit | None, **others) -> "ForecastParams":
        if limit is None:
            return cls(**others)
        return cls(limit.min_available_bytes, limit.min_available_ratio, **others)


COLUMNS = ("cluster", "broker", "log_dir", "points", "cycles", "first_seconds", "last_seconds", "total_bytes",
           "available_bytes", "limit_bytes", "method", "growth_bytes_per_day", "growth_low_bytes_per_day",
           "growth_high_bytes_per_day", "filling", "limit_at_seconds", "limit_earliest_seconds",
           "limit_latest_seconds", "full_at_seconds", "fit_x_seconds", "fit_y_bytes")

_VOLUME = "cluster, broker, log_dir"
_FIT = ("regr_count({y}, {x}) AS {p}_n, regr_slope({y}, {x}) AS {p}_slope, avg({x}) AS {p}_x, avg({y}) AS {p}_y, "
        "regr_sxx({y}, {x}) AS {p}_sxx, regr_syy({y}, {x}) AS {p}_syy, regr_sxy({y}, {x}) AS {p}_sxy")

_SQL = """
WITH points AS (
  SELECT cluster, broker, log_dir, unix_micros(observed_at) / 1000000D AS t, total_bytes, available_bytes,
         CAST(total_bytes - available_bytes AS DOUBLE) AS used
  FROM {view} WHERE observed_at IS NOT NULL AND total_bytes >= 0 AND available_bytes >= 0
), drops AS (
  SELECT *, CASE WHEN lag(used) OVER (PARTITION BY {volume} ORDER BY t) - used > {min_drop_ratio}D * total_bytes
                 THEN 1 ELSE 0 END AS is_drop
  FROM points
), cycles AS (
  SELECT *, sum(is_drop) OVER (PARTITION BY {volume} ORDER BY t ROWS UNBOUNDED PRECEDING) AS cycle FROM drops
), volumes AS (
  SELECT {volume}, count(*) AS points, sum(is_drop) AS cycles, min(t) AS first_seconds, max(t) AS last_seconds,
         max_by(total_bytes, t) AS total_bytes, max_by(available_bytes, t) AS available_bytes, {line_fit}
  FROM cycles GROUP BY {volume}
), peaks AS (  -- each complete cycle's top: the last cycle has not ended in a drop yet
  SELECT c.cluster, c.broker, c.log_dir, max(c.used) AS peak_used, max_by(c.t, c.used) AS peak_t
  FROM cycles c JOIN volumes v ON c.cluster = v.cluster AND c.broker = v.broker AND c.log_dir = v.log_dir
  WHERE c.cycle < v.cycles GROUP BY c.cluster, c.broker, c.log_dir, c.cycle
), peak_fits AS (
  SELECT {volume}, {peak_fit} FROM peaks GROUP BY {volume}
), chosen AS (
  SELECT v.*, CASE WHEN coalesce(p.peak_n, 0) >= {min_cycles} THEN 'peaks'
                   WHEN v.line_slope IS NOT NULL THEN 'linear' ELSE 'none' END AS method,
         p.peak_n, p.peak_slope, p.peak_x, p.peak_y, p.peak_sxx, p.peak_syy, p.peak_sxy
  FROM volumes v LEFT JOIN peak_fits p ON v.cluster = p.cluster AND v.broker = p.broker AND v.log_dir = p.log_dir
), fitted AS (
  SELECT *,
    CASE method WHEN 'peaks' THEN peak_n ELSE line_n END AS n,
    CASE method WHEN 'peaks' THEN peak_slope ELSE line_slope END AS slope,
    CASE method WHEN 'peaks' THEN peak_x ELSE line_x END AS fit_x_seconds,
    CASE method WHEN 'peaks' THEN peak_y ELSE line_y END AS fit_y_bytes,
    CASE method WHEN 'peaks' THEN peak_sxx ELSE line_sxx END AS sxx,
    CASE method WHEN 'peaks' THEN peak_syy ELSE line_syy END AS syy,
    CASE method WHEN 'peaks' THEN peak_sxy ELSE line_sxy END AS sxy,
    {limit_bytes} AS limit_bytes
  FROM chosen
), banded AS (
  SELECT *,
    -- the slope's standard error: the residuals' variance over n - 2 degrees of freedom, over Sxx
    CASE WHEN n > 2 AND sxx > 0 THEN sqrt(greatest(syy - sxy * sxy / sxx, 0D) / (n - 2) / sxx) ELSE 0D END AS slope_se
  FROM fitted
), judged AS (
  SELECT *, slope * {day} AS growth_bytes_per_day,
    (slope - {sigmas}D * slope_se) * {day} AS growth_low_bytes_per_day,
    (slope + {sigmas}D * slope_se) * {day} AS growth_high_bytes_per_day,
    coalesce(slope * {day} > {min_growth}D * total_bytes AND slope - {sigmas}D * slope_se > 0, false) AS filling
  FROM banded
)
SELECT *,
  CASE WHEN filling THEN fit_x_seconds + (total_bytes - limit_bytes - fit_y_bytes) / slope END AS limit_at_seconds,
  CASE WHEN filling THEN least({limit_by_high}, {limit_by_low}) END AS limit_earliest_seconds,
  CASE WHEN filling THEN greatest({limit_by_high}, {limit_by_low}) END AS limit_latest_seconds,
  CASE WHEN filling THEN fit_x_seconds + (total_bytes - fit_y_bytes) / slope END AS full_at_seconds
FROM judged
"""
_LIMIT_BY = "fit_x_seconds + (total_bytes - limit_bytes - fit_y_bytes) / ({growth} / {day})"


def transform(history: DataFrame, params: ForecastParams) -> DataFrame:
    """History rows (``history.COLUMNS``) → one row per volume (COLUMNS): its fit, growth, band and dates."""
    view = f"quota_sidecar_history_{uuid.uuid4().hex}"  # a view of its own: another transform may run beside it
    history.createOrReplaceTempView(view)
    sql = _SQL.format(
        view=view, volume=_VOLUME, day=repr(DAY), sigmas=repr(float(params.sigmas)),
        min_drop_ratio=repr(float(params.min_drop_ratio)), min_cycles=int(params.min_cycles),
        min_growth=repr(float(params.min_growth_ratio_per_day)), limit_bytes=_limit_bytes(params),
        line_fit=_FIT.format(y="used", x="t", p="line"), peak_fit=_FIT.format(y="peak_used", x="peak_t", p="peak"),
        limit_by_high=_LIMIT_BY.format(growth="growth_high_bytes_per_day", day=repr(DAY)),
        limit_by_low=_LIMIT_BY.format(growth="growth_low_bytes_per_day", day=repr(DAY)))
    return history.sparkSession.sql(sql).selectExpr(*COLUMNS)


def by_cluster(volumes: DataFrame) -> DataFrame:
    """Forecast rows (COLUMNS) → one row per cluster: its volumes, their sizes and growth now, the first volume
    to reach the limit and the headroom in days from the cluster's newest observation (null: none is filling)."""
    view = f"quota_sidecar_forecast_{uuid.uuid4().hex}"
    volumes.createOrReplaceTempView(view)
    return volumes.sparkSession.sql(f"""
        SELECT cluster, count(*) AS volumes, count_if(filling) AS filling, sum(total_bytes) AS total_bytes,
               sum(available_bytes) AS available_bytes, sum(growth_bytes_per_day) AS growth_bytes_per_day,
               max(last_seconds) AS as_of_seconds, min(limit_at_seconds) AS limit_at_seconds,
               min_by(broker, limit_at_seconds) AS first_broker, min_by(log_dir, limit_at_seconds) AS first_log_dir,
               (min(limit_at_seconds) - max(last_seconds)) / {DAY!r} AS headroom_days
        FROM {view} GROUP BY cluster ORDER BY cluster""")


def _limit_bytes(params: ForecastParams) -> str:
    """The available bytes at the limit, per volume: the configured bytes, the ratio of its size, or 0."""
    if params.min_available_bytes is not None and params.min_available_ratio is not None:
        raise ValueError("set at most one of min_available_bytes and min_available_ratio")
    if params.min_available_bytes is not None:
        return f"CAST({int(params.min_available_bytes)} AS DOUBLE)"
    if params.min_available_ratio is not None:
        return f"{float(params.min_available_ratio)!r}D * total_bytes"
    return "0D"
