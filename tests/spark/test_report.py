"""`quota-sidecar report` on the committed small history (tests/data/history-small.csv, converted to Parquet as
another tool would write it): its numbers as worked out by hand, and its page opened in headless Chromium.

The small history, days 0 to 8 (November 1st to 9th) every 12 hours, 1 GB volumes, the limit 100 MB available:
- cluster-a broker 1: used 100 MB + 50 MB per 2-day cycle + 200 MB a day within it; retention drops at days
  2, 4, 6, 8: four peaks, 400, 450, 500, 550 MB at days 1.5, 3.5, 5.5, 7.5: 25 MB a day. The line
  400 MB + 25 MB × (t − 1.5 d) reaches 900 MB (the limit) at day 21.5 (November 22nd, 12:00Z), and 1 GB at day
  25.5; the newest observation is day 8: 13.5 days left.
- cluster-a broker 2: the same sawtooth without growth: peaks all 400 MB, not filling.
- cluster-b broker 1: 200 MB + 10 MB a day, never a drop: a line through every observation, the limit at day 70
  (January 10th), full at day 80, 62 days left.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs import history, report, report_page
from quota_sidecar.common.vocabulary import StorageLimit

REPO = Path(__file__).resolve().parents[2]
QUOTA_SIDECAR = str(Path(sys.executable).with_name("quota-sidecar"))
MB = 1_000_000
NOW = datetime(2026, 11, 27, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def reported(small_history, tmp_path_factory):
    """`quota-sidecar report` run once as a person runs it: (the JSON, the page's path, its stdout)."""
    out = tmp_path_factory.mktemp("report")
    done = subprocess.run([QUOTA_SIDECAR, "report", "--history", small_history, "--since", "ALL", "--out", str(out),
                           "--json", str(out / "report.json"),
                           "--set", "storage.per.volume.limit.min.available.bytes=100000000"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "report.json").read_text()), out / "capacity-report.html", done.stdout


def test_the_numbers_of_the_small_history_are_those_worked_out_by_hand(reported):
    numbers, _, _ = reported

    volumes = [{key: v[key] for key in ("cluster", "broker", "log_dir", "growth_bytes_per_day", "limit_at", "full_at",
                                        "days_to_limit", "method", "cycles", "available_bytes", "filling")}
               for v in numbers["volumes"]]
    assert volumes == [  # by days left, the volume that is not filling last
        {"cluster": "cluster-a", "broker": 1, "log_dir": "/data", "growth_bytes_per_day": 25 * MB,
         "limit_at": "2026-11-22T12:00:00Z", "full_at": "2026-11-26T12:00:00Z", "days_to_limit": 13.5,
         "method": "peaks", "cycles": 4, "available_bytes": 700 * MB, "filling": True},
        {"cluster": "cluster-b", "broker": 1, "log_dir": "/data", "growth_bytes_per_day": 10 * MB,
         "limit_at": "2027-01-10T00:00:00Z", "full_at": "2027-01-20T00:00:00Z", "days_to_limit": 62.0,
         "method": "linear", "cycles": 0, "available_bytes": 720 * MB, "filling": True},
        {"cluster": "cluster-a", "broker": 2, "log_dir": "/data", "growth_bytes_per_day": 0,
         "limit_at": None, "full_at": None, "days_to_limit": None, "method": "peaks", "cycles": 4,
         "available_bytes": 900 * MB, "filling": False},
    ]
    # the peaks lie on their line: no residual, no band; the steady climb likewise
    assert numbers["volumes"][0]["growth_band_bytes_per_day"] == [25 * MB, 25 * MB]
    assert numbers["volumes"][0]["limit_earliest"] == numbers["volumes"][0]["limit_latest"] == "2026-11-22T12:00:00Z"
    assert numbers["volumes"][0]["observed_at"] == "2026-11-09T00:00:00Z"
    assert numbers["clusters"] == [
        {"cluster": "cluster-a", "volumes": 2, "filling": 1, "total_bytes": 2000 * MB, "available_bytes": 1600 * MB,
         "growth_bytes_per_day": 25 * MB, "observed_at": "2026-11-09T00:00:00Z",
         "first_to_limit": {"broker": 1, "log_dir": "/data", "limit_at": "2026-11-22T12:00:00Z"},
         "headroom_days": 13.5},
        {"cluster": "cluster-b", "volumes": 1, "filling": 1, "total_bytes": 1000 * MB, "available_bytes": 720 * MB,
         "growth_bytes_per_day": 10 * MB, "observed_at": "2026-11-09T00:00:00Z",
         "first_to_limit": {"broker": 1, "log_dir": "/data", "limit_at": "2027-01-10T00:00:00Z"},
         "headroom_days": 62.0},
    ]
    assert numbers["limit"] == "available bytes <= 100000000"


def test_the_table_for_people_lists_the_volumes_by_days_left(reported):
    _, _, table = reported

    lines = table.splitlines()
    assert lines[0].split()[:2] == ["cluster", "broker"]
    assert [line.split()[:2] for line in lines[1:]] == [["cluster-a", "1"], ["cluster-b", "1"], ["cluster-a", "2"]]
    assert "13.5" in lines[1] and "not filling" in lines[3]


def test_the_page_opens_in_a_browser_with_a_chart_per_volume_at_risk(reported, tmp_path):
    _, page, _ = reported
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed: make spark installs it (as root: apt-get install -y chromium)")
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={tmp_path / 'profile'}"]

    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    shot = subprocess.run([*browser, f"--screenshot={tmp_path / 'report.png'}", "--window-size=1200,2000",
                           page.as_uri()], capture_output=True, text=True, timeout=120)

    assert dom.returncode == 0 and shot.returncode == 0, dom.stderr[-2000:] + shot.stderr[-2000:]
    # both volumes that reach the limit within 90 days get a chart; the flat one none
    assert len(re.findall(r"<svg\b", dom.stdout)) == 2
    assert "Cluster cluster-a" in dom.stdout and "Cluster cluster-b" in dom.stdout
    assert not [line for line in (dom.stderr + shot.stderr).splitlines() if "CONSOLE" in line]  # no script error
    assert (tmp_path / "report.png").stat().st_size > 10_000  # a page drawn, not a blank one
    assert os.path.getsize(page) < 2_000_000


def test_a_shorter_horizon_at_risk_charts_fewer_volumes_and_the_charts_points_are_thinned(
        spark, small_history, monkeypatch):
    monkeypatch.setattr(report, "CHART_POINTS", 4)

    built = report.build(spark, small_history, None, StorageLimit(min_available_bytes=100 * MB), NOW,
                         at_risk=timedelta(days=30))

    (chart,) = built["charts"]
    assert (chart["volume"]["cluster"], chart["volume"]["broker"]) == ("cluster-a", 1)
    assert len(chart["points"]) <= 2 * 5  # the lowest and highest of each bucket (the newest its own)
    assert min(available for _, available in chart["points"]) == 450 * MB  # the last peak survives
    assert "charts" not in report.as_json(built)


def test_since_keeps_the_history_s_last_days(spark, small_history):
    built = report.build(spark, small_history, timedelta(days=2), None, datetime(2026, 11, 9, tzinfo=timezone.utc))

    assert {v["observations"] for v in built["volumes"]} == {5}  # days 6 to 8, every 12 hours
    assert built["since"] == "2026-11-07T00:00:00Z"


def test_a_parquet_without_the_needed_columns_names_them(spark, tmp_path):
    pq.write_table(pa.table({"cluster": ["a"], "broker": [1], "observed_at": [NOW]}), tmp_path / "other.parquet")

    with pytest.raises(history.HistoryError) as error:
        history.read(spark, str(tmp_path / "other.parquet"))

    assert str(error.value) == (f"{tmp_path / 'other.parquet'}: the history has no column log_dir, total_bytes, "
                                "available_bytes (it needs cluster, broker, log_dir, observed_at, total_bytes, "
                                "available_bytes)")


@pytest.mark.parametrize("arguments, line", [
    (["--history", "/no/such/history"], "quota-sidecar: --history /no/such/history: no such file or directory"),
    (["--history", "/", "--since", "30 days"],
     "quota-sidecar: --since: '30 days': expected a duration longer than zero such as 30s, 5m, 2h, 30d, PT30S or "
     "P30D, or ALL"),
    ([], "quota-sidecar: no history: give --history PATH, or client.quota.callback.static.history.location in "
         "--config"),
    (["--history", "/", "--set", "history.retention=P0D"],
     "quota-sidecar: client.quota.callback.static.history.retention='P0D': expected a duration longer than zero "
     "such as 10s, 1m or ISO-8601 PT10S, PT1M (no months or years)"),
])
def test_bad_input_is_one_line_before_spark_starts(arguments, line):
    done = subprocess.run([QUOTA_SIDECAR, "report", *arguments], capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stderr.strip()) == (2, line)


def test_a_folder_without_parquet_is_one_line(spark, tmp_path):
    (tmp_path / "notes.txt").write_text("not a history")

    with pytest.raises(history.HistoryError) as error:
        history.read(spark, str(tmp_path))

    assert str(error.value).startswith(f"{tmp_path}: cannot be read as Parquet: ")
    assert "\n" not in str(error.value)


def test_a_history_older_than_since_makes_an_empty_report(spark, small_history):
    built = report.build(spark, small_history, timedelta(days=1), None, NOW)

    assert (built["clusters"], built["volumes"], built["charts"]) == ([], [], [])
    assert "No volume in the history." in report_page.html_page(built)
