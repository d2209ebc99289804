"""The exit codes and the one line on stderr, from the real `quota-sidecar` process: 0 ok, 1 the cluster could not
be read, 2 bad configuration. A closed port stands for a cluster that is not there; no cluster is needed."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quota_sidecar.configuration import config as cfg

P = cfg.PREFIX
EXECUTABLE = Path(sys.executable).parent / "quota-sidecar"
ROOT = Path(__file__).resolve().parents[2]
# Process start-up (Python, imports) on a slow, busy machine: allowed on top of the timeouts under test.
START_UP = 10.0


def quota_sidecar(*arguments: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([str(EXECUTABLE), *arguments], capture_output=True, text=True, timeout=timeout,
                          env=environment, stdin=subprocess.DEVNULL)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the probe goes


def settings(**keys) -> list[str]:
    keys = {"kafka.admin.bootstrap.servers": f"127.0.0.1:{closed_port()}",
            "storage.per.volume.limit.min.available.bytes": "100", "http.port": "0", **keys}
    return [argument for key, value in keys.items() for argument in ("--set", f"{key}={value}")]


def test_help_documents_the_exit_codes():
    result = quota_sidecar("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert ("Exit codes: 0 ok; 1 the cluster or a sidecar could not be reached, or a part failed; 2 bad "
            "configuration or usage. Each command's --help lists its own.") in text


def test_status_direct_against_a_closed_port_fails_within_its_timeout_naming_the_server():
    port = closed_port()
    started = time.monotonic()
    result = quota_sidecar("status", "--direct", "--timeout", "2", *settings(**{
        "kafka.admin.bootstrap.servers": f"127.0.0.1:{port}"}))
    elapsed = time.monotonic() - started

    assert result.returncode == 1
    assert result.stderr == (f"quota-sidecar: cannot read the cluster: cannot reach any bootstrap server "
                             f"127.0.0.1:{port} (connection refused)\n")
    assert elapsed < 2 + START_UP


def test_status_against_an_endpoint_that_never_answers_gives_up_after_its_timeout():
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        result = quota_sidecar("status", "--url", url, "--timeout", "1")
        elapsed = time.monotonic() - started

    assert result.returncode == 2  # no --config to read the cluster instead
    assert result.stderr.count("\n") == 1 and url in result.stderr and "timed out" in result.stderr
    assert elapsed < 1 + START_UP


def test_a_spark_that_cannot_start_is_one_line_and_exit_code_2(tmp_path):
    # Fault injection: a Java that is not there, so the embedded Spark's JVM cannot start.
    snapshots = tmp_path / "snapshots.json"
    snapshots.write_text('[{"at": "2026-11-25T12:00:00Z", "brokers": [1], "volumes": []}]')
    result = quota_sidecar("evaluate", "--snapshots", str(snapshots), *settings(),
                           env={"JAVA_HOME": "/no/such/java", "SPARK_LOCAL_IP": "127.0.0.1"})

    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "java" not in result.stdout
    last = result.stderr.splitlines()[-1]
    assert last.startswith("quota-sidecar: cannot start a Spark session for embedded local[1]: [JAVA_GATEWAY_EXITED]")
    assert "/no/such/java/bin/java: No such file or directory" in last
    assert [line for line in result.stderr.splitlines()[:-1] if " INFO " not in line] == []


@pytest.mark.parametrize("arguments", [["run"], ["status", "--direct"], ["evaluate", "--snapshots", "x.json"]])
def test_a_malformed_spark_url_is_refused_by_every_command_before_it_starts(arguments):
    result = quota_sidecar(*arguments, *settings(**{"spark.url": "sc//x"}))

    assert result.returncode == 2
    assert result.stderr.startswith(f"quota-sidecar: {P}spark.url='sc//x': expected empty (embedded)")
    assert result.stderr.count("\n") == 1
