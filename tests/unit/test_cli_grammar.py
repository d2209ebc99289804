"""One command-line grammar: -o/--output on every command that prints data, durations in one syntax, --log-level
before or after the subcommand, an example in every help, the old spellings working for one release with a line
on stderr."""

import json
import logging
from datetime import timedelta

import click
import pytest
from click.testing import CliRunner

from harness.cluster.ports import closed_port
from quota_sidecar.cli import main
from quota_sidecar.cli.overrides import override_text
from quota_sidecar.configuration.properties import command_line_duration

BASE = ["--set", "kafka.admin.bootstrap.servers=localhost:9092",
        "--set", "storage.per.volume.limit.min.available.bytes=100"]


def every_command(group: click.Group, ctx: click.Context, path=()):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command.hidden:
            continue
        yield [*path, name]
        if isinstance(command, click.Group):
            yield from every_command(command, ctx, (*path, name))


COMMANDS = list(every_command(main, click.Context(main)))


def test_the_commands_are_all_there():
    assert {" ".join(path) for path in COMMANDS} == {
        "acls", "aggregate", "cleanup", "evaluate", "keys", "plan", "replication-overrides",
        "replication-overrides get", "replication-overrides remove", "replication-overrides set", "report", "run",
        "status"}


@pytest.mark.parametrize("path", [[], *COMMANDS], ids=lambda path: " ".join(path) or "quota-sidecar")
def test_every_help_has_an_example_of_its_own_command(path):
    shown = CliRunner().invoke(main, [*path, "--help"])
    assert shown.exit_code == 0, shown.output
    examples = shown.output.split("Examples:\n")[1].split("\n\n")[0].splitlines()
    assert examples and all(f"quota-sidecar {' '.join(path)}".rstrip() in line for line in examples), examples


@pytest.mark.parametrize("given, seconds", [("30s", 30), ("5m", 300), ("2h", 7200), ("30d", 30 * 86400),
                                            ("1.5s", 1.5), ("PT30S", 30), ("P30D", 30 * 86400), (" 10S ", 10)])
def test_a_duration_in_short_or_iso_8601_form(given, seconds):
    assert command_line_duration(given) == timedelta(seconds=seconds)


@pytest.mark.parametrize("given", ["0s", "PT0S", "1x", "P1M", "5", "-5s", "", "s"])
def test_what_is_not_a_duration(given):
    with pytest.raises(ValueError):
        command_line_duration(given)


def test_a_bare_number_is_seconds_where_it_was_accepted_before():
    assert command_line_duration("2.5", bare_seconds=True) == timedelta(seconds=2.5)


@pytest.mark.parametrize("arguments, line", [
    (["status", "--timeout", "soon"], "quota-sidecar: --timeout: 'soon': expected a duration longer than zero such "
                                      "as 30s, 5m, 2h, 30d, PT30S or P30D, or a number of seconds"),
    (["plan", "--reassignment", "x.json", "--within", "0s"],
     "quota-sidecar: --within: '0s': expected a duration longer than zero such as 30s, 5m, 2h, 30d, PT30S or P30D"),
    (["report", "--at-risk", "P1Y"], "quota-sidecar: --at-risk: 'P1Y': expected a duration longer than zero such as "
                                     "30s, 5m, 2h, 30d, PT30S or P30D"),
])
def test_a_bad_duration_is_one_line_naming_the_option_the_value_and_what_is_allowed(arguments, line):
    result = CliRunner().invoke(main, arguments)
    assert (result.exit_code, result.stderr) == (2, line + "\n")


@pytest.mark.parametrize("arguments", [["--log-level", "DEBUG", "keys"], ["keys", "--log-level", "DEBUG"]])
def test_the_log_level_goes_before_or_after_the_subcommand(arguments):
    root, kafka = logging.getLogger(), logging.getLogger("kafka")
    levels = root.level, kafka.level
    try:
        root.setLevel(logging.WARNING)
        result = CliRunner().invoke(main, arguments)
        assert result.exit_code == 0, result.output
        assert (root.getEffectiveLevel(), kafka.level) == (logging.DEBUG, logging.INFO)
    finally:
        root.setLevel(levels[0])
        kafka.setLevel(levels[1])


def test_keys_filter_by_a_part_of_the_name_or_a_glob_as_a_table_or_json():
    part = CliRunner().invoke(main, ["keys", "--filter", "cordon"])
    assert part.exit_code == 0 and "`storage.cordon.log.dirs`" in part.output
    assert all("cordon" in row.split("|")[1] for row in part.output.splitlines()[2:])
    found = json.loads(CliRunner().invoke(main, ["keys", "--filter", "replication.*.rate.*", "-o", "json"]).output)
    assert found and all(k["key"].startswith("replication.") and ".rate." in k["key"] for k in found)
    assert set(found[0]) == {"key", "default", "allowed", "meaning"}
    assert CliRunner().invoke(main, ["keys", "--filter", "no such key"]).output.count("\n") == 2  # the header


def test_status_json_is_still_taken_with_a_line_on_stderr():
    result = CliRunner().invoke(main, ["status", "--json", "--url", f"http://127.0.0.1:{closed_port()}"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == ("quota-sidecar: --json is deprecated and goes in the next release: use "
                                             "-o json")


def test_throttle_is_still_the_replication_overrides_hidden_with_a_line_on_stderr():
    nowhere = f"http://127.0.0.1:{closed_port()}"
    result = CliRunner().invoke(main, ["throttle", "get", "--url", nowhere])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "quota-sidecar: quota-sidecar throttle is deprecated and goes in the next release: use quota-sidecar "
        "replication-overrides",
        f"quota-sidecar: no sidecar answered at {nowhere}: [Errno 111] Connection refused"]
    listed = CliRunner().invoke(main, ["--help"]).output.split("Commands:\n")[1].split("\n\n")[0]
    assert "replication-overrides" in listed and "throttle" not in [line.split()[0] for line in listed.splitlines()]


def test_an_override_as_a_table():
    assert override_text({"broker_id": None, "override": None}) == (
        "override: global\nrate: none (the computed rates apply)")
    assert override_text({"broker_id": 2, "override": {"rate": 5, "autoremove": False},
                           "changed": {"by": "127.0.0.1"}}) == (
        "override: broker 2\nrate: 5 bytes/s\nautoremove: False\nchanged by: 127.0.0.1")
    assert override_text({"broker_id": None, "removed": False}) == "override: global\nremoved: no (there was none)"
