"""Unit tests: no JVM, no cluster, no Spark; each runs in milliseconds."""

from datetime import timedelta

import pytest

import builders


@pytest.fixture
def a_snapshot():
    """a_snapshot(replication=False, **changes) -> builders.snapshot(...)."""
    return builders.snapshot


@pytest.fixture
def later():
    return builders.AT + timedelta(seconds=30)
