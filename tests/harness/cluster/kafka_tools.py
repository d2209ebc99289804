"""Kafka's own command-line tools, from the classpath `make kafka` resolves for them (pom-tools.xml): real
clients, not ours. kafka-tools is a version behind the brokers until Maven Central has kafka-tools 4.4."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidReplicationAssignmentError

from harness.class_archives import jvm_options_for
from harness.cluster.local_cluster import DEFAULT_CLASSPATH_FILE, DEFAULT_JVM_OPTIONS, ZOOKEEPER_CLASSPATH_FILE, read_classpath

TOOLS_CLASSPATH_FILE = DEFAULT_CLASSPATH_FILE.with_name("kafka-tools.classpath")
REASSIGN_PARTITIONS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"


# kafka-configs: in Kafka's core jar up to 3.9 (the ZooKeeper-mode brokers' classpath); neither 4.4.0's core nor
# kafka-tools 4.3.1 on Maven Central holds it. It talks to 4.4 brokers over the Admin API as any 3.9 client.
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def tool_command(main_class: str, *arguments: str, classpath_file: Path = TOOLS_CLASSPATH_FILE) -> list[str]:
    return ["java", *jvm_options_for(classpath_file, DEFAULT_JVM_OPTIONS), "-cp", read_classpath(classpath_file),
            main_class, *arguments]


def run_tool(main_class: str, *arguments: str, timeout: float = 120,
             classpath_file: Path = TOOLS_CLASSPATH_FILE) -> subprocess.CompletedProcess:
    """One tool run to its end, its output kept (stdout and stderr apart)."""
    return subprocess.run(tool_command(main_class, *arguments, classpath_file=classpath_file), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def kafka_configs(bootstrap_servers: str, *arguments: str) -> str:
    """`kafka-configs --bootstrap-server … <arguments>`, as an operator runs it; its output, or AssertionError
    with it when the tool fails."""
    done = run_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap_servers, *arguments,
                    classpath_file=ZOOKEEPER_CLASSPATH_FILE)
    assert done.returncode == 0, f"kafka-configs {' '.join(arguments)}: {done.stderr or done.stdout}"
    return done.stdout


def start_tool(main_class: str, *arguments: str, log_file: Path, niceness: int = 0) -> subprocess.Popen:
    """A tool started in the background, its output appended to `log_file`; `niceness` > 0 lets every other
    process of the machine have the CPU first (a client that, in production, runs on another machine)."""
    with open(log_file, "ab") as output:
        return subprocess.Popen(tool_command(main_class, *arguments), stdout=output, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=(lambda: os.nice(niceness)) if niceness else None)


def producer_performance(bootstrap_servers: str, topic: str, records: int, record_size: int, throughput: float,
                         log_file: Path, niceness: int = 0, reporting_interval_ms: int | None = None,
                         **producer_properties) -> subprocess.Popen:
    """Kafka's own producer benchmark on a JVM (`--throughput -1`: as fast as it can), with several requests
    in flight: a real client, which computes the batches' CRC-32C natively where kafka-python does it in
    pure Python at a few MB/s. It reports its acknowledgements every `reporting_interval_ms` (5 s unless
    given)."""
    properties = {"bootstrap.servers": bootstrap_servers, **producer_properties}
    interval = [] if reporting_interval_ms is None else ["--reporting-interval", str(reporting_interval_ms)]
    # A file, not --producer-props: that one refuses a value with '=' in it, as sasl.jaas.config has.
    config_file = log_file.with_suffix(".properties")
    config_file.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return start_tool(PRODUCER_PERFORMANCE, "--topic", topic, "--num-records", str(records),
                      "--record-size", str(record_size), "--throughput", f"{throughput:g}", *interval,
                      "--producer.config", str(config_file), log_file=log_file, niceness=niceness)


def acknowledged_so_far(output: str) -> int:
    """The records ProducerPerformance reported acknowledged: it prints a line per reporting interval with a
    completion, counting only successful sends (an interval cut short by a stop is not in it), and a total
    (with percentiles) when it ends."""
    windows = [line for line in output.splitlines() if "records sent, " in line]
    totals = [line for line in windows if " 50th" in line]
    if totals:
        return int(totals[-1].split()[0])
    return sum(int(line.split()[0]) for line in windows if re.match(r"\d+ records sent, ", line))


UNCORDON_SEEN_WITHIN = 10.0  # s: a few of the brokers' heartbeats


def fill(bootstrap_servers: str, topic: str, broker: int, mebibytes: int) -> None:
    """A new one-partition topic on `broker`, written `mebibytes` of random records of ~1 MiB (acks=all).

    A log dir uncordoned a moment ago still counts as cordoned at the controller until the broker's next heartbeat
    (broker.heartbeat.interval.ms, 2 s): the topic's creation is tried again for that long."""
    with KafkaAdminClient(bootstrap_servers=bootstrap_servers) as admin:
        deadline = time.monotonic() + UNCORDON_SEEN_WITHIN
        while True:
            try:
                admin.create_topics([NewTopic(topic, replica_assignments={0: [broker]})])
                break
            except InvalidReplicationAssignmentError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    for _ in range(mebibytes):
        producer.send(topic, os.urandom((1 << 20) - 1024))
    producer.flush(60)
    producer.close()


def read_back(bootstrap_servers: str, topic: str) -> tuple[int, int]:
    """(the records read from the start of every partition of `topic` up to its high watermark as now, the sum of
    those high watermarks): what producers saw acknowledged (acks=all) must be read, not only counted."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=10000,
                             fetch_max_bytes=8 << 20, max_partition_fetch_bytes=8 << 20)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        read = 0
        while any(consumer.position(partition) < ends[partition] for partition in partitions):
            batches = consumer.poll(timeout_ms=5000)
            if not batches:
                break
            read += sum(1 for partition, records in batches.items() for record in records
                        if record.offset < ends[partition])
        return read, sum(ends.values())
    finally:
        consumer.close()


def reassign_partitions(bootstrap_servers: str, targets: dict[tuple[str, int], list[int]],
                        *arguments: str, log_dirs: dict[tuple[str, int], list[str]] | None = None
                        ) -> subprocess.CompletedProcess:
    """`kafka-reassign-partitions --bootstrap-server … --reassignment-json-file F <arguments>` for `targets`
    ((topic, partition) -> replicas), e.g. ("--execute", "--throttle", "1000000") or ("--verify",); `log_dirs`:
    the dir of each replica, for a move between a broker's own dirs (JBOD)."""
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas,
                                          **({"log_dirs": log_dirs[(topic, partition)]}
                                             if log_dirs and (topic, partition) in log_dirs else {})}
                                         for (topic, partition), replicas in targets.items()]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="reassignment-") as plan_file:
        json.dump(plan, plan_file)
        plan_file.flush()
        return run_tool(REASSIGN_PARTITIONS, "--bootstrap-server", bootstrap_servers,
                        "--reassignment-json-file", plan_file.name, *arguments)


def active_controller(bootstrap_servers: str) -> int:
    """The node id of the KRaft quorum's leader: `kafka-metadata-quorum describe --status`'s LeaderId."""
    done = run_tool(METADATA_QUORUM, "--bootstrap-server", bootstrap_servers, "describe", "--status")
    found = re.search(r"^LeaderId:\s+(\d+)", done.stdout, re.MULTILINE)
    assert done.returncode == 0 and found, f"kafka-metadata-quorum: {done.stderr or done.stdout}"
    return int(found.group(1))


def elect_preferred_leader(bootstrap_servers: str, topic: str, partition: int) -> None:
    """`kafka-leader-election --election-type PREFERRED` for one partition: its first replica leads."""
    done = run_tool(LEADER_ELECTION, "--bootstrap-server", bootstrap_servers, "--election-type", "PREFERRED",
                    "--topic", topic, "--partition", str(partition))
    assert done.returncode == 0, f"kafka-leader-election: {done.stderr or done.stdout}"
