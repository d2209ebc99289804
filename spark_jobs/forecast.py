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
from types import ModuleType

from pyspark.sql import Column, DataFrame

from quota_sidecar.common import storage_rule
from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import columns

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

VOLUME = ("cluster", "broker", "log_dir")


def transform(history: DataFrame, params: ForecastParams, span: tuple[float, float] | None = None) -> DataFrame:
    """History rows (``history.COLUMNS``) → one row per volume (COLUMNS): its fit, growth, band and dates. `span`:
    the first and last moment of the history (epoch seconds) when known without reading it (history.day_span);
    else they are read from the rows, a job of its own."""
    F = columns.functions(history)
    points = _points(F, history)
    if span is None:
        t0 = points.agg(F.min("t")).scalar()
        width = points.agg(F.greatest(F.max("t") - F.min("t"), F.lit(1.0)) / params.bins).scalar()
    else:
        t0, width = F.lit(float(span[0])), F.lit(max(span[1] - span[0], 1.0) / params.bins)
    bins = _bins(F, points, t0, width, params.bins)
    cycles = _cycles(F, columns.window(history), bins, params.min_drop_ratio)
    return _dated(F, _fitted(F, _volumes(F, cycles), params)).select(*COLUMNS)


def by_cluster(volumes: DataFrame) -> DataFrame:
    """Forecast rows (COLUMNS) → one row per cluster: its volumes, their sizes and growth now, the first volume
    to reach the limit and the headroom in days from the cluster's newest observation (null: none is filling)."""
    F = columns.functions(volumes)
    return volumes.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("volumes"), F.count_if("filling").alias("filling"),
        F.sum("total_bytes").alias("total_bytes"), F.sum("available_bytes").alias("available_bytes"),
        F.sum("growth_bytes_per_day").alias("growth_bytes_per_day"), F.max("last_seconds").alias("as_of_seconds"),
        F.min("limit_at_seconds").alias("limit_at_seconds"),
        F.min_by("broker", "limit_at_seconds").alias("first_broker"),
        F.min_by("log_dir", "limit_at_seconds").alias("first_log_dir"),
        ((F.min("limit_at_seconds") - F.max("last_seconds")) / DAY).alias("headroom_days"),
    ).orderBy("cluster")


def _points(F: ModuleType, history: DataFrame) -> DataFrame:
    """Each observation: its time in seconds and its used bytes."""
    return history.where(F.col("observed_at").isNotNull() & (F.col("total_bytes") >= 0)
                         & (F.col("available_bytes") >= 0)).select(
        *VOLUME, (F.unix_micros("observed_at") / 1e6).alias("t"), "total_bytes", "available_bytes",
        (F.col("total_bytes") - F.col("available_bytes")).cast("double").alias("used"))


def _bins(F: ModuleType, points: DataFrame, t0: Column, width: Column, count: int) -> DataFrame:
    """Each volume's observations by bin (the bins' width is the same for every volume: the history's span over
    the bins), grouped, not sorted, as sums of primitives only (an aggregate of structs is sorted, ten times
    slower); then each bin's means and sums of squares about them."""
    t, used = F.col("t"), F.col("used")
    binned = points.withColumn("bin", F.least(F.floor((t - t0) / width), F.lit(count - 1)))
    sums = binned.withColumn("into_bin", t - t0 - F.col("bin") * width).groupBy(*VOLUME, "bin").agg(
        F.count(F.lit(1)).alias("n"), F.sum("into_bin").alias("st"), F.sum("used").alias("su"),
        F.sum(F.col("into_bin") * F.col("into_bin")).alias("stt"), F.sum(used * used).alias("suu"),
        F.sum(F.col("into_bin") * used).alias("stu"), F.min("t").alias("first_t"), F.max("t").alias("last_t"),
        F.min("used").alias("low_used"), F.min_by("t", "used").alias("low_t"), F.max("used").alias("high_used"),
        F.max_by("t", "used").alias("high_t"), F.max("total_bytes").alias("total_bytes"),
        F.max_by("available_bytes", "t").alias("available_bytes"))
    n, st, su = F.col("n"), F.col("st"), F.col("su")
    return sums.withColumns({
        "mean_t": t0 + F.col("bin") * width + st / n, "mean_used": su / n,
        "sxx": F.greatest(F.col("stt") - st * st / n, F.lit(0.0)),
        "syy": F.greatest(F.col("suu") - su * su / n, F.lit(0.0)), "sxy": F.col("stu") - st * su / n})


def _cycles(F: ModuleType, Window, bins: DataFrame, min_drop_ratio: float) -> DataFrame:
    """The bins with their drops (one inside a bin: its highest observation before its lowest; one from the bin
    before), the cycle of each bin's highest observation and the volume's means, for the line's fit."""
    high_first = F.col("high_t") < F.col("low_t")
    least_drop = F.lit(float(min_drop_ratio)) * F.col("total_bytes")
    in_order = Window.partitionBy(*VOLUME).orderBy("bin")
    drops = bins.withColumns({
        "drop_inside": F.when(high_first & (F.col("high_used") - F.col("low_used") > least_drop), 1).otherwise(0),
        "drop_before": F.when(
            F.lag(F.when(high_first, F.col("low_used")).otherwise(F.col("high_used"))).over(in_order)
            - F.when(high_first, F.col("high_used")).otherwise(F.col("low_used")) > least_drop, 1).otherwise(0)})
    dropped, volume = F.col("drop_before") + F.col("drop_inside"), Window.partitionBy(*VOLUME)
    weighted = F.sum("n").over(volume)
    return drops.withColumns({
        "cycle": F.sum(dropped).over(in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow))
                 - F.col("drop_inside"),
        "volume_cycles": F.sum(dropped).over(volume),
        "line_x": F.sum(F.col("n") * F.col("mean_t")).over(volume) / weighted,
        "line_y": F.sum(F.col("n") * F.col("mean_used")).over(volume) / weighted})


def _volumes(F: ModuleType, cycles: DataFrame) -> DataFrame:
    """Per volume: the bins' sums of squares about the volume's means, by cycle (the line's, exactly), and the
    peaks: each complete cycle's top (the last cycle has not ended in a drop yet)."""
    n, dx, dy = F.col("n"), F.col("mean_t") - F.col("line_x"), F.col("mean_used") - F.col("line_y")
    per_cycle = cycles.groupBy(*VOLUME, "cycle").agg(
        F.max("volume_cycles").alias("cycles"), F.max("high_used").alias("top_used"),
        F.max_by("high_t", "high_used").alias("top_t"), F.sum("n").alias("n"), F.min("first_t").alias("first_t"),
        F.max("last_t").alias("last_t"), F.max_by("total_bytes", "last_t").alias("total_bytes"),
        F.max_by("available_bytes", "last_t").alias("available_bytes"), F.max("line_x").alias("line_x"),
        F.max("line_y").alias("line_y"), F.sum(F.col("sxx") + n * dx * dx).alias("sxx"),
        F.sum(F.col("syy") + n * dy * dy).alias("syy"), F.sum(F.col("sxy") + n * dx * dy).alias("sxy"))
    complete = F.col("cycle") < F.col("cycles")
    peaks = per_cycle.withColumns({"peak_used": F.when(complete, F.col("top_used")),
                                   "peak_t": F.when(complete, F.col("top_t"))})
    y, x = "peak_used", "peak_t"
    return peaks.groupBy(*VOLUME).agg(
        F.sum("n").alias("points"), F.max("cycles").alias("cycles"), F.min("first_t").alias("first_seconds"),
        F.max("last_t").alias("last_seconds"), F.max_by("total_bytes", "last_t").alias("total_bytes"),
        F.max_by("available_bytes", "last_t").alias("available_bytes"), F.sum("n").alias("line_n"),
        F.max("line_x").alias("line_x"), F.max("line_y").alias("line_y"), F.sum("sxx").alias("line_sxx"),
        F.sum("syy").alias("line_syy"), F.sum("sxy").alias("line_sxy"),
        F.when(F.sum("sxx") > 0, F.sum("sxy") / F.sum("sxx")).alias("line_slope"),
        F.regr_count(y, x).alias("peak_n"), F.regr_slope(y, x).alias("peak_slope"), F.avg(x).alias("peak_x"),
        F.avg(y).alias("peak_y"), F.regr_sxx(y, x).alias("peak_sxx"), F.regr_syy(y, x).alias("peak_syy"),
        F.regr_sxy(y, x).alias("peak_sxy"))


def _fitted(F: ModuleType, volumes: DataFrame, params: ForecastParams) -> DataFrame:
    """Each volume's method, its line (the peaks', else every observation's), the slope's band and whether it is
    filling."""
    method = (F.when(F.coalesce(F.col("peak_n"), F.lit(0)) >= params.min_cycles, "peaks")
              .when(F.col("line_slope").isNotNull(), "linear").otherwise("none"))
    chosen = volumes.withColumn("method", method)
    peaks = F.col("method") == "peaks"
    fitted = chosen.withColumns({
        **{name: F.when(peaks, F.col(f"peak_{part}")).otherwise(F.col(f"line_{part}"))
           for name, part in (("n", "n"), ("slope", "slope"), ("fit_x_seconds", "x"), ("fit_y_bytes", "y"),
                              ("sxx", "sxx"), ("syy", "syy"), ("sxy", "sxy"))},
        "limit_bytes": _limit_bytes(F, params)})
    n, sxx, sxy = F.col("n"), F.col("sxx"), F.col("sxy")
    # the slope's standard error: the residuals' variance over n - 2 degrees of freedom, over Sxx
    banded = fitted.withColumn("slope_se", F.when((n > 2) & (sxx > 0), F.sqrt(
        F.greatest(F.col("syy") - sxy * sxy / sxx, F.lit(0.0)) / (n - 2) / sxx)).otherwise(0.0))
    slope, spread = F.col("slope"), F.lit(float(params.sigmas)) * F.col("slope_se")
    return banded.withColumns({
        "growth_bytes_per_day": slope * DAY, "growth_low_bytes_per_day": (slope - spread) * DAY,
        "growth_high_bytes_per_day": (slope + spread) * DAY,
        "filling": F.coalesce((slope * DAY > F.lit(float(params.min_growth_ratio_per_day)) * F.col("total_bytes"))
                              & (slope - spread > 0), F.lit(False))})


def _dated(F: ModuleType, judged: DataFrame) -> DataFrame:
    """The dates of a filling volume: at the limit (on the line, and at either edge of the band) and full."""
    filling, fit_x, fit_y = F.col("filling"), F.col("fit_x_seconds"), F.col("fit_y_bytes")
    to_limit = F.col("total_bytes") - F.col("limit_bytes") - fit_y

    def limit_by(growth: str) -> Column:
        return fit_x + to_limit / (F.col(growth) / DAY)

    high, low = limit_by("growth_high_bytes_per_day"), limit_by("growth_low_bytes_per_day")
    return judged.withColumns({
        "limit_at_seconds": F.when(filling, fit_x + to_limit / F.col("slope")),
        "limit_earliest_seconds": F.when(filling, F.least(high, low)),
        "limit_latest_seconds": F.when(filling, F.greatest(high, low)),
        "full_at_seconds": F.when(filling, fit_x + (F.col("total_bytes") - fit_y) / F.col("slope"))})


def _limit_bytes(F: ModuleType, params: ForecastParams) -> Column:
    """The available bytes at the limit, per volume: the rule's (storage_rule.LIMIT_BYTES), or 0 without one."""
    if params.min_available_bytes is None and params.min_available_ratio is None:
        return F.lit(0.0)
    limit = StorageLimit(params.min_available_bytes, params.min_available_ratio)
    return storage_rule.LIMIT_BYTES.inline(F, storage_rule.limit_columns(F, limit.as_params()))
