"""Shared by every kind of test: Spark binds its driver to loopback, like the lab's Kafka cluster."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before any test imports pyspark
