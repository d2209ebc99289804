"""Failing well, end to end: a real `quota-sidecar run` process against a cluster that is not there (a real
closed port) and against a real Kafka broker stopped mid-run. Each failed poll is one WARNING naming its
cause, within the poll's deadline; the fallback applies on the validity timeline from the first poll; the
first poll that succeeds again is one INFO line; the libraries say nothing at WARNING or above.

Timings are asserted only as the issue asks, with a tolerance for a busy 2-core machine (TOLERANCE).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness.ports import closed_port

pytestmark = pytest.mark.integration

PREFIX = "client.quota.callback.static."
EXECUTABLE = Path(sys.executable).with_name("quota-sidecar")
ROOT = Path(__file__).resolve().parents[2]
SIDECAR_START = 180  # s: the embedded Spark starts before the first poll
TOLERANCE = 3.0  # s: thread wake-ups and log writes on a busy machine
CHECK_INTERVAL, POLL_TIMEOUT, VALIDITY = 2, 3, 10  # s
# "2026-11-23 10:29:31,417 WARNING quota_sidecar.loop: poll failed: ..."; the process logs in UTC (TZ below).
LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) ([\w.]+): (.*)")


@dataclass(frozen=True)
class Line:
    at: datetime
    level: str
    logger: str
    message: str


class SidecarProcess:
    """`quota-sidecar run` with the given keys, its stderr in a file; stopped with SIGTERM."""

    def __init__(self, work_dir: Path, keys: dict[str, object]):
        self.log_path = work_dir / "sidecar.log"
        arguments = [f"--set={key}={value}" for key, value in keys.items()]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [str(EXECUTABLE), "run", *arguments], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(ROOT), "TZ": "UTC", "SPARK_LOCAL_IP": "127.0.0.1"})

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[Line]:
        found = []
        for raw in self.text().splitlines():
            match = LINE.fullmatch(raw)
            if match:
                at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
                found.append(Line(at, match.group(2), match.group(3), match.group(4)))
        return found

    def wait_for(self, what: str, matches, timeout: float, count: int = 1) -> list[Line]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [line for line in self.lines() if matches(line)]
            if len(found) >= count:
                return found
            if self.process.poll() is not None:
                raise AssertionError(f"the sidecar exited ({self.process.returncode}) before {what}:\n{self.text()}")
            time.sleep(0.5)
        raise AssertionError(f"no {what} within {timeout:.0f}s:\n{self.text()}")

    def endpoint(self) -> str:
        line = self.wait_for("HTTP endpoint", lambda line: line.message.startswith("HTTP endpoint on"), SIDECAR_START)[0]
        return line.message.split()[3]

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.endpoint() + path, timeout=10) as response:
            return response.read().decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def sidecar_process(tmp_path):
    started = []

    def start(**keys) -> SidecarProcess:
        process = SidecarProcess(tmp_path, {
            "storage.per.volume.limit.min.available.bytes": 1, "storage.check.interval": f"PT{CHECK_INTERVAL}S",
            "poll.timeout": f"PT{POLL_TIMEOUT}S", "http.port": 0, **keys})
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def poll_failed(line: Line) -> bool:
    return line.level == "WARNING" and line.message.startswith("poll failed: ")


def library_lines_at_warning_or_above(process: SidecarProcess) -> list[str]:
    return [f"{line.level} {line.logger}: {line.message}" for line in process.lines()
            if line.level in ("WARNING", "ERROR", "CRITICAL") and not line.logger.startswith("quota_sidecar")]


def test_an_unreachable_cluster_fails_each_poll_within_the_deadline_and_the_fallback_follows_the_validity(
        sidecar_process):
    port = closed_port()
    sidecar = sidecar_process(**{"kafka.admin.bootstrap.servers": f"127.0.0.1:{port}",
                                 "throttle.factor.validity.duration": f"PT{VALIDITY}S",
                                 "throttle.factor.fallback": "0.5"})

    # The loop's first poll starts as soon as the endpoint is up.
    loop_started = sidecar.wait_for("HTTP endpoint", lambda line: line.message.startswith("HTTP endpoint on"),
                                    SIDECAR_START)[0].at
    first = sidecar.wait_for("a failed poll", poll_failed, POLL_TIMEOUT + TOLERANCE + 30)[0]
    fallback = sidecar.wait_for("the fallback", lambda line: "fallback 0.500 applied" in line.message,
                                VALIDITY + CHECK_INTERVAL + POLL_TIMEOUT + TOLERANCE + 30)[0]
    sidecar.stop()

    assert first.message == (f"poll failed: reading the sidecars' records: cannot reach any bootstrap server "
                             f"127.0.0.1:{port} (connection refused)")
    assert first.at - loop_started <= timedelta(seconds=POLL_TIMEOUT + TOLERANCE)
    valid_from = datetime.fromisoformat(re.search(r"no valid factor since (\S+ \S+)", fallback.message).group(1))
    assert abs(valid_from - loop_started) <= timedelta(seconds=TOLERANCE), "the timeline did not start at the first poll"
    assert timedelta(seconds=VALIDITY) <= fallback.at - valid_from \
        <= timedelta(seconds=VALIDITY + CHECK_INTERVAL + POLL_TIMEOUT + TOLERANCE)
    assert [line for line in sidecar.lines()
            if line.level != "INFO" and not poll_failed(line) and "fallback 0.500 applied" not in line.message] == []
    assert library_lines_at_warning_or_above(sidecar) == []
    assert "Traceback" not in sidecar.text()


def test_a_broker_stopped_mid_run_is_one_warning_per_failed_poll_and_one_recovery_line(make_kafka_cluster,
                                                                                        sidecar_process):
    cluster = make_kafka_cluster(brokers=1)
    sidecar = sidecar_process(**{"kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
                                 "throttle.factor.validity.duration": "PT10M"})
    wait_until(lambda: json.loads(sidecar.get("/status"))["throttle"]["source"] == "computed", SIDECAR_START,
               "a first successful poll", sidecar)

    cluster.stop_broker(1)
    sidecar.wait_for("three failed polls", poll_failed, 3 * (CHECK_INTERVAL + POLL_TIMEOUT) + 60, count=3)
    restarting = datetime.now(timezone.utc)
    cluster.start_broker(1)
    recovered = sidecar.wait_for("the recovery line", lambda line: "polls succeed again" in line.message, 120)
    metrics = sidecar.get("/metrics")
    sidecar.stop()

    failed = [line for line in sidecar.lines() if poll_failed(line)]
    failures = metric(metrics, "quota_sidecar_poll_failures_total")
    assert len(failed) == failures >= 3, "one WARNING per failed poll, as the metric counts them"
    port = cluster.bootstrap_servers.rpartition(":")[2]
    while_down = [line.message for line in failed if line.at < restarting - timedelta(seconds=TOLERANCE)]
    assert while_down and all(message.endswith(f"cannot reach any bootstrap server 127.0.0.1:{port} (connection "
                                               "refused)") for message in while_down), while_down
    assert all(line.at < recovered[0].at for line in failed)
    assert [line.message for line in sidecar.lines() if "polls succeed again" in line.message] == [
        recovered[0].message]
    assert re.fullmatch(rf"polls succeed again after {len(failed)} failed polls over \d+s", recovered[0].message)
    # A pass whose poll succeeded just before the broker went can fail in its writes: one line too, counted.
    writes = [line for line in sidecar.lines() if line.message.startswith("pass failed while writing: ")]
    assert len(writes) <= metric(metrics, "quota_sidecar_pass_failures_total")
    assert [line for line in sidecar.lines() if line.level != "INFO" and line not in failed + writes] == []
    assert library_lines_at_warning_or_above(sidecar) == []
    assert "Traceback" not in sidecar.text()


def wait_until(condition, timeout: float, what: str, sidecar: SidecarProcess) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:  # the endpoint is not up yet
            pass
        if sidecar.process.poll() is not None:
            raise AssertionError(f"the sidecar exited ({sidecar.process.returncode}) before {what}:\n{sidecar.text()}")
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:.0f}s:\n{sidecar.text()}")


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))
