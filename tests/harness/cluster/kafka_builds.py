"""Which Kafka the local cluster runs (the lab: not installed): the classpaths `make kafka` resolves, the
version matrix as LocalKafkaCluster arguments, and the JVM options of every broker and tool.
"""

from __future__ import annotations

from pathlib import Path

_BUILD = Path(__file__).resolve().parents[3] / "build"
DEFAULT_CLASSPATH_FILE = _BUILD / "kafka.classpath"
ZOOKEEPER_CLASSPATH_FILE = _BUILD / "kafka-zookeeper.classpath"  # Kafka 3.9 and its ZooKeeper server
KAFKA_3_2_CLASSPATH_FILE = _BUILD / "kafka-3.2.classpath"  # ZooKeeper mode only; its ZooKeeper is 3.6

# The version matrix, as constructor arguments: Kafka 4.4 in KRaft mode (pom.xml), Kafka 3.9 in ZooKeeper
# mode (pom-zookeeper.xml). Tests parametrized over it run on both.
GENERATIONS = {"kraft-4.4": {}, "zookeeper-3.9": {"zookeeper": True}}
# Kafka 3.2.3, the newest before KIP-827 (DescribeLogDirs without sizes) that runs on Java 17, and its name as
# a test parameter.
BEFORE_KIP_827 = {"zookeeper": True, "classpath_file": KAFKA_3_2_CLASSPATH_FILE}
BEFORE_KIP_827_NAME = "zookeeper-3.2"

# Light and quick to start on a 2-core machine: a small serial-GC heap, and only the C1 compiler,
# which roughly halves the CPU a broker burns while warming up.
DEFAULT_JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


class LocalClusterError(Exception):
    """The local cluster could not be set up, started or stopped; the message says why."""


def read_classpath(classpath_file: Path) -> str:
    try:
        return classpath_file.read_text().strip()
    except FileNotFoundError:
        raise LocalClusterError(f"no Kafka classpath at {classpath_file}: run `make kafka` first") from None
