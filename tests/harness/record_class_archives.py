"""Records the lab's class-data archives (class_archives.py): each JVM started once with
-XX:ArchiveClassesAtExit, doing what the tests make it do, its archive written when it exits cleanly.

    PYTHONPATH=tests python -m harness.record_class_archives kafka kafka-tools kafka-zookeeper kafka-3.2 spark

Brokers: broker 1 of a one-broker cluster started again with the option (its storage's format and a ZooKeeper
server beside it would otherwise write the same file), a topic written and read, then stopped cleanly. Tools:
ProducerPerformance, the tool the integration tests start most. Spark: an embedded session (spark_jobs.session)
running a batch job, Parquet and a streaming query. The archive appears only once complete.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from harness.class_archives import CLASS_ARCHIVES, SPARK, class_archive
from harness.cluster.kafka_tools import PRODUCER_PERFORMANCE, TOOLS_CLASSPATH_FILE, fill, read_back, tool_command
from harness.cluster.local_cluster import (DEFAULT_CLASSPATH_FILE, KAFKA_3_2_CLASSPATH_FILE, ZOOKEEPER_CLASSPATH_FILE,
                                           LocalKafkaCluster)

RECORDS = 20_000  # ProducerPerformance's: enough for its send path to be loaded whole


def record(name: str) -> None:
    """Record `name`'s archive (one of RECORDED), replacing the one there."""
    archive = class_archive(name)
    CLASS_ARCHIVES.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)  # a JVM must not map the archive it is recording
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    RECORDED[name](f"-XX:ArchiveClassesAtExit={partial}")
    if not partial.is_file():
        raise SystemExit(f"record_class_archives: the JVM recording {name} wrote no archive")
    partial.rename(archive)


def _broker(cluster_arguments: dict):
    def record_broker(option: str) -> None:
        with LocalKafkaCluster(brokers=1, **cluster_arguments) as cluster:
            cluster.stop_broker(1)
            cluster.start_broker(1, [option])
            _write_and_read(cluster.bootstrap_servers)
            cluster.stop_broker(1)  # SIGTERM: a clean exit, which writes the archive
    return record_broker


def _tools(option: str) -> None:
    with LocalKafkaCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as scratch:
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("recorded", 1, 1)])
        command = tool_command(PRODUCER_PERFORMANCE, "--topic", "recorded", "--num-records", str(RECORDS),
                               "--record-size", "1000", "--throughput", "-1", "--producer-props",
                               f"bootstrap.servers={cluster.bootstrap_servers}")
        log = Path(scratch) / "producer-performance.log"
        with open(log, "wb") as output:
            done = subprocess.run([command[0], option, *command[1:]], stdout=output, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"record_class_archives: ProducerPerformance failed:\n{log.read_text()[-2000:]}")


# Run in a Python of its own, whose driver JVM exits when its stdin closes.
_SPARK_WORKLOAD = textwrap.dedent("""
    import sys, tempfile
    from pyspark.sql import functions as F
    from spark_jobs.session import get_session
    spark = get_session()
    jvm = spark.sparkContext._gateway.proc
    frame = spark.range(0, 100_000).withColumn("volume", F.col("id") % 7).withColumn("at", F.current_timestamp())
    frame.groupBy("volume").agg(F.max("id"), F.avg("id")).collect()
    with tempfile.TemporaryDirectory() as scratch:
        frame.write.partitionBy("volume").parquet(scratch + "/history")
        spark.read.parquet(scratch + "/history").where("volume = 3").count()
        query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
                 .withWatermark("timestamp", "10 seconds").groupBy(F.window("timestamp", "5 seconds")).count()
                 .writeStream.format("memory").queryName("recorded").outputMode("update")
                 .option("checkpointLocation", scratch + "/checkpoint").start())
        query.processAllAvailable()
        query.stop()
    spark.stop()
    jvm.stdin.close()
    sys.exit(jvm.wait())
""")


def _spark(option: str) -> None:
    environment = {**os.environ, "SPARK_SUBMIT_OPTS": option, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-c", _SPARK_WORKLOAD], env=environment, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"record_class_archives: the Spark workload failed (exit code {done.returncode})")


def _write_and_read(bootstrap_servers: str) -> None:
    fill(bootstrap_servers, "recorded", 1, 4)
    read_back(bootstrap_servers, "recorded")
    with KafkaAdminClient(bootstrap_servers=bootstrap_servers) as admin:
        admin.describe_log_dirs()


RECORDED = {
    DEFAULT_CLASSPATH_FILE.stem: _broker({}),
    TOOLS_CLASSPATH_FILE.stem: _tools,
    ZOOKEEPER_CLASSPATH_FILE.stem: _broker({"zookeeper": True}),
    KAFKA_3_2_CLASSPATH_FILE.stem: _broker({"zookeeper": True, "classpath_file": KAFKA_3_2_CLASSPATH_FILE}),
    SPARK: _spark,
}


def main(names: list[str]) -> None:
    unknown = [name for name in names if name not in RECORDED]
    if unknown or not names:
        raise SystemExit(f"record_class_archives: unknown archive {', '.join(unknown) or '(none given)'}; "
                         f"one of {', '.join(RECORDED)}")
    for name in names:
        record(name)


if __name__ == "__main__":
    main(sys.argv[1:])
