"""The aggregator's endpoint (aggregator.metrics.port): the forecast of the committed small history
(tests/spark/test_report.py says what it holds) as Prometheus gauges, scraped over HTTP as Prometheus does."""
import logging
import subprocess
import sys
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from harness.waiting import eventually

from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import capacity_metrics

MB = 1_000_000
SCRAPED_AT = datetime(2026, 11, 10, tzinfo=timezone.utc).timestamp()  # a day after the history's newest row
QUOTA_SIDECAR = str(Path(sys.executable).with_name("quota-sidecar"))


def scrape(port: int) -> dict:
    """(metric name, (cluster, broker, log dir)) -> value; (name, ()) for a metric without labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sample.labels.get(label) for label in ("cluster", "broker_id", "log_dir")
                                if label in sample.labels)): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_each_volumes_days_to_the_limit_are_scraped_from_the_forecast_of_the_history(spark, small_history):
    forecast = capacity_metrics.CapacityForecast(small_history, StorageLimit(min_available_bytes=100 * MB),
                                                 clock=lambda: SCRAPED_AT)
    port = capacity_metrics.serve(forecast, "127.0.0.1", 0)
    assert scrape(port)[("quota_sidecar_capacity_forecast_timestamp_seconds", ())] == 0.0  # none made yet

    assert forecast.refresh(spark)
    scraped = scrape(port)

    days = {labels: value for (name, labels), value in scraped.items() if name == "quota_sidecar_volume_days_to_limit"}
    assert days == {("cluster-a", "1", "/data"): 12.5,  # the limit at day 21.5 of the small history
                    ("cluster-b", "1", "/data"): 61.0,  # at day 70
                    ("cluster-a", "2", "/data"): float("inf")}  # retention keeps it flat: not filling
    assert scraped[("quota_sidecar_volume_growth_bytes_per_day", ("cluster-a", "1", "/data"))] == 25 * MB
    assert scraped[("quota_sidecar_capacity_forecast_timestamp_seconds", ())] == SCRAPED_AT
    assert scraped[("quota_sidecar_capacity_forecast_failures_total", ())] == 0


def test_refreshes_reuse_one_session_and_leave_no_temporary_view_behind(spark, small_history, monkeypatch, caplog):
    """The aggregator refreshes its forecast for months: a session or a view made at each refresh would pile up.
    Spied on, not faked: SparkSession.newSession still makes the session it is asked for."""
    made = []
    new_session = SparkSession.newSession
    monkeypatch.setattr(SparkSession, "newSession", lambda self: made.append(new_session(self)) or made[-1])
    monkeypatch.setattr(capacity_metrics, "FORECAST_EVERY", timedelta(seconds=0.1))
    caplog.set_level(logging.INFO, logger=capacity_metrics.__name__)
    views_before = temporary_views(spark)  # the shared session's, of other tests

    def refreshed() -> int:
        return len([r for r in caplog.records if r.getMessage().startswith("capacity forecast of 3 volumes")])

    forecast = capacity_metrics.CapacityForecast(small_history, StorageLimit(min_available_bytes=100 * MB),
                                                 clock=lambda: SCRAPED_AT).start(spark)
    try:
        eventually(lambda: refreshed() >= 3, 300, "three forecasts")
    finally:
        forecast.stop(timeout=300)

    assert len(made) == 1, f"{len(made)} sessions made for {refreshed()} forecasts"
    assert [temporary_views(session) for session in made] == [set()]
    assert temporary_views(spark) == views_before


def temporary_views(session: SparkSession) -> set[str]:
    return {table.name for table in session.catalog.listTables() if table.isTemporary}


def test_a_history_not_written_yet_is_no_failure_and_one_that_cannot_be_read_is_counted(spark, tmp_path, caplog):
    absent = capacity_metrics.CapacityForecast(str(tmp_path / "history"), None)
    assert not absent.refresh(spark)
    (tmp_path / "not-parquet").mkdir()
    (tmp_path / "not-parquet" / "part-0.parquet").write_text("not Parquet")
    unreadable = capacity_metrics.CapacityForecast(str(tmp_path / "not-parquet"), None)
    assert not unreadable.refresh(spark)

    assert (absent.failures, absent.made_at) == (0, None)
    assert (unreadable.failures, unreadable.made_at) == (1, None)
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "capacity forecast of the history at" in warning and "\n" not in warning


def test_a_metrics_port_in_use_stops_the_aggregator_with_one_line_before_spark_starts(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([QUOTA_SIDECAR, "aggregate", "--set", "pipeline.bootstrap.servers=127.0.0.1:1",
                               "--set", f"history.location={tmp_path}", "--set", f"aggregator.metrics.port={port}"],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "aggregator.metrics.port" in line]
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line
