"""The command line's answers to what it cannot do: one line on stderr, exit code 2."""

import socket

from click.testing import CliRunner

from quota_sidecar.cli import main


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the probe goes


def test_status_without_a_sidecar_or_a_config_says_who_did_not_answer_and_why():
    url = f"http://127.0.0.1:{closed_port()}"
    result = CliRunner().invoke(main, ["status", "--url", url])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert url in result.output and "refused" in result.output and "--config" in result.output


def test_a_misspelt_key_is_refused_before_anything_starts():
    result = CliRunner().invoke(main, ["status", "--set", "kafka.admin.bootstrap.servers=127.0.0.1:1",
                                       "--set", "storage.check.intervall=PT1S"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "storage.check.intervall" in result.output and "storage.check.interval" in result.output


def test_plan_with_a_malformed_reassignment_file_is_one_line_naming_the_file(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t"}]}')
    result = CliRunner().invoke(main, ["plan", "--reassignment", str(plan),
                                       "--set", f"kafka.admin.bootstrap.servers=127.0.0.1:{closed_port()}",
                                       "--set", "storage.per.volume.limit.min.available.bytes=1"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert str(plan) in result.output
