"""The rules run on no rows, in an embedded Spark and on a Spark Connect server alike, through the judges
`evaluate` and `plan` use (spark_jobs/judges.py)."""

import logging

import pytest

from spark_jobs.judges import on_spark
from spark_jobs import replication_rates, volume_violations
from harness.spark.connect_server import ConnectServer
from spark_jobs.session import discard, get_session

pytestmark = pytest.mark.spark_connect


@pytest.fixture(scope="module")
def connect_url(spark):  # the shared embedded session too: this module does not stop it
    with ConnectServer() as server:
        yield server.url
        get_session(server.url).stop()  # before the server stops, so the session is released on it
        discard(server.url)


@pytest.mark.parametrize("where", ["embedded", "connect"])
def test_the_decisions_run_on_no_rows(where, connect_url, caplog):
    url = "" if where == "embedded" else connect_url

    factor, rows = on_spark(url, volume_violations.decide)([], {"min_available_bytes": 1})
    rates = on_spark(url, replication_rates.decide)([])

    assert (factor, rows, rates) == (1.0, [], {"rates": [], "moves": [], "destinations": []})
    assert [record for record in caplog.records if record.levelno >= logging.WARNING] == []
