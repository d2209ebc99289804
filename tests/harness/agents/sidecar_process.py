"""`quota-sidecar run` as a subprocess, the way an operator runs it: a properties file, a log, an HTTP port.

One class for the integration tests, the benchmarks and the demo. Its log goes to a file (appended
across restarts) so a test's report can show it; its lines are read back with the time the sidecar
logged them, on this machine's monotonic clock, for the benchmarks' latencies.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterable, Mapping

from harness.cluster.ports import free_loopback_ports
from harness.waiting import eventually
from quota_sidecar.configuration.properties import PREFIX

EXECUTABLE = Path(sys.executable).with_name("quota-sidecar")
START_TIMEOUT = 240.0  # s: a sidecar imports pyspark and starts or reaches Spark before its first pass
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


class SidecarError(RuntimeError):
    """The sidecar exited, or did not do what was waited for; the message ends with its log's tail."""


@dataclass(frozen=True)
class LogLine:
    at: float  # time.monotonic() of the moment the sidecar logged it (from its own timestamp)
    text: str


class SidecarProcess:
    """One `quota-sidecar run --config FILE` process (an agent; `command="aggregate"`: the aggregator);
    `command_prefix` runs it elsewhere (`ip netns exec ns`); `configs` are read before its own file, as a broker's
    server.properties is in its pod."""

    def __init__(self, name: str, work_dir: Path, properties: Mapping[str, object], host: str = "127.0.0.1",
                 port: int | None = None, command_prefix: Iterable[str] = (), command: str = "run",
                 configs: Iterable[Path] = (), environment: Mapping[str, str] | None = None):
        self.name, self.host, self.command = name, host, command
        self.configs = [str(path) for path in configs]
        self.environment = dict(environment or {})  # over this process's own (TMPDIR: where its temp files go)
        self.port = port or free_loopback_ports(1)[0]
        self.config_path = Path(work_dir) / f"{name}.properties"
        self.log_path = Path(work_dir) / f"{name}.log"
        properties = {**properties, PREFIX + "http.port": self.port}
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        self.command_prefix = list(command_prefix)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, cleanup: bool = False) -> SidecarProcess:
        configs = [option for path in [*self.configs, str(self.config_path)] for option in ("--config", path)]
        command = [*self.command_prefix, str(EXECUTABLE), self.command, *configs,
                   *(["--cleanup"] if cleanup else [])]
        with open(self.log_path, "a") as log:
            log.write(f"---- {' '.join(command)}\n")
            log.flush()
            # A session of its own: Ctrl-C reaches only the caller, which stops the sidecars in order.
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **self.environment},
                                            start_new_session=True)
        return self

    def __enter__(self) -> SidecarProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def check_running(self) -> None:
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise SidecarError(f"{self.name} is not running (exit code {code}):\n{self.log_tail()}")

    def wait_ready(self, timeout: float = START_TIMEOUT) -> SidecarProcess:
        """Until its /healthz reports a poll done; at once if the process exits."""
        def polled() -> bool:
            self.check_running()
            health = self.get("/healthz")
            return bool(health and health["last_poll"])

        try:
            eventually(polled, timeout, f"{self.name}'s first poll")
        except SidecarError:
            raise
        except AssertionError as late:
            raise SidecarError(f"{late}\n{self.log_tail()}") from None
        return self

    def send(self, sig: int) -> None:
        """One signal (a second SIGTERM could reach Python after it put the default handler back). SIGKILL, a
        crash, goes to the whole session: the aggregator's Spark JVM would otherwise decide on for seconds."""
        if self.process is not None and self.process.poll() is None:
            if sig == signal.SIGKILL:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)

    def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 120.0) -> int | None:
        """Send `sig` (None: it was sent already), wait, and return the exit code (negative: the signal)."""
        if sig is not None:
            self.send(sig)
        process, self.process = self.process, None
        if process is None:
            return None
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise SidecarError(f"{self.name} did not stop within {timeout:.0f}s:\n{self.log_tail()}") from None

    # -------------------------------------------------------------- what it answers

    def get(self, path: str) -> dict | None:
        """Its JSON answer on `path` (/healthz, /status), None while it does not answer."""
        try:
            code, answer = http("GET", self.url + path, timeout=5)
        except OSError:
            return None
        return answer if code == 200 and isinstance(answer, dict) else None

    def status(self) -> dict:
        """Its /status, which `quota-sidecar status -o json` prints."""
        code, answer = http("GET", self.url + "/status")
        assert code == 200, answer
        return answer

    def metrics(self) -> dict[str, float]:
        """Its /metrics, unlabelled samples only: {name: value}."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        return {name: float(value) for name, value in re.findall(r"^(\w+) (\S+)$", text, re.MULTILINE)}

    def polls(self) -> int:
        try:
            return int(self.metrics().get("quota_sidecar_polls_total", 0))
        except OSError:  # not serving yet
            return 0

    def wait_for_polls(self, count: int, timeout: float) -> None:
        def done() -> bool:
            self.check_running()
            return self.polls() >= count

        eventually(done, timeout, f"{self.name}: {count} polls", every=0.25)

    # -------------------------------------------------------------- its log

    def lines(self) -> list[LogLine]:
        """Every line it logged, with the monotonic time of its timestamp (a line without one: the last's)."""
        offset = time.time() - time.monotonic()
        found, at = [], 0.0
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        for line in text.splitlines():
            if match := _TIMESTAMP.match(line):
                wall = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                at = wall + int(match.group(2)) / 1000 - offset
            found.append(LogLine(at, line))
        return found

    def first_line(self, pattern: str, after: float = 0.0) -> LogLine | None:
        return next((line for line in self.lines() if line.at >= after and re.search(pattern, line.text)), None)

    def wait_for_line(self, pattern: str, timeout: float, after: float = 0.0) -> LogLine:
        def found() -> LogLine | None:
            self.check_running()
            return self.first_line(pattern, after)

        try:
            return eventually(found, timeout, every=0.05)
        except SidecarError:
            raise
        except AssertionError:
            raise SidecarError(f"{self.name}: no log line matching {pattern!r} within {timeout:.0f}s:\n"
                               f"{self.log_tail(15)}") from None

    def problems(self) -> list[str]:
        """Its WARNING and ERROR lines."""
        return [line.text for line in self.lines() if re.search(r" (WARNING|ERROR|CRITICAL) ", line.text)]

    def log_tail(self, lines: int = 150) -> str:
        try:
            return "".join(self.log_path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def report_section(self) -> tuple[str, str]:
        return f"{self.name} log ({self.log_path})", self.log_tail()


class SidecarFleet:
    """One sidecar per broker, as deployed: `properties_of(broker)` gives each its properties, `options_of(broker)`
    its SidecarProcess options (where it runs)."""

    def __init__(self, brokers: Iterable[int], work_dir: Path, properties_of, options_of=lambda broker: {}):
        self.sidecars = {broker: SidecarProcess(f"sidecar-{broker}", work_dir, properties_of(broker),
                                                **options_of(broker)) for broker in brokers}

    def __getitem__(self, broker: int) -> SidecarProcess:
        return self.sidecars[broker]

    def __iter__(self):
        return iter(self.sidecars.values())

    def start(self, brokers: Iterable[int] | None = None, cleanup: bool = True,
              ready_timeout: float | None = START_TIMEOUT) -> SidecarFleet:
        """Start them all at once, then (unless ready_timeout is None) wait for each one's first poll."""
        chosen = [self.sidecars[b] for b in (brokers or self.sidecars)]
        try:
            for sidecar in chosen:
                sidecar.start(cleanup)
            if ready_timeout is not None:
                for sidecar in chosen:
                    sidecar.wait_ready(ready_timeout)
        except BaseException:
            self.stop([b for b, s in self.sidecars.items() if s in chosen])
            raise
        return self

    def stop(self, brokers: Iterable[int] | None = None, timeout: float = 120.0) -> dict[int, int | None]:
        """SIGTERM to each at once, then their exit codes."""
        chosen = {b: self.sidecars[b] for b in (brokers or self.sidecars)}
        for sidecar in chosen.values():
            sidecar.send(signal.SIGTERM)
        return {broker: sidecar.stop(None, timeout) for broker, sidecar in chosen.items()}


def http(method: str, url: str, body: dict | None = None, token: str | None = None,
         timeout: float = 30, context=None) -> tuple[int, dict | str]:
    """(status, the JSON answer, or the text of one that is not JSON); `context`: TLS settings for https."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            code, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        code, text = error.code, error.read().decode()
    try:
        return code, json.loads(text)
    except ValueError:
        return code, text
