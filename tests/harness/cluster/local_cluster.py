"""A real local Kafka cluster for the tests, the demo and the benchmarks (the lab: not installed).

Every node is one `kafka.Kafka` JVM in KRaft combined mode (broker and controller), started from the
jars `pom.xml` resolves (`make kafka` writes their classpath to build/kafka.classpath), or with
`controllers=N` a broker alone beside N controllers alone (node ids 101, 102…), as production runs them. The
voters form a static controller quorum; the nodes listen on free loopback ports:

- PLAINTEXT: tests and inter-broker traffic;
- SASL_PLAINTEXT with SASL/PLAIN, for the users given to the constructor;
- CONTROLLER: the KRaft quorum.

With zookeeper=True the cluster is ZooKeeper-era instead: one ZooKeeper server
(harness/cluster/zookeeper_server.py) and brokers in ZooKeeper mode under the chroot /kafka, started from
build/kafka-zookeeper.classpath (Kafka 3.9, the last release with ZooKeeper) or, with
classpath_file=KAFKA_3_2_CLASSPATH_FILE, Kafka 3.2 (before KIP-827: DescribeLogDirs without sizes). Same
listeners (no CONTROLLER), JBOD and small filesystems.

There is no authorizer (every principal may do everything) unless `security` (secure_lab.py) brings the
production one, with SASL_SSL and mutual TLS. Any log dir can sit on a small
size-limited filesystem (tmpfs, else a loop-mounted ext4 image) so that tests can fill a disk for real.
A broker can run inside a network namespace the caller made (`ip netns exec`), listening on that
namespace's address instead of loopback, so that tests can put each broker behind a link of its own.

    with LocalKafkaCluster(brokers=3, small_log_dirs={(3, 0): 64 << 20}) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)

Beside this module: kafka_builds.py (which Kafka: classpaths, the version matrix, JVM options), broker_node.py
(one broker's server.properties, command line and serving check), small_filesystem.py (tmpfs or ext4 log dirs),
exit_cleanup.py (clusters stopped when Python exits). Callers import their public names from here (__all__).
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from harness.class_archives import jvm_options_for
from harness.cluster import exit_cleanup
from harness.cluster.broker_node import (KRAFT_BROKER_PROPERTIES, LOG4J2_CONFIG, ZOOKEEPER_BROKER_PROPERTIES,
                                 ZOOKEEPER_CHROOT, BrokerNode, controller_properties, java_command, lay_out_nodes,
                                 properties_text, serving_broker_ids, server_properties)
from harness.cluster.cluster_arguments import check_arguments
from harness.cluster.kafka_builds import (BEFORE_KIP_827, BEFORE_KIP_827_NAME, DEFAULT_CLASSPATH_FILE, DEFAULT_JVM_OPTIONS,
                                  GENERATIONS, KAFKA_3_2_CLASSPATH_FILE, ZOOKEEPER_CLASSPATH_FILE, LocalClusterError,
                                  read_classpath)
from harness.cluster.secure_lab import SECURE_LISTENERS, SecureLab
from harness.cluster.small_filesystem import SmallFilesystemUnavailable, mount_small_filesystem, unmount
from harness.cluster.zookeeper_server import LOG4J_CONFIG as LOG4J1_CONFIG
from harness.cluster.zookeeper_server import LocalZooKeeper, tail

# What callers import from here, wherever it is defined.
__all__ = ["BEFORE_KIP_827", "BEFORE_KIP_827_NAME", "DEFAULT_CLASSPATH_FILE", "DEFAULT_JVM_OPTIONS", "DEFAULT_USERS",
           "GENERATIONS", "KAFKA_3_2_CLASSPATH_FILE", "ZOOKEEPER_CLASSPATH_FILE", "LocalClusterError",
           "LocalKafkaCluster", "SmallFilesystemUnavailable", "read_classpath"]

log = logging.getLogger(__name__)

STOP_ALL_GRACE = 10.0  # seconds
CONTROLLER_IDS_AFTER = 100  # controllers alone are 101, 102…: apart from the brokers' 1, 2…

DEFAULT_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


class LocalKafkaCluster:
    """`brokers` KRaft nodes with ids 1..brokers; a context manager that starts and stops them.

    log_dirs: {broker_id: number of log dirs} (JBOD), 1 for brokers not named.
    small_log_dirs: {(broker_id, dir_index): size in bytes}: those log dirs get a filesystem of
        their own of that size. The metadata log always stays on the normal disk, so a full data
        dir does not take the KRaft quorum down with it.
    network_namespaces: {broker_id: (namespace, ip)}: that broker's JVM runs under `ip netns exec
        <namespace>` and listens (clients, inter-broker, controller) on ip, which must be an address
        of that namespace that the other brokers and this process reach. The caller makes and
        removes the namespaces; brokers not named stay on 127.0.0.1 of this process's namespace.
    controllers: 0, every broker a voter too (combined mode); N, that many controllers alone, listening on
        controller_host (with brokers in network namespaces: an address they reach, such as the bridge's).
    zookeeper: a ZooKeeper server and brokers in ZooKeeper mode (Kafka 3.x) instead of KRaft nodes.
    base_dir: where the cluster lives, kept by stop(); by default a temporary dir that stop() removes.
    start_timeout: how long start(), stop_broker() and start_broker() wait for the brokers to settle.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        users: Mapping[str, str] | None = None,
        log_dirs: Mapping[int, int] | None = None,
        small_log_dirs: Mapping[tuple[int, int], int] | None = None,
        broker_properties: Mapping[str, str] | None = None,
        network_namespaces: Mapping[int, tuple[str, str]] | None = None,
        controllers: int = 0,
        controller_host: str = "127.0.0.1",
        zookeeper: bool = False,
        base_dir: str | os.PathLike | None = None,
        classpath_file: str | os.PathLike | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        security: SecureLab | None = None,
    ):
        self.broker_ids = list(range(1, brokers + 1))
        self.controller_ids = [CONTROLLER_IDS_AFTER + index for index in range(1, controllers + 1)]
        self._controller_host = controller_host
        self.users = dict(DEFAULT_USERS if users is None else users)
        self._log_dir_counts = {broker_id: 1 for broker_id in self.broker_ids} | dict(log_dirs or {})
        self._small_log_dirs = dict(small_log_dirs or {})
        self.zookeeper_mode = zookeeper
        defaults = ZOOKEEPER_BROKER_PROPERTIES if zookeeper else KRAFT_BROKER_PROPERTIES
        self.security = security
        self._broker_properties = defaults | (security.broker_properties() if security else {}) | dict(
            broker_properties or {})
        self._network_namespaces = dict(network_namespaces or {})
        self._requested_base_dir = base_dir
        if classpath_file is None:
            classpath_file = ZOOKEEPER_CLASSPATH_FILE if zookeeper else DEFAULT_CLASSPATH_FILE
        self._classpath_file = Path(classpath_file)
        self._jvm_options = jvm_options_for(self._classpath_file, jvm_options)
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        check_arguments(self.broker_ids, self.controller_ids, self._log_dir_counts, self._small_log_dirs,
                        self._network_namespaces, self.users, bool(self.security), zookeeper)

        self.base_dir: Path | None = None
        self.cluster_id = _random_cluster_id()
        self._created_base_dir: Path | None = None  # removed by stop(); a base_dir given is kept
        self._classpath = ""
        self._nodes: dict[int, BrokerNode] = {}  # the brokers
        self._controllers: dict[int, BrokerNode] = {}  # the controllers alone, if any
        self.zookeeper: LocalZooKeeper | None = None  # in ZooKeeper mode; tests may stop and start it
        self._mounts: list[Path] = []
        self._started = False

    # -- what clients need -----------------------------------------------------------------------

    @property
    def broker_addresses(self) -> dict[int, str]:
        return {node_id: f"{node.host}:{node.plaintext_port}" for node_id, node in self._nodes.items()}

    @property
    def sasl_broker_addresses(self) -> dict[int, str]:
        return {node_id: f"{node.host}:{node.sasl_port}" for node_id, node in self._nodes.items()}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.broker_addresses.values())

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(self.sasl_broker_addresses.values())

    def secure_bootstrap_servers(self, listener: str = "SASL_SSL") -> str:
        """With `security`: the brokers' SASL_SSL (or SSL, mutual TLS) listeners."""
        return ",".join(f"{node.host}:{node.secure_ports[listener]}" for node in self._nodes.values())

    def sasl_client_config(self, user: str) -> dict:
        """kafka-python keyword arguments that connect as `user` over SASL_PLAINTEXT."""
        return {
            "bootstrap_servers": self.sasl_bootstrap_servers,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": self.users[user],
        }

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' zookeeper.connect: host:port and the chroot."""
        if self.zookeeper is None:
            raise LocalClusterError("a KRaft cluster has no ZooKeeper")
        return self.zookeeper.connect_string + ZOOKEEPER_CHROOT

    def log_dirs(self, broker_id: int) -> list[str]:
        return [str(path) for path in self._nodes[broker_id].log_dirs]

    # -- life cycle ------------------------------------------------------------------------------

    def __enter__(self) -> LocalKafkaCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> LocalKafkaCluster:
        """Lay out, format and start every node; return once all of them serve as brokers."""
        if self._started:
            raise LocalClusterError("a LocalKafkaCluster starts once; make a new one")
        self._started = True
        exit_cleanup.track(self)
        try:
            self._classpath = read_classpath(self._classpath_file)
            self._lay_out()
            if self.zookeeper is not None:
                self.zookeeper.start()
            else:
                self._format_storage()
            for node in [*self._controllers.values(), *self._nodes.values()]:
                self._launch(node)
            self._wait_for_serving_brokers(set(self.broker_ids))
        except BaseException:
            self.stop()
            raise
        log.info("Kafka cluster %s serving at %s (base dir %s)", self.cluster_id, self.bootstrap_servers, self.base_dir)
        return self

    def stop(self) -> None:
        """Stop every broker, unmount what was mounted, remove the base dir made; safe to repeat.

        In a base dir of its own, whose data goes with it, every node is killed at once: a clean shutdown would
        only cost its seconds. In a base dir the caller gave, kept, each shuts down cleanly, and one still in its
        clean shutdown after STOP_ALL_GRACE (all stopped at once, a KRaft broker may wait for controllers that are
        stopping too) is killed."""
        if self._created_base_dir is not None:
            for node in [*self._nodes.values(), *self._controllers.values()]:
                self._kill(node)
        self._stop_processes(list(self._nodes.values()), min(self._stop_timeout, STOP_ALL_GRACE))
        self._stop_processes(list(self._controllers.values()), min(self._stop_timeout, STOP_ALL_GRACE))
        if self.zookeeper is not None:
            self.zookeeper.stop()
        self._unmount_all()
        if self._created_base_dir is not None:
            shutil.rmtree(self._created_base_dir)
            self._created_base_dir = None
        exit_cleanup.forget(self)

    def stop_broker(self, broker_id: int) -> None:
        """Stop one broker, keeping its data; return once the others no longer count it as serving."""
        self._stop_processes([self._nodes[broker_id]])
        self._wait_for_serving_brokers(self._running_broker_ids())

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL one broker (or controller), as a crash or an OOM kill does (no clean shutdown, its data kept);
        start_broker starts it again, through log recovery."""
        self._kill(self._node(broker_id))

    def exited_brokers(self) -> set[int]:
        """The brokers and controllers started and not stopped here whose process has exited (a failed log dir
        stops a broker)."""
        return {broker_id for broker_id, node in {**self._nodes, **self._controllers}.items()
                if node.process is not None and node.process.poll() is not None}

    def signal_broker(self, broker_id: int, sig: int) -> None:
        """A signal to a running broker: SIGSTOP and SIGCONT make a long pause (a GC, a stalled disk)."""
        node = self._node(broker_id)
        if node.process is None:
            raise LocalClusterError(f"broker {broker_id} is not running")
        node.process.send_signal(sig)

    def start_broker(self, broker_id: int, extra_jvm_options: Sequence[str] = ()) -> None:
        """Start a broker (or controller) stopped by stop_broker() again, its JVM with `extra_jvm_options` too;
        return once the brokers serve."""
        node = self._node(broker_id)
        if node.process is not None:
            raise LocalClusterError(f"broker {broker_id} is running already")
        self._launch(node, extra_jvm_options)
        self._wait_for_serving_brokers(self._running_broker_ids())

    def dump_logs(self, lines: int = 60) -> str:
        """The last lines of every broker's (and ZooKeeper's) log and console output, for a test failure report."""
        if self.base_dir is None:
            return ""
        brokers = "\n".join(
            f"==> {path} (last {lines} lines) <==\n{tail(path, lines)}"
            for path in sorted((self.base_dir / "logs").glob("*-[0-9]*.*")) if not path.name.startswith("format-")
        )
        return brokers if self.zookeeper is None else f"{brokers}\n{self.zookeeper.dump_logs(lines)}"

    # -- setting up ------------------------------------------------------------------------------

    def _lay_out(self) -> None:
        if self._requested_base_dir is None:
            self.base_dir = self._created_base_dir = Path(tempfile.mkdtemp(prefix="quota-sidecar-kafka-"))
        else:
            self.base_dir = Path(self._requested_base_dir).resolve()
            self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "logs").mkdir()
        (self.base_dir / "log4j2.properties").write_text(LOG4J2_CONFIG)
        (self.base_dir / "log4j.properties").write_text(LOG4J1_CONFIG)  # Kafka 3.x logs through reload4j
        if self.zookeeper_mode:
            self.zookeeper = LocalZooKeeper(self.base_dir / "zookeeper", self._classpath, self._jvm_options)

        self._nodes, self._controllers = lay_out_nodes(
            self.base_dir, self._log_dir_counts, self.controller_ids, self._controller_host, self._network_namespaces,
            SECURE_LISTENERS if self.security else ())

        controllers = list(self._controllers.values())
        for node in [*controllers, *self._nodes.values()]:
            for index, log_dir in enumerate(node.log_dirs):
                log_dir.mkdir(parents=True)
                if (node.node_id, index) in self._small_log_dirs:
                    mount_small_filesystem(log_dir, self._small_log_dirs[(node.node_id, index)], self._mounts)
            node.properties_file.write_text(properties_text(
                controller_properties(node, controllers, self._broker_properties) if node in controllers else
                server_properties(node, list(self._nodes.values()), self.users,
                                  self.zookeeper_connect if self.zookeeper_mode else None, self._broker_properties,
                                  controllers)))

    def _format_storage(self) -> None:
        """Write meta.properties into every log dir and the metadata dir, all nodes at once."""
        formatting = {
            node.node_id: subprocess.Popen(
                [*self._java(self.base_dir / "logs" / f"format-{node.node_id}.log"), "kafka.tools.StorageTool",
                 "format", "--cluster-id", self.cluster_id, "--config", str(node.properties_file),
                 *(self.security.format_arguments() if self.security else [])],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            )
            for node in [*self._controllers.values(), *self._nodes.values()]
        }
        for node_id, process in formatting.items():
            output, _ = process.communicate()
            if process.returncode != 0:
                raise LocalClusterError(
                    f"formatting the storage of broker {node_id} failed (exit code {process.returncode}):\n{output}"
                )

    def _launch(self, node: BrokerNode, extra_jvm_options: Sequence[str] = ()) -> None:
        logs = self.base_dir / "logs"
        # `ip netns exec` execs the command in place: the process is the JVM, and terminate() reaches it.
        in_namespace = ["ip", "netns", "exec", node.netns] if node.netns else []
        name = f"controller-{node.node_id}" if node.node_id in self._controllers else f"broker-{node.node_id}"
        with open(logs / f"{name}.out", "ab") as console:
            node.process = subprocess.Popen(
                [*in_namespace, *self._java(logs / f"{name}.log", extra_jvm_options), "kafka.Kafka",
                 str(node.properties_file)],
                stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Its own session: Ctrl-C reaches Python only, which then stops the brokers in order.
                start_new_session=True,
            )

    def _java(self, log_file: Path, extra_jvm_options: Sequence[str] = ()) -> list[str]:
        return java_command([*self._jvm_options, *extra_jvm_options], self._classpath, self.base_dir,
                            self.zookeeper_mode, log_file)

    # -- watching and stopping -------------------------------------------------------------------

    def _node(self, node_id: int) -> BrokerNode:
        return self._nodes[node_id] if node_id in self._nodes else self._controllers[node_id]

    def _running_broker_ids(self) -> set[int]:
        return {node_id for node_id, node in self._nodes.items() if node.process is not None}

    def _wait_for_serving_brokers(self, expected: set[int]) -> None:
        """Wait until exactly `expected` brokers serve (registered and unfenced), or fail with the logs."""
        deadline = time.monotonic() + self._start_timeout
        while True:
            for node_id in expected:
                exit_code = self._nodes[node_id].process.poll()
                if exit_code is not None:
                    raise LocalClusterError(f"broker {node_id} exited with code {exit_code}\n{self.dump_logs()}")
            serving = self._serving_broker_ids()
            if serving == expected:
                return
            if time.monotonic() > deadline:
                raise LocalClusterError(
                    f"brokers {sorted(expected)} not serving after {self._start_timeout:.0f}s "
                    f"(serving: {sorted(serving)})\n{self.dump_logs()}"
                )
            time.sleep(0.5)

    def _serving_broker_ids(self) -> set[int]:
        running = self._running_broker_ids()
        return serving_broker_ids({node_id: [self.broker_addresses[node_id], self.sasl_broker_addresses[node_id]]
                                   for node_id in running}, self.zookeeper_mode)

    @staticmethod
    def _kill(node: BrokerNode) -> None:
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            node.process = None

    def _stop_processes(self, nodes: list[BrokerNode], timeout: float | None = None) -> None:
        """SIGTERM (a broker's clean shutdown) to all at once, SIGKILL to those still running at the timeout."""
        timeout = self._stop_timeout if timeout is None else timeout
        running = [node for node in nodes if node.process is not None]
        for node in running:
            node.process.terminate()
        deadline = time.monotonic() + timeout
        for node in running:
            try:
                node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("Kafka broker %d did not stop within %.0fs: killing it", node.node_id, timeout)
                node.process.kill()
                node.process.wait()
            node.process = None

    def _unmount_all(self) -> None:
        failures = unmount(self._mounts)
        self._mounts = list(failures)
        if failures:
            raise LocalClusterError(f"could not unmount {failures}; the base dir {self.base_dir} is kept")


# -- helpers -------------------------------------------------------------------------------------


def _random_cluster_id() -> str:
    """A Kafka Uuid in its base64 form, not starting with '-' (which a command line takes for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
