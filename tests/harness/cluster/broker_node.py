"""One broker of the local cluster (the lab: not installed): its ports and dirs, its server.properties in KRaft or
ZooKeeper mode, the java command line it runs with, and whether the cluster counts it as serving.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from kafka.protocol.metadata import MetadataRequest

from harness.cluster.ports import free_loopback_ports

ZOOKEEPER_CHROOT = "/kafka"

# A small, fast test cluster; the constructor's broker_properties override these.
TEST_BROKER_PROPERTIES = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # Segments and their indexes small enough for a filesystem of a few MiB; 1 MiB is Kafka 4's minimum.
    "log.segment.bytes": str(1 << 20),
    "log.index.size.max.bytes": str(64 << 10),
    "log.retention.check.interval.ms": "1000",
}
KRAFT_BROKER_PROPERTIES = TEST_BROKER_PROPERTIES | {
    # A restarted broker may register again only once the session of its previous run expired
    # (DUPLICATE_BROKER_REGISTRATION until then): keep the session short, the default is 9 s.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
}
ZOOKEEPER_BROKER_PROPERTIES = TEST_BROKER_PROPERTIES | {
    # Likewise for a broker's ZooKeeper registration; ZooKeeper grants at most 10 s (harness/cluster/zookeeper_server.py).
    "zookeeper.session.timeout.ms": "6000",
}

LOG4J2_CONFIG = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:quota_sidecar.log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


@dataclass
class BrokerNode:
    node_id: int
    plaintext_port: int
    sasl_port: int
    controller_port: int
    home: Path  # server.properties and the KRaft metadata log
    log_dirs: list[Path]
    host: str = "127.0.0.1"  # the address of every listener
    netns: str | None = None  # the network namespace the JVM runs in; None: this process's own
    secure_ports: dict[str, int] = field(default_factory=dict)  # SASL_SSL, SSL (secure_lab.py) -> port
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def metadata_dir(self) -> Path:
        return self.home / "metadata"


def lay_out_nodes(base_dir: Path, log_dir_counts: Mapping[int, int], controller_ids: Sequence[int],
                  controller_host: str, network_namespaces: Mapping[int, tuple[str, str]],
                  secure_listeners: Sequence[str]) -> tuple[dict[int, BrokerNode], dict[int, BrokerNode]]:
    """(brokers, controllers alone) under base_dir, each on free ports: a broker per log_dir_counts key."""
    ports = iter(free_loopback_ports((3 + len(secure_listeners)) * len(log_dir_counts) + len(controller_ids)))
    controllers = {node_id: BrokerNode(node_id, 0, 0, next(ports), base_dir / f"controller-{node_id}",
                                       [base_dir / f"controller-{node_id}" / "data-0"], host=controller_host)
                   for node_id in controller_ids}
    brokers = {}
    for broker_id, count in sorted(log_dir_counts.items()):
        home = base_dir / f"broker-{broker_id}"
        brokers[broker_id] = BrokerNode(broker_id, next(ports), next(ports), next(ports), home,
                                        [home / f"data-{index}" for index in range(count)],
                                        secure_ports={name: next(ports) for name in secure_listeners})
        if broker_id in network_namespaces:
            # Ports free on loopback here are free in a namespace of the caller's too: nothing else runs there.
            brokers[broker_id].netns, brokers[broker_id].host = network_namespaces[broker_id]
    return brokers, controllers


def server_properties(node: BrokerNode, nodes: Sequence[BrokerNode], users: Mapping[str, str],
                      zookeeper_connect: str | None, overrides: Mapping[str, str],
                      controllers: Sequence[BrokerNode] = ()) -> dict[str, str]:
    """The node's server.properties: KRaft combined mode with the nodes as voters, a broker alone with
    `controllers` as voters when they are given, or ZooKeeper mode when zookeeper_connect is given; `overrides`
    last."""
    client_listeners = ",".join(f"{name}://{node.host}:{port}" for name, port in (
        ("PLAINTEXT", node.plaintext_port), ("SASL_PLAINTEXT", node.sasl_port), *node.secure_ports.items()))
    protocols = ",".join(f"{name}:{name}" for name in ("PLAINTEXT", "SASL_PLAINTEXT", *node.secure_ports))
    jaas_users = " ".join(f'user_{user}="{password}"' for user, password in users.items())
    common = {
        "advertised.listeners": client_listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {jaas_users};",
        "log.dirs": ",".join(str(path) for path in node.log_dirs),
    }
    if zookeeper_connect is not None:
        return common | {
            "broker.id": str(node.node_id),
            "zookeeper.connect": zookeeper_connect,
            "listeners": client_listeners,
            "listener.security.protocol.map": protocols,
        } | dict(overrides)
    kraft = {"node.id": str(node.node_id), "controller.listener.names": "CONTROLLER",
             "controller.quorum.voters": _voters(controllers or nodes), "metadata.log.dir": str(node.metadata_dir),
             "listener.security.protocol.map": f"{protocols},CONTROLLER:PLAINTEXT"}
    if controllers:
        return common | kraft | {"process.roles": "broker", "listeners": client_listeners} | dict(overrides)
    return common | kraft | {
        "process.roles": "broker,controller",
        "listeners": f"{client_listeners},CONTROLLER://{node.host}:{node.controller_port}",
    } | dict(overrides)


def controller_properties(node: BrokerNode, controllers: Sequence[BrokerNode],
                          overrides: Mapping[str, str]) -> dict[str, str]:
    """A KRaft controller alone (the brokers' voters): its CONTROLLER listener only. `overrides` are the
    brokers' (a controller ignores a broker's keys; it holds broker.session.timeout.ms)."""
    return {"node.id": str(node.node_id), "process.roles": "controller",
            "controller.quorum.voters": _voters(controllers), "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://{node.host}:{node.controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": ",".join(str(path) for path in node.log_dirs), "metadata.log.dir": str(node.metadata_dir),
            } | dict(overrides)


def _voters(nodes: Sequence[BrokerNode]) -> str:
    return ",".join(f"{node.node_id}@{node.host}:{node.controller_port}" for node in nodes)


def properties_text(properties: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def java_command(jvm_options: Sequence[str], classpath: str, base_dir: Path, zookeeper_mode: bool,
                 log_file: Path) -> list[str]:
    """`java` with the options, the logging configuration under base_dir and the classpath; the class comes next."""
    logging_configuration = (
        f"-Dlog4j.configuration=file:{base_dir / 'log4j.properties'}" if zookeeper_mode  # Kafka 3.x: reload4j
        else f"-Dlog4j2.configurationFile={base_dir / 'log4j2.properties'}"
    )
    return [
        "java", *jvm_options, logging_configuration,
        f"-Dquota_sidecar.log_file={log_file}",
        "-cp", classpath,
    ]


def serving_broker_ids(listeners: Mapping[int, Sequence[str]], zookeeper_mode: bool) -> set[int]:
    """The brokers the cluster counts as serving whose every client listener (node id -> addresses) accepts a
    connection: a ZooKeeper-mode broker is registered, and listed in Metadata, before its listeners accept (a test's
    first request then met ECONNREFUSED)."""
    # Probing the ports first spares the logs kafka-python's errors about refused connections.
    listening = {node_id for node_id, addresses in listeners.items() if all(map(_listens, addresses))}
    if not listening:
        return set()
    try:
        with KafkaAdminClient(
            bootstrap_servers=[listeners[node_id][0] for node_id in sorted(listening)], bootstrap_timeout_ms=5000,
            request_timeout_ms=5000
        ) as admin:
            if zookeeper_mode:
                # ZooKeeper-era brokers know no fencing; Metadata lists the registered ones. (kafka-python's
                # describe_cluster fails on DescribeCluster v0, which Kafka 3.2 answers.)
                response = admin._manager.run(admin._manager.send, MetadataRequest(topics=[]))
                return {broker.node_id for broker in response.brokers} & listening
            brokers = admin.describe_cluster()["brokers"]
    except KafkaError:
        return set()
    return {broker["broker_id"] for broker in brokers if not broker["is_fenced"]} & listening


def _listens(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True
