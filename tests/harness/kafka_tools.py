"""Kafka's own command-line tools, from the classpath `make kafka` resolves for them (pom-tools.xml): real
clients, not ours. kafka-tools is a version behind the brokers until Maven Central has kafka-tools 4.4."""

from __future__ import annotations

import json
import subprocess
import tempfile

from harness.local_cluster import DEFAULT_CLASSPATH_FILE, DEFAULT_JVM_OPTIONS, read_classpath

TOOLS_CLASSPATH_FILE = DEFAULT_CLASSPATH_FILE.with_name("kafka-tools.classpath")
REASSIGN_PARTITIONS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"


def tool_command(main_class: str, *arguments: str) -> list[str]:
    return ["java", *DEFAULT_JVM_OPTIONS, "-cp", read_classpath(TOOLS_CLASSPATH_FILE), main_class, *arguments]


def run_tool(main_class: str, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """One tool run to its end, its output kept (stdout and stderr apart)."""
    return subprocess.run(tool_command(main_class, *arguments), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def reassign_partitions(bootstrap_servers: str, targets: dict[tuple[str, int], list[int]],
                        *arguments: str) -> subprocess.CompletedProcess:
    """`kafka-reassign-partitions --bootstrap-server … --reassignment-json-file F <arguments>` for `targets`
    ((topic, partition) -> replicas), e.g. ("--execute", "--throttle", "1000000") or ("--verify",)."""
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}
                                         for (topic, partition), replicas in targets.items()]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="reassignment-") as plan_file:
        json.dump(plan, plan_file)
        plan_file.flush()
        return run_tool(REASSIGN_PARTITIONS, "--bootstrap-server", bootstrap_servers,
                        "--reassignment-json-file", plan_file.name, *arguments)
