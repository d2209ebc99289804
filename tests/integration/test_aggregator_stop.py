"""The aggregator stopped with its Spark JVM, as a stop of its process group or of systemd's cgroup signals both:
it exits 0 without a traceback, though Spark's own shutdown hook stopped Spark before the aggregator's queries."""

from __future__ import annotations

import os
import signal

import pytest

from harness.spark.aggregator import Aggregator

pytestmark = pytest.mark.integration


def test_an_aggregator_signalled_with_its_jvm_stops_cleanly(make_kafka_cluster, tmp_path):
    cluster = make_kafka_cluster(brokers=1)
    aggregator = Aggregator(cluster.bootstrap_servers, tmp_path).start().wait_ready()

    os.killpg(aggregator.process.process.pid, signal.SIGTERM)

    assert aggregator.stop(None) == 0, aggregator.process.log_tail()
    assert "Traceback" not in aggregator.process.log_tail(400)
