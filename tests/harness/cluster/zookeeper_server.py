"""One real ZooKeeper server on a free loopback port, for the ZooKeeper-mode clusters (the lab: not installed).

Started as `org.apache.zookeeper.server.ZooKeeperServerMain` from the jars Kafka 3.9 depends on
(pom-zookeeper.xml, build/kafka-zookeeper.classpath). It can be stopped and started again with its data,
so that tests can make clients lose their session for real.

    with LocalZooKeeper(base_dir, classpath) as zookeeper:
        KazooClient(hosts=zookeeper.connect_string)
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import Sequence

from harness.cluster.ports import free_loopback_ports

log = logging.getLogger(__name__)

# A short tick so that sessions can be short: ZooKeeper grants timeouts between 2 and 20 ticks (1 s to 10 s).
TICK_MS = 500

LOG4J_CONFIG = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${quota_sidecar.log_file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class ZooKeeperError(Exception):
    """The ZooKeeper server did not start or stop; the message says why and holds its log's tail."""


class LocalZooKeeper:
    """A standalone ZooKeeper server living in `home`; a context manager that starts and stops it."""

    def __init__(self, home: Path, classpath: str, jvm_options: Sequence[str], start_timeout: float = 60.0):
        self.home = Path(home)
        self.port = free_loopback_ports(1)[0]
        self.log_file = self.home / "zookeeper.log"
        self._classpath = classpath
        self._jvm_options = list(jvm_options)
        self._start_timeout = start_timeout
        self._process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> LocalZooKeeper:
        """Start the server (again, with the data of its last run) and return once it answers `ruok`."""
        if self._process is not None:
            raise ZooKeeperError("the ZooKeeper server is running already")
        (self.home / "data").mkdir(parents=True, exist_ok=True)
        (self.home / "log4j.properties").write_text(LOG4J_CONFIG)
        (self.home / "zoo.cfg").write_text(
            f"dataDir={self.home / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"tickTime={TICK_MS}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
        )
        with open(self.home / "zookeeper.out", "ab") as console:
            self._process = subprocess.Popen(
                ["java", *self._jvm_options, f"-Dlog4j.configuration=file:{self.home / 'log4j.properties'}",
                 f"-Dquota_sidecar.log_file={self.log_file}", "-cp", self._classpath,
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.home / "zoo.cfg")],
                stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        deadline = time.monotonic() + self._start_timeout
        while not _answers_ruok(self.port):
            exit_code = self._process.poll()
            if exit_code is not None or time.monotonic() > deadline:
                self.stop()
                why = f"exited with code {exit_code}" if exit_code is not None else "does not answer ruok"
                raise ZooKeeperError(f"ZooKeeper on port {self.port} {why}\n{self.dump_logs()}")
            time.sleep(0.2)
        log.info("ZooKeeper serving at %s", self.connect_string)
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 20 s), keeping its data; safe to repeat."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            log.warning("ZooKeeper did not stop within 20s: killing it")
            self._process.kill()
            self._process.wait()
        self._process = None

    def dump_logs(self, lines: int = 60) -> str:
        return "\n".join(
            f"==> {path} (last {lines} lines) <==\n{tail(path, lines)}"
            for path in (self.log_file, self.home / "zookeeper.out") if path.exists()
        )


def children(connect: str, path: str) -> list[str]:
    """The children of `path` (sorted; [] while it does not exist), read by a client of its own."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        return sorted(client.get_children(path)) if client.exists(path) else []
    finally:
        client.stop()
        client.close()


def tail(path: Path, lines: int) -> str:
    with open(path, errors="replace") as file:
        return "".join(deque(file, maxlen=lines))


def _answers_ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"ruok")
            return connection.recv(4) == b"imok"
    except OSError:
        return False
