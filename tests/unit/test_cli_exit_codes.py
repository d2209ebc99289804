"""Every exit code that EXIT_CODES lists (and so every command's --help), provoked from the real `quota-sidecar`
process, so that the table and the behaviour cannot drift apart. A closed loopback port stands for a cluster or a
sidecar that is not there; a real sidecar (`run` against such a cluster) answers /status and refuses changes.
The codes that need a live cluster or Spark are provoked by the tests PROVOKED_ELSEWHERE names."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.cluster.ports import closed_port, free_loopback_ports
from quota_sidecar.cli.grammar import BAD_CONFIGURATION, EXIT_CODES, OK, UNREACHABLE

EXECUTABLE = Path(sys.executable).parent / "quota-sidecar"
ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT)}

PROVOKED_ELSEWHERE = {
    ("cleanup", OK): "tests/integration/replication_throttles/test_uninstall.py",
    ("replication-overrides get", OK): "tests/integration/replication_throttles/test_overrides.py",
    ("replication-overrides set", OK): "tests/integration/replication_throttles/test_overrides.py",
    ("replication-overrides remove", OK): "tests/integration/replication_throttles/test_overrides.py",
    ("aggregate", OK): "tests/integration/conftest.py",  # the session's aggregator stops with 0
    ("evaluate", OK): "tests/conformance.py",  # each case's evaluate must exit 0
    ("plan", OK): "tests/integration/test_plan.py",
    ("report", OK): "tests/spark/test_report.py",
}


def settings(cluster: str, **keys: str) -> list[str]:
    keys = {"kafka.admin.bootstrap.servers": cluster, "storage.per.volume.limit.min.available.bytes": "100", **keys}
    return [argument for key, value in keys.items() for argument in ("--set", f"{key}={value}")]


def cases(sidecar: str, cluster: str, files: Path) -> dict[tuple[str, int], list[str]]:
    """(command, exit code) -> the arguments that provoke it."""
    nowhere = f"http://127.0.0.1:{closed_port()}"
    (files / "plan.json").write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}')
    (files / "admin.properties").write_text("security.protocol=PLAINTEXT\n")
    misspelt = ["--set", "storage.check.intervall=PT1S"]
    overrides = {f"replication-overrides {name}": ["replication-overrides", name, *(["5"] if name == "set" else [])]
                 for name in ("get", "set", "remove")}
    return {
        ("run", BAD_CONFIGURATION): ["run", *settings(cluster), *misspelt],
        ("cleanup", UNREACHABLE): ["cleanup", *settings(cluster)],
        ("cleanup", BAD_CONFIGURATION): ["cleanup", *settings(cluster), *misspelt],
        ("status", OK): ["status", "--url", sidecar],
        ("status", UNREACHABLE): ["status", "--direct", "--timeout", "2s", *settings(cluster)],
        ("status", BAD_CONFIGURATION): ["status", "--url", nowhere],
        **{(name, UNREACHABLE): [*arguments, "--url", nowhere] for name, arguments in overrides.items()},
        ("replication-overrides get", BAD_CONFIGURATION): [*overrides["replication-overrides get"], "--broker", "x"],
        # a sidecar without api.token refuses changes: HTTP 403
        ("replication-overrides set", BAD_CONFIGURATION): [*overrides["replication-overrides set"], "--url", sidecar],
        ("replication-overrides remove", BAD_CONFIGURATION): [*overrides["replication-overrides remove"], "--url",
                                                              sidecar],
        ("keys", OK): ["keys", "--filter", "replication.*", "-o", "json"],
        ("keys", BAD_CONFIGURATION): ["keys", "-o", "yaml"],
        ("acls", OK): ["acls", "--principal", "User:a", *settings(cluster)],
        ("acls", UNREACHABLE): ["acls", "--principal", "User:a", "--apply", "--command-config",
                                str(files / "admin.properties"), *settings(cluster)],
        ("acls", BAD_CONFIGURATION): ["acls", "--principal", "a", *settings(cluster)],
        ("aggregate", UNREACHABLE): ["aggregate", "--set", f"pipeline.bootstrap.servers={cluster}"],
        ("aggregate", BAD_CONFIGURATION): ["aggregate", "--set", f"pipeline.bootstrap.servers={cluster}", *misspelt],
        ("evaluate", BAD_CONFIGURATION): ["evaluate", "--snapshots", str(files / "none.json"), *settings(cluster)],
        ("plan", UNREACHABLE): ["plan", "--reassignment", str(files / "plan.json"), "--measure", "1s",
                                *settings(cluster)],
        ("plan", BAD_CONFIGURATION): ["plan", "--reassignment", str(files / "plan.json"), "--measure", "1x",
                                      *settings(cluster)],
        ("report", BAD_CONFIGURATION): ["report", "--history", str(files / "none")],
    }


def quota_sidecar(arguments: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXECUTABLE), *arguments], capture_output=True, text=True, timeout=120,
                          env=ENVIRONMENT, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def cluster() -> str:
    return f"127.0.0.1:{closed_port()}"


@pytest.fixture(scope="module")
def sidecar(cluster, tmp_path_factory):
    """A real sidecar whose cluster is not there: it serves /status and refuses changes (no api.token)."""
    port = free_loopback_ports(1)[0]
    log = (tmp_path_factory.mktemp("sidecar") / "run.log").open("w")
    process = subprocess.Popen([str(EXECUTABLE), "run", *settings(cluster, **{"http.port": str(port)})],
                               stdout=log, stderr=subprocess.STDOUT, env=ENVIRONMENT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the sidecar did not answer on {url}: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.5)
    yield process, url
    if process.poll() is None:
        process.kill()
        process.wait()
    log.close()


@pytest.fixture(scope="module")
def outcomes(sidecar, cluster, tmp_path_factory) -> dict[tuple[str, int], subprocess.CompletedProcess]:
    """Every case run at once (a refused connection is retried for seconds by some commands)."""
    provoking = cases(sidecar[1], cluster, tmp_path_factory.mktemp("files"))
    with ThreadPoolExecutor(max_workers=len(provoking)) as pool:
        done = dict(zip(provoking, pool.map(quota_sidecar, provoking.values())))
    return done


DOCUMENTED = [(command, code) for command, codes in EXIT_CODES.items() for code in codes]


STOPPED = ("run", OK)  # test_run_exits_0_when_stopped


@pytest.mark.parametrize("command, code", [case for case in DOCUMENTED if case not in {*PROVOKED_ELSEWHERE, STOPPED}])
def test_each_documented_exit_code_is_what_the_command_exits_with(outcomes, command, code):
    done = outcomes[(command, code)]
    assert done.returncode == code, (done.args, done.stderr)
    if code == OK:
        assert done.stdout.strip(), done.args
        if "json" in done.args:
            json.loads(done.stdout)
    else:  # one line saying what is wrong, no traceback
        said = [line for line in done.stderr.splitlines() if " INFO " not in line]
        assert len(said) == 1 and said[0].startswith("quota-sidecar: "), done.stderr


def test_every_case_here_or_elsewhere_is_a_documented_code_and_the_other_tests_exist(outcomes):
    provoked = {*outcomes, *PROVOKED_ELSEWHERE, STOPPED}
    assert provoked == set(DOCUMENTED)
    for (command, _), path in PROVOKED_ELSEWHERE.items():
        text = (ROOT / path).read_text()
        assert command.split()[-1] in text and ("== 0" in text or "returncode" in text), path


@pytest.mark.parametrize("command", EXIT_CODES)
def test_each_commands_help_lists_its_exit_codes(command):
    done = quota_sidecar([*command.split(), "--help"])
    listed = done.stdout.split("Exit codes:")[1]
    assert [line.split()[0] for line in listed.strip().splitlines()] == [str(code) for code in EXIT_CODES[command]]


def test_run_exits_0_when_stopped(sidecar):  # last: it stops the module's sidecar
    process, _ = sidecar
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == OK
