"""The same decisions through a local Spark Connect server as through the embedded session."""
import pathlib
import shutil
import socket
import time
from datetime import datetime, timezone

import psutil
import pytest

from quota_sidecar.common.vocabulary import StorageLimit
from spark_jobs import replication_rates, report, volume_violations
from harness.spark.connect_server import ConnectServer, ConnectServerError
from spark_jobs.session import SparkStartError, discard, for_large_data, get_session

pytestmark = pytest.mark.spark_connect

MB = 1_000_000


@pytest.fixture(scope="module")
def server():
    with ConnectServer() as server:
        watchdog = psutil.Process(server.pid)
        processes = [watchdog, *watchdog.children()]  # the JVM and the watchdog's stdin reader
        yield server
    assert psutil.wait_procs(processes, timeout=5)[1] == [], "processes outlived stop()"


@pytest.fixture(scope="module")
def sessions(spark, server):
    """The shared embedded session and one on the server; only the latter is stopped here."""
    connect = get_session(server.url)
    yield spark, connect
    connect.stop()  # before the server stops, so the session is released on it
    discard(server.url)


def volume(total, available, broker_id=1, log_dir="/data", at_seconds=0.0):
    return {"broker_id": broker_id, "log_dir": log_dir, "total_bytes": total, "available_bytes": available,
            "usable": True, "at_seconds": at_seconds}  # fmt: skip


VOLUME_CASES = {
    "bytes violation": ([volume(1000, 100), volume(1000, 500, broker_id=2)], {"min_available_bytes": 100}, 0.0),
    "ratio violation": ([volume(1000, 500), volume(0, 0, broker_id=2)], {"min_available_ratio": 0.1}, 0.0),
    "healthy": ([volume(1000, 500), volume(1000, 900, log_dir="/b")], {"min_available_ratio": 0.1}, 1.0),
    "filling into the soft zone, a predicted violation": (
        [volume(1000, 400, at_seconds=-10.0), volume(1000, 300), volume(1000, 250, log_dir="/b")],
        {"min_available_bytes": 100, "soft_min_available_bytes": 500, "lead_time_seconds": 20.0}, 0.0),
    "filling into the soft zone": (
        [volume(1000, 400, at_seconds=-10.0), volume(1000, 300), volume(1000, 250, log_dir="/b")],
        {"min_available_bytes": 100, "soft_min_available_bytes": 500}, 0.375),
}


@pytest.mark.parametrize("volumes, params, factor", VOLUME_CASES.values(), ids=VOLUME_CASES.keys())
def test_volume_decision_is_the_same_over_connect(sessions, volumes, params, factor):
    embedded, connect = sessions

    over_connect = volume_violations.decide(connect, volumes, params)

    assert over_connect == volume_violations.decide(embedded, volumes, params)
    assert over_connect[0] == factor
    assert len(over_connect[1]) == len({(v["broker_id"], v["log_dir"]) for v in volumes})


def test_replication_decision_is_the_same_over_connect(sessions):
    embedded, connect = sessions
    moving = [{"topic": "t", "partition": p, "broker": 1, "leader": 2, "bytes_behind": 1000, "lag_seconds": 5.0,
               "replica_growth_bytes": 200, "replica_growth_seconds": 10.0, "leader_growth_bytes": 100 * p,
               "leader_growth_seconds": 10.0} for p in (0, 1)]
    settings = {"capacity_bytes": 100 * MB, "max_percent": 80.0, "min_rate": 10 * MB,
                "change_threshold_percent": 0.0, "consecutive_failures": 0, "failure_threshold": 1,
                "stuck_after_seconds": 120.0, "keep_up_margin_percent": 20.0, "moving_replicas": moving}
    rows = [
        {"broker_id": 1, "role": "leader", "used_bytes_per_sec": 80e6, "applied_rate": 70 * MB},
        {"broker_id": 1, "role": "follower", "applied_rate": 50 * MB, "consecutive_failures": 2},
    ]

    over_connect = replication_rates.decide(connect, rows, settings)

    assert over_connect == replication_rates.decide(embedded, rows, settings)
    assert [(r["role"], r["rate"], r["reason"], r["keep_up_floor_bytes_per_sec"]) for r in over_connect["rates"]] == [
        ("follower", 10 * MB, "fail_safe", 12.0),
        ("leader", 72 * MB, "computed", None),
    ]
    assert [m["eta_seconds"] for m in over_connect["moves"]] == [50.0, 100.0]
    assert over_connect["destinations"] == [
        {"broker": 1, "replicas": 2, "sum_replica_lag_bytes": 2000, "eta_seconds": 100.0, "stuck": 0}]


def test_the_capacity_report_is_the_same_over_connect_and_leaves_no_view_on_the_server(sessions, small_history):
    """Its queries are DataFrames: over Connect they go within the plan, which the server analyses when a result
    is asked for."""
    embedded, connect = sessions
    limit, now = StorageLimit(min_available_bytes=100 * MB), datetime(2026, 11, 27, tzinfo=timezone.utc)

    over_connect = report.build(for_large_data(connect), small_history, None, limit, now)

    embedded_report = report.build(for_large_data(embedded), small_history, None, limit, now)
    assert report.as_json(over_connect) == report.as_json(embedded_report)
    assert [v["days_to_limit"] for v in over_connect["volumes"]] == [13.5, 62.0, None]  # test_report.py's by hand
    assert [len(chart["points"]) for chart in over_connect["charts"]] == \
        [len(chart["points"]) for chart in embedded_report["charts"]] != []
    assert [table.name for table in connect.catalog.listTables() if table.isTemporary] == []


def test_connect_session_is_cached_per_url(server, sessions):
    assert get_session(server.url) is sessions[1]


def test_unreachable_connect_url_fails_fast_naming_it():
    with socket.socket() as not_listening:
        not_listening.bind(("127.0.0.1", 0))  # bound but never listening: connections are refused
        url = f"sc://127.0.0.1:{not_listening.getsockname()[1]}"
        started = time.monotonic()

        with pytest.raises(SparkStartError, match=url):
            get_session(url)

    assert time.monotonic() - started < 30


def test_server_that_cannot_start_names_its_log():
    server = ConnectServer(master="no-such-master")

    with pytest.raises(ConnectServerError, match=server.log_path):
        server.start()

    assert server.pid is None
    assert "Master must" in pathlib.Path(server.log_path).read_text()  # Spark's own words on the cause
    shutil.rmtree(server.work_dir)
