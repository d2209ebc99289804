"""Shared by every kind of test: Spark binds its driver to loopback, like the lab's Kafka cluster."""

import os

from harness.class_archives import SPARK, archive_options

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before any test imports pyspark
# Spark's drivers (and the aggregators the tests start) map the classes `make class-archives` recorded.
if spark_archive := archive_options(SPARK):
    os.environ.setdefault("SPARK_SUBMIT_OPTS", " ".join(spark_archive))
