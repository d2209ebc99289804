"""Spark tests: the rules on tiny inline DataFrames in one embedded session, shared by every module.

No module stops it: each test finds it running whatever ran before, and it stops when the tests end.
"""

import pytest

from spark_jobs.session import get_session, stop_sessions


@pytest.fixture(scope="session")
def spark():
    yield get_session()
    stop_sessions()
