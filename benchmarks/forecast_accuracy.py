"""How close the capacity report's full date comes to the truth, against Prometheus' predict_linear over the
last 6 h and 24 h (kubernetes-mixin's KubePersistentVolumeFillingUp uses 6 h), on the generator's sawtooths.

For each volume of ``history_generator.fleet`` and each history end (one a day across a retention cycle, so that
the end falls anywhere in the sawtooth), three predictions of the moment the filesystem is full:

- the report's (``spark_jobs.forecast``, one Spark job for all ends: each end is a cluster of its own);
- predict_linear over the last 6 h and over the last 24 h: the least-squares line of the available bytes,
  extrapolated to 0 (never, when the line rises);

against the true moment (``Sawtooth.first_reaching``). Errors are in days; "says never" counts the predictions
of "not filling" for a volume that fills, or of a date for one that never does (a false alarm).

    .venv/bin/python benchmarks/forecast_accuracy.py [--days 56] [--ends 7] [--jitter 0.1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from history_generator import GIB, fleet, rows  # noqa: E402

DAY = 86400.0


def predict_linear(points: list[tuple[float, float]], window_seconds: float) -> float | None:
    """When the least-squares line of the available bytes of the last `window_seconds` reaches 0 (epoch seconds),
    or None when it does not fall."""
    end = points[-1][0]
    recent = [(t, a) for t, a in points if t >= end - window_seconds]
    mean_t = statistics.fmean(t for t, _ in recent)
    mean_a = statistics.fmean(a for _, a in recent)
    sxx = sum((t - mean_t) ** 2 for t, _ in recent)
    slope = sum((t - mean_t) * (a - mean_a) for t, a in recent) / sxx
    if slope >= 0:
        return None
    return mean_t - mean_a / slope


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=56, help="history before the first end")
    parser.add_argument("--ends", type=int, default=7, help="history ends, a day apart")
    parser.add_argument("--volumes", type=int, default=6)
    parser.add_argument("--jitter", type=float, default=0.1)
    parser.add_argument("--interval", type=float, default=10, help="minutes between observations")
    args = parser.parse_args(argv)

    from spark_jobs import forecast
    from spark_jobs.session import get_session, stop_sessions

    volumes = fleet(args.volumes, 2 * GIB, timedelta(days=7), jitter=args.jitter)
    interval = timedelta(minutes=args.interval)
    histories = {end: rows(volumes, args.days + end, interval, noise_ratio=0.5) for end in range(args.ends)}
    spark = get_session(settings={"spark.sql.session.timeZone": "UTC"})
    try:
        frame = spark.createDataFrame(
            [(f"{row['cluster']}@{end}", row["broker"], row["log_dir"], row["observed_at"], row["total_bytes"],
              row["available_bytes"]) for end, history in histories.items() for row in history],
            "cluster string, broker int, log_dir string, observed_at timestamp, total_bytes bigint, "
            "available_bytes bigint")
        predicted = {(row["cluster"], row["broker"]): row["full_at_seconds"]
                     for row in forecast.transform(frame, forecast.ForecastParams()).collect()}
    finally:
        stop_sessions()

    errors: dict[str, list[float]] = {"report": [], "predict_linear 6h": [], "predict_linear 24h": []}
    # the error over the time left to the true date: the target is within ±10 %
    relative: dict[str, list[float]] = {method: [] for method in errors}
    wrong_never: dict[str, int] = dict.fromkeys(errors, 0)
    false_alarms: dict[str, int] = dict.fromkeys(errors, 0)
    horizons = []
    for end, history in histories.items():
        for cluster, broker, log_dir, tooth in volumes:
            points = [(row["observed_at"].timestamp(), row["available_bytes"]) for row in history
                      if (row["cluster"], row["broker"]) == (cluster, broker)]
            truth = None if tooth.growth_bytes_per_day <= 0 else tooth.first_reaching(tooth.total_bytes).timestamp()
            guesses = {"report": predicted[(f"{cluster}@{end}", broker)],
                       "predict_linear 6h": predict_linear(points, 6 * 3600),
                       "predict_linear 24h": predict_linear(points, 24 * 3600)}
            if truth is not None:
                horizons.append((truth - points[-1][0]) / DAY)
            for method, guess in guesses.items():
                if truth is None:
                    false_alarms[method] += guess is not None
                elif guess is None:
                    wrong_never[method] += 1
                else:
                    errors[method].append((guess - truth) / DAY)
                    relative[method].append((guess - truth) / (truth - points[-1][0]))

    fills = sum(1 for *_, tooth in volumes if tooth.growth_bytes_per_day > 0)
    print(f"{len(volumes)} volumes ({fills} filling), {args.ends} history ends of "
          f"{args.days:g}..{args.days + args.ends - 1:g}"
          f" days, every {args.interval:g} min, cycle P7D, jitter {args.jitter:g}; the true full date "
          f"{min(horizons):.0f} to {max(horizons):.0f} days after the history's end\n")
    print("| prediction of the full date | within ±10 % of the time left | median abs error (days) | worst (days) | "
          "median signed (days) | filling said never | false alarms (not filling) |")
    print("|---|---|---|---|---|---|---|")
    for method, values in errors.items():
        absolute = [abs(value) for value in values]
        within = sum(1 for value in relative[method] if abs(value) <= 0.1)
        print(f"| {method} | {within}/{fills * args.ends} | {statistics.median(absolute):.1f} | {max(absolute):.1f} | "
              f"{statistics.median(values):+.1f} | {wrong_never[method]}/{fills * args.ends} | "
              f"{false_alarms[method]}/{(len(volumes) - fills) * args.ends} |")


if __name__ == "__main__":
    main()
