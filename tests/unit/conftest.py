"""Unit tests: no JVM, no cluster, no Spark; each runs in milliseconds."""

import logging
from datetime import timedelta

import pytest

import builders
from quota_sidecar.cli import grammar


@pytest.fixture
def a_snapshot():
    """a_snapshot(replication=False, **changes) -> builders.snapshot(...)."""
    return builders.snapshot


@pytest.fixture
def later():
    return builders.AT + timedelta(seconds=30)


@pytest.fixture(autouse=True)
def library_logging_as_it_was():
    """A command run here sets the libraries' loggers (cli.main silences kafka-python's): put them back after each
    test, or a later test in the same process (test_admin's SASL test, in `pytest tests`) sees none of their records."""
    levels = {name: logging.getLogger(name).level for name in grammar.LIBRARY_LOGGERS}
    yield
    logging.captureWarnings(False)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
