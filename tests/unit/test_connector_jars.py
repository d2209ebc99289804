"""Which jars of Spark's Kafka connector the aggregator hands Spark (spark.jars): a checkout's resolved ones, or in
the image, where they are in pyspark's own jars, only those a standalone cluster's executors lack."""

import pytest

from spark_jobs import aggregator
from spark_jobs.aggregator import CannotAggregate, connector_jars

CONNECTOR = ["commons-pool2-2.12.1.jar", "kafka-clients-3.9.1.jar", "spark-sql-kafka-0-10_2.13-4.1.1.jar",
             "spark-token-provider-kafka-0-10_2.13-4.1.1.jar"]


@pytest.fixture
def image(tmp_path, monkeypatch):
    """As in the quota-sidecar-spark image: no build/spark-kafka.classpath, the connector in pyspark's jars."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in CONNECTOR + ["spark-core_2.13-4.1.1.jar", "zstd-jni-1.5.7-6.jar"]:
        (jars / name).write_bytes(b"")
    monkeypatch.setattr(aggregator, "CONNECTOR_CLASSPATH", str(tmp_path / "absent.classpath"))
    monkeypatch.setattr(aggregator, "spark_jars_dir", lambda: str(jars))
    return jars


def test_a_checkout_hands_spark_the_jars_make_setup_resolved(tmp_path, monkeypatch):
    listed = tmp_path / "spark-kafka.classpath"
    listed.write_text("/m2/a.jar:/m2/b.jar\n")
    monkeypatch.setattr(aggregator, "CONNECTOR_CLASSPATH", str(listed))

    assert connector_jars() == ["/m2/a.jar", "/m2/b.jar"]
    assert connector_jars("spark://master:7077") == ["/m2/a.jar", "/m2/b.jar"]


@pytest.mark.parametrize("spark_url", [None, "k8s://https://kubernetes.default.svc", "local[2]"])
def test_in_the_image_executors_of_the_same_image_need_no_jars_shipped(image, spark_url):
    assert connector_jars(spark_url) == []


def test_in_the_image_a_standalone_clusters_executors_get_the_connectors_jars_and_no_others(image):
    assert connector_jars("spark://master:7077") == [str(image / name) for name in CONNECTOR]


def test_without_the_connector_anywhere_the_aggregator_says_what_to_set(image):
    for name in CONNECTOR:
        (image / name).unlink()

    with pytest.raises(CannotAggregate, match="aggregator.kafka.jars"):
        connector_jars()
