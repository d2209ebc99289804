"""Spark tests: the rules on tiny inline DataFrames in one embedded session, shared by every module.

No module stops it: each test finds it running whatever ran before, and it stops when the tests end.
"""
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from spark_jobs.session import get_session, stop_sessions

SMALL_CSV = Path(__file__).resolve().parents[1] / "data" / "history-small.csv"


@pytest.fixture(scope="session")
def spark():
    yield get_session()
    stop_sessions()


@pytest.fixture(scope="session")
def small_history(tmp_path_factory) -> str:
    """The committed small history (tests/spark/test_report.py says what it holds) as one Parquet file, not
    partitioned, its times a UTC timestamp: as another tool writes it."""
    table = pa_csv.read_csv(SMALL_CSV, convert_options=pa_csv.ConvertOptions(column_types={
        "broker": pa.int32(), "observed_at": pa.timestamp("us", tz="UTC"), "total_bytes": pa.int64(),
        "available_bytes": pa.int64()}))
    path = tmp_path_factory.mktemp("small") / "history.parquet"
    pq.write_table(table, path)
    return str(path)
