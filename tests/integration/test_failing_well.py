"""Failing well, end to end: a real `quota-sidecar run` process against a cluster that is not there (a real
closed port) and against a real Kafka broker stopped mid-run. Each failed poll is one WARNING naming its
cause, within the poll's deadline; the fallback applies on the validity timeline from the first poll; the
first poll that succeeds again is one INFO line; the libraries say nothing at WARNING or above.

Timings are asserted only as the issue asks, with a tolerance for a busy 2-core machine (TOLERANCE).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime

import pytest

from harness.cluster.ports import closed_port
from harness.agents.sidecar_process import SidecarError, SidecarProcess
from harness.waiting import WaitTimeout, eventually
from quota_sidecar.configuration.properties import PREFIX

pytestmark = pytest.mark.integration

SIDECAR_START = 60  # s: Python's imports, then the first poll
TOLERANCE = 3.0  # s: thread wake-ups and log writes on a busy machine
CHECK_INTERVAL, POLL_TIMEOUT, VALIDITY = 2, 3, 10  # s
# "<date> <time>,<ms> WARNING quota_sidecar.loop: poll failed: ..."
LINE = re.compile(r"\S+ \S+ (\w+) ([\w.]+): (.*)")


@dataclass(frozen=True)
class Line:
    at: float  # time.monotonic() of the moment the sidecar logged it
    level: str
    logger: str
    message: str


def lines(sidecar: SidecarProcess) -> list[Line]:
    """The sidecar's log lines, with their level, logger and message apart."""
    return [Line(line.at, *match.groups()) for line in sidecar.lines() if (match := LINE.fullmatch(line.text))]


def wait_for(sidecar: SidecarProcess, what: str, matches, timeout: float, count: int = 1) -> list[Line]:
    """The lines that `matches`, once there are `count` of them; at once if the sidecar exits."""
    def found() -> list[Line]:
        sidecar.check_running()
        matching = [line for line in lines(sidecar) if matches(line)]
        return matching if len(matching) >= count else []

    try:
        return eventually(found, timeout, what)
    except WaitTimeout as late:
        raise SidecarError(f"{late}\n{sidecar.log_tail()}") from None


def monotonic(wall: datetime) -> float:
    """A time the sidecar wrote in a message, on the clock of Line.at."""
    return wall.timestamp() - (time.time() - time.monotonic())


@pytest.fixture
def sidecar_process(tmp_path, pipeline):
    started = []

    def start(**keys) -> SidecarProcess:
        keys = {"storage.per.volume.limit.min.available.bytes": 1, "storage.check.interval": f"PT{CHECK_INTERVAL}S",
                "poll.timeout": f"PT{POLL_TIMEOUT}S", **keys}
        started.append(SidecarProcess("sidecar", tmp_path, {**pipeline, **{PREFIX + key: value for key, value in keys.items()}}))
        return started[-1].start()

    yield start
    for process in started:
        process.stop(timeout=60)


def poll_failed(line: Line) -> bool:
    return line.level == "WARNING" and line.message.startswith("poll failed: ")


def library_lines_at_warning_or_above(sidecar: SidecarProcess) -> list[str]:
    return [f"{line.level} {line.logger}: {line.message}" for line in lines(sidecar)
            if line.level in ("WARNING", "ERROR", "CRITICAL") and not line.logger.startswith("quota_sidecar")]


def test_an_unreachable_cluster_fails_each_poll_within_the_deadline_and_the_fallback_follows_the_validity(
        sidecar_process):
    port = closed_port()
    sidecar = sidecar_process(**{"kafka.admin.bootstrap.servers": f"127.0.0.1:{port}",
                                 "throttle.factor.validity.duration": f"PT{VALIDITY}S",
                                 "throttle.factor.fallback": "0.5"})

    # The loop's first poll starts as soon as the endpoint is up.
    loop_started = wait_for(sidecar, "HTTP endpoint", lambda line: line.message.startswith("HTTP endpoint on"),
                            SIDECAR_START)[0].at
    first = wait_for(sidecar, "a failed poll", poll_failed, POLL_TIMEOUT + TOLERANCE + 30)[0]
    fallback = wait_for(sidecar, "the fallback", lambda line: "fallback 0.500 applied" in line.message,
                        VALIDITY + CHECK_INTERVAL + POLL_TIMEOUT + TOLERANCE + 30)[0]
    sidecar.stop()

    assert first.message == (f"poll failed: reading the sidecars' records: cannot reach any bootstrap server "
                             f"127.0.0.1:{port} (connection refused)")
    assert first.at - loop_started <= POLL_TIMEOUT + TOLERANCE
    valid_from = monotonic(datetime.fromisoformat(
        re.search(r"no valid factor since (\S+ \S+)", fallback.message).group(1)))
    assert abs(valid_from - loop_started) <= TOLERANCE, "the timeline did not start at the first poll"
    assert VALIDITY <= fallback.at - valid_from <= VALIDITY + CHECK_INTERVAL + POLL_TIMEOUT + TOLERANCE
    assert [line for line in lines(sidecar)
            if line.level != "INFO" and not poll_failed(line) and "fallback 0.500 applied" not in line.message] == []
    assert library_lines_at_warning_or_above(sidecar) == []
    assert "Traceback" not in sidecar.log_path.read_text()


def test_a_broker_stopped_mid_run_is_one_warning_per_failed_poll_and_one_recovery_line(make_kafka_cluster,
                                                                                        sidecar_process):
    cluster = make_kafka_cluster(brokers=1)
    sidecar = sidecar_process(**{"kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
                                 "throttle.factor.validity.duration": "PT10M"})
    sidecar.wait_ready(SIDECAR_START)
    eventually(lambda: sidecar.status()["throttle"]["source"] == "computed", 60, "a first successful poll")

    cluster.stop_broker(1)
    wait_for(sidecar, "three failed polls", poll_failed, 3 * (CHECK_INTERVAL + POLL_TIMEOUT) + 60, count=3)
    restarting = time.monotonic()
    cluster.start_broker(1)
    recovered = wait_for(sidecar, "the recovery line", lambda line: "polls succeed again" in line.message, 120)
    metrics = sidecar.metrics()
    sidecar.stop()

    logged = lines(sidecar)  # once: each reading dates the lines anew, to the microsecond
    failed = [line for line in logged if poll_failed(line)]
    failures = metrics["quota_sidecar_poll_failures_total"]
    assert len(failed) == failures >= 3, "one WARNING per failed poll, as the metric counts them"
    port = cluster.bootstrap_servers.rpartition(":")[2]
    while_down = [line.message for line in failed if line.at < restarting - TOLERANCE]
    assert while_down and all(message.endswith(f"cannot reach any bootstrap server 127.0.0.1:{port} (connection "
                                               "refused)") for message in while_down), while_down
    assert all(line.at < recovered[0].at for line in failed)
    assert [line.message for line in logged if "polls succeed again" in line.message] == [
        recovered[0].message]
    assert re.fullmatch(rf"polls succeed again after {len(failed)} failed polls over \d+s", recovered[0].message)
    # A pass whose poll succeeded just before the broker went can fail in its writes: one line too, counted.
    writes = [line for line in logged if line.message.startswith("pass failed while writing: ")]
    assert len(writes) <= metrics["quota_sidecar_pass_failures_total"]
    assert [line for line in logged if line.level != "INFO" and line not in failed + writes] == []
    assert library_lines_at_warning_or_above(sidecar) == []
    assert "Traceback" not in sidecar.log_path.read_text()
