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

Months of history at one row a minute are 10^8 rows for 1,000 volumes: too many to put in time order. The
history's span is cut into ``bins`` equal spans of time (~4 h for 90 days) and each volume's observations are
grouped by bin; only the bins are put in time order, where each bin's lowest and highest observation find the
drops (between two bins, and one inside a bin: two drops in one bin count as one, so cycles shorter than two
bins are not told apart) and the peaks, and the line through every observation is fitted from the bins' sums of
squares, exactly. A history of at most two observations a bin is judged on every one of them.

Dates are epoch seconds (UTC); the report writes them ISO 8601. ``transform`` gives one row per volume,
``by_cluster`` one per cluster: the first volume to reach the limit and the headroom in days.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from quota_sidecar.common import storage_rule
from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs.session import sql_over

DAY = 86400.0


@dataclass(frozen=True)
class ForecastParams:
    min_available_bytes: int | None = None  # the storage limit, as the agents have it (at most one of the two);
    min_available_ratio: float | None = None  # none: the filesystem is the limit
    min_drop_ratio: float = 0.001
    min_cycles: int = 3
    sigmas: float = 2.0
    min_growth_ratio_per_day: float = 1e-5  # 1 TiB growing 10 MiB a day: 270 years to fill, not filling
    bins: int = 500  # the history's span cut into this many; each volume's observations grouped by them

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
), binned AS (  -- the bins' width is the same for every volume: the history's span over the bins
  SELECT *, t - {t0} - bin * {width} AS into_bin
  FROM (SELECT *, least(floor((t - {t0}) / {width}), {bins} - 1) AS bin FROM points)
), sums AS (  -- grouped, not sorted; sums of primitives only (an aggregate of structs is sorted, ten times slower)
  SELECT {volume}, bin, count(*) AS n, sum(into_bin) AS st, sum(used) AS su, sum(into_bin * into_bin) AS stt,
         sum(used * used) AS suu, sum(into_bin * used) AS stu, min(t) AS first_t, max(t) AS last_t,
         min(used) AS low_used, min_by(t, used) AS low_t, max(used) AS high_used, max_by(t, used) AS high_t,
         max(total_bytes) AS total_bytes, max_by(available_bytes, t) AS available_bytes
  FROM binned GROUP BY {volume}, bin
), bins AS (  -- each bin's means and sums of squares about them
  SELECT *, {t0} + bin * {width} + st / n AS mean_t, su / n AS mean_used, greatest(stt - st * st / n, 0D) AS sxx,
         greatest(suu - su * su / n, 0D) AS syy, stu - st * su / n AS sxy
  FROM sums
), drops AS (  -- a drop inside a bin (its highest observation before its lowest), and one from the bin before
  SELECT *,
    CASE WHEN high_t < low_t AND high_used - low_used > {min_drop_ratio}D * total_bytes THEN 1 ELSE 0 END
      AS drop_inside,
    CASE WHEN lag(CASE WHEN high_t < low_t THEN low_used ELSE high_used END) OVER (PARTITION BY {volume} ORDER BY bin)
              - CASE WHEN high_t < low_t THEN high_used ELSE low_used END > {min_drop_ratio}D * total_bytes
         THEN 1 ELSE 0 END AS drop_before
  FROM bins
), cycles AS (  -- the cycle of each bin's highest observation; the volume's means, for the line's fit
  SELECT *,
    sum(drop_before + drop_inside) OVER (PARTITION BY {volume} ORDER BY bin ROWS UNBOUNDED PRECEDING) - drop_inside
      AS cycle,
    sum(drop_before + drop_inside) OVER v AS volume_cycles,
    sum(n * mean_t) OVER v / sum(n) OVER v AS line_x, sum(n * mean_used) OVER v / sum(n) OVER v AS line_y
  FROM drops WINDOW v AS (PARTITION BY {volume})
), per_cycle AS (  -- the bins' sums of squares about the volume's means, by cycle: the line's, exactly
  SELECT {volume}, cycle, max(volume_cycles) AS cycles, max(high_used) AS top_used, max_by(high_t, high_used)
         AS top_t, sum(n) AS n, min(first_t) AS first_t, max(last_t) AS last_t, max_by(total_bytes, last_t)
         AS total_bytes, max_by(available_bytes, last_t) AS available_bytes, max(line_x) AS line_x,
         max(line_y) AS line_y,
         sum(sxx + n * (mean_t - line_x) * (mean_t - line_x)) AS sxx,
         sum(syy + n * (mean_used - line_y) * (mean_used - line_y)) AS syy,
         sum(sxy + n * (mean_t - line_x) * (mean_used - line_y)) AS sxy
  FROM cycles GROUP BY {volume}, cycle
), volumes AS (  -- the peaks: each complete cycle's top (the last cycle has not ended in a drop yet)
  SELECT {volume}, sum(n) AS points, max(cycles) AS cycles, min(first_t) AS first_seconds,
         max(last_t) AS last_seconds, max_by(total_bytes, last_t) AS total_bytes,
         max_by(available_bytes, last_t) AS available_bytes,
         sum(n) AS line_n, max(line_x) AS line_x, max(line_y) AS line_y, sum(sxx) AS line_sxx, sum(syy) AS line_syy,
         sum(sxy) AS line_sxy, CASE WHEN sum(sxx) > 0 THEN sum(sxy) / sum(sxx) END AS line_slope,
         {peak_fit}
  FROM (SELECT *, CASE WHEN cycle < cycles THEN top_used END AS peak_used,
                  CASE WHEN cycle < cycles THEN top_t END AS peak_t FROM per_cycle)
  GROUP BY {volume}
), chosen AS (
  SELECT *, CASE WHEN coalesce(peak_n, 0) >= {min_cycles} THEN 'peaks'
                 WHEN line_slope IS NOT NULL THEN 'linear' ELSE 'none' END AS method
  FROM volumes
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


def transform(history: DataFrame, params: ForecastParams, span: tuple[float, float] | None = None) -> DataFrame:
    """History rows (``history.COLUMNS``) → one row per volume (COLUMNS): its fit, growth, band and dates. `span`:
    the first and last moment of the history (epoch seconds) when known without reading it (history.day_span);
    else they are read from the rows, a job of its own."""
    if span is None:
        t0, width = "(SELECT min(t) FROM points)", f"(SELECT greatest(max(t) - min(t), 1D) / {params.bins} FROM points)"
    else:
        t0, width = f"{float(span[0])!r}D", f"{max(span[1] - span[0], 1.0) / params.bins!r}D"
    sql = _SQL.format(
        view="{history}", volume=_VOLUME, day=repr(DAY), sigmas=repr(float(params.sigmas)),
        min_drop_ratio=repr(float(params.min_drop_ratio)), min_cycles=int(params.min_cycles),
        min_growth=repr(float(params.min_growth_ratio_per_day)), limit_bytes=_limit_bytes(params),
        bins=int(params.bins), t0=t0, width=width, peak_fit=_FIT.format(y="peak_used", x="peak_t", p="peak"),
        limit_by_high=_LIMIT_BY.format(growth="growth_high_bytes_per_day", day=repr(DAY)),
        limit_by_low=_LIMIT_BY.format(growth="growth_low_bytes_per_day", day=repr(DAY)))
    return sql_over(sql, history=history).selectExpr(*COLUMNS)


def by_cluster(volumes: DataFrame) -> DataFrame:
    """Forecast rows (COLUMNS) → one row per cluster: its volumes, their sizes and growth now, the first volume
    to reach the limit and the headroom in days from the cluster's newest observation (null: none is filling)."""
    return sql_over(f"""
        SELECT cluster, count(*) AS volumes, count_if(filling) AS filling, sum(total_bytes) AS total_bytes,
               sum(available_bytes) AS available_bytes, sum(growth_bytes_per_day) AS growth_bytes_per_day,
               max(last_seconds) AS as_of_seconds, min(limit_at_seconds) AS limit_at_seconds,
               min_by(broker, limit_at_seconds) AS first_broker, min_by(log_dir, limit_at_seconds) AS first_log_dir,
               (min(limit_at_seconds) - max(last_seconds)) / {DAY!r} AS headroom_days
        FROM {{volumes}} GROUP BY cluster ORDER BY cluster""", volumes=volumes)


def _limit_bytes(params: ForecastParams) -> str:
    """The available bytes at the limit, per volume: the rule's (storage_rule.LIMIT_BYTES), or 0 without one."""
    if params.min_available_bytes is None and params.min_available_ratio is None:
        return "0D"
    limit = StorageLimit(params.min_available_bytes, params.min_available_ratio)
    return storage_rule.LIMIT_BYTES.inline_sql(storage_rule.limit_literals(limit.as_params()))
