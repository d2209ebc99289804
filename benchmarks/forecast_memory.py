"""The aggregator's capacity forecast refreshed again and again (aggregator.metrics.port: hourly, for months): the
memory of its driver as the refreshes add up.

A small generated history (history_generator.py: 6 volumes over 30 days every 10 minutes, as the aggregator writes
it), then spark_jobs.capacity_metrics.CapacityForecast started as `quota-sidecar aggregate` starts it, in the
aggregator's session (session.aggregator_session: embedded, `local[1]`, its default heap), refreshing every
--every seconds instead of every hour. Sampled after the first forecast and after each quarter of them: the RSS
(psutil) of the driver's JVM (the child process that pyspark starts) and of this Python process, and the JVM's heap
in use just after a full GC (what piles up in the heap shows in the RSS late, if at all). The aggregator's Spark keeps
its last 100 SQL executions (spark.sql.ui.retainedExecutions, UI or not), 4 a forecast: the heap grows over the first
25 forecasts whatever the forecast does; what grows after them is the forecast's own.

    .venv/bin/python benchmarks/forecast_memory.py [--refreshes 400] [--every 0.1]
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import psutil

from common import MiB, LoadWatch, Result, print_result, provenance, table, this_command
import history_generator

TITLE = "Capacity forecast refreshed for months"
LIMIT_RATIO = 0.1


class Refreshes(logging.Handler):
    """Counts the forecasts made, from the line CapacityForecast logs for each."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if re.match(r"capacity forecast of \d+ volumes", record.getMessage()):
            with self.changed:
                self.count += 1
                self.changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.count >= count, timeout):
                raise TimeoutError(f"{self.count} forecasts made of {count} within {timeout:.0f}s")


def sample(spark, jvm: psutil.Process, refreshes: int, started: float) -> dict:
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    spark._jvm.java.lang.System.gc()
    return {"refreshes": refreshes, "seconds": time.monotonic() - started, "jvm_rss": jvm.memory_info().rss,
            "python_rss": psutil.Process().memory_info().rss,
            "heap_used": runtime.totalMemory() - runtime.freeMemory(),
            # what Spark keeps of the queries run (spark.sql.ui.retainedExecutions: 1,000), UI or not
            "executions": spark._jsparkSession.sharedState().statusStore().executionsCount()}


def run(refreshes: int = 400, every: float = 0.1, retained: int | None = None) -> Result:
    from quota_sidecar.common.vocabulary import StorageLimit
    from spark_jobs import capacity_metrics, session

    work = Path(tempfile.mkdtemp(prefix="bench-forecast-memory-"))
    volumes = history_generator.fleet(6, 2 * history_generator.GIB, timedelta(days=7))
    rows = history_generator.rows(volumes, 30, timedelta(minutes=10), 0.5)
    history_generator.write_parquet(rows, str(work / "history"))
    capacity_metrics.FORECAST_EVERY = timedelta(seconds=every)
    counted = Refreshes()
    logging.getLogger(capacity_metrics.__name__).addHandler(counted)
    logging.getLogger(capacity_metrics.__name__).setLevel(logging.INFO)
    with LoadWatch() as load:
        # --retained: what Spark's status store keeps of the jobs, stages, tasks and SQL executions run, set to
        # tell its growth (bounded by these: 100 each in the aggregator, 1,000 in Spark) from the forecast's
        kept = {} if retained is None else dict.fromkeys(session.STATUS_STORE_LIMITS, str(retained))
        spark = session.aggregator_session(None, "quota-sidecar-benchmark",
                                           settings={"spark.sql.session.timeZone": "UTC", **kept})
        try:
            [jvm] = [child for child in psutil.Process().children(recursive=True) if child.name() == "java"]
            forecast = capacity_metrics.CapacityForecast(str(work / "history"), StorageLimit(
                min_available_ratio=LIMIT_RATIO))
            started = time.monotonic()
            forecast.start(spark)
            samples = []
            for mark in (1, *(refreshes * quarter // 4 for quarter in (1, 2, 3, 4))):
                counted.wait_for(mark, timeout=max(600.0, 10.0 * refreshes))
                samples.append(sample(spark, jvm, counted.count, started))
                print(f"  after {samples[-1]['refreshes']} forecasts ({samples[-1]['seconds']:.0f} s): JVM "
                      f"{samples[-1]['jvm_rss'] / MiB:.0f} MiB, heap in use {samples[-1]['heap_used'] / MiB:.0f} MiB, "
                      f"Python {samples[-1]['python_rss'] / MiB:.0f} MiB, {samples[-1]['executions']} SQL executions "
                      "kept", flush=True)
            forecast.stop()
        finally:
            session.stop_sessions()
            shutil.rmtree(work, ignore_errors=True)
    first, half, last = samples[0], samples[2], samples[-1]
    per_refresh = (last["seconds"] - first["seconds"]) / max(last["refreshes"] - first["refreshes"], 1)
    rows_table = table(
        ["after forecasts", "driver JVM RSS", "JVM heap in use after a full GC", "Python RSS",
         "SQL executions Spark keeps"],
        [[str(s["refreshes"]), f"{s['jvm_rss'] / MiB:,.0f} MiB", f"{s['heap_used'] / MiB:,.0f} MiB",
          f"{s['python_rss'] / MiB:,.0f} MiB", f"{s['executions']:,}"] for s in samples])

    def change(key: str, since: dict) -> str:
        return f"{(last[key] - since[key]) / MiB:+,.0f} MiB"

    growth = (f"Over the second half ({half['refreshes']} to {last['refreshes']} forecasts): JVM RSS "
              f"{change('jvm_rss', half)}, heap in use {change('heap_used', half)}, Python {change('python_rss', half)}"
              f"; from the first forecast: {change('jvm_rss', first)}, {change('heap_used', first)}, "
              f"{change('python_rss', first)}. {per_refresh:.2f} s a forecast.")
    markdown = "\n\n".join([
        f"The capacity forecast (`CapacityForecast`, as `quota-sidecar aggregate` starts it) refreshed {refreshes} "
        f"times, every {every:g} s instead of every hour, over a generated history of {len(rows):,} rows "
        f"({len(volumes)} volumes, 30 days every 10 minutes, 7-day retention cycles), in the aggregator's session "
        "(embedded, `local[1]`, its default heap)" + ("" if retained is None else f"; Spark's status store "
        f"keeping {retained} jobs, stages, tasks a stage and SQL executions") + ".", rows_table, growth,
        provenance(this_command(), load)])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=400)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between forecasts (FORECAST_EVERY)")
    parser.add_argument("--retained", type=int, help="jobs, stages, tasks a stage and SQL executions Spark's status "
                        "store keeps (default: Spark's)")
    args = parser.parse_args()
    print_result(run(args.refreshes, args.every, args.retained))


if __name__ == "__main__":
    main()
