"""The command line's grammar, shared by every command (the agent's and spark_jobs/commands.py): exit codes, the
help's examples, one-line failures, the configuration's options, durations, -o/--output and --log-level."""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

import click

from ..common.errors import ConfigError
from ..configuration import config as configuration, properties

# Exit codes: one table for every command; each command's help lists its own, and tests/unit/test_cli_exit_codes.py
# provokes each of them.
OK, UNREACHABLE, BAD_CONFIGURATION = 0, 1, 2
_USAGE = "bad configuration or usage"
_SPARK = "a Spark that cannot start"
EXIT_CODES = {
    "run": {OK: "stopped by SIGTERM or Ctrl-C", BAD_CONFIGURATION: f"{_USAGE}, a port that cannot be listened on"},
    "cleanup": {OK: "everything handed back, or nothing left to do",
                UNREACHABLE: "the cluster not reached, or a part not handed back (run it again)",
                BAD_CONFIGURATION: _USAGE},
    "status": {OK: "the status printed", UNREACHABLE: "the cluster could not be read",
               BAD_CONFIGURATION: f"{_USAGE}; no sidecar answered and no --config to read the cluster"},
    **{f"replication-overrides {name}": {
        OK: f"the override {done}", UNREACHABLE: "no sidecar answered, or it failed (HTTP 5xx)",
        BAD_CONFIGURATION: f"{_USAGE}; the sidecar refused the request (HTTP 4xx: the token, the broker)"}
       for name, done in (("get", "printed"), ("set", "set"), ("remove", "removed, or there was none"))},
    "keys": {OK: "the keys printed", BAD_CONFIGURATION: _USAGE},
    "acls": {OK: "the ACLs printed, or with --apply all there",
             UNREACHABLE: "--apply: the cluster not reached, or an ACL not created",
             BAD_CONFIGURATION: _USAGE},
    "aggregate": {OK: "stopped by SIGTERM or Ctrl-C",
                  UNREACHABLE: "the pipeline's cluster not reached, or the aggregation not started again",
                  BAD_CONFIGURATION: f"{_USAGE}, a port that cannot be listened on, {_SPARK}"},
    "evaluate": {OK: "the decisions printed", BAD_CONFIGURATION: f"{_USAGE}, a snapshots file not read, {_SPARK}"},
    "plan": {OK: "the plan printed", UNREACHABLE: "the cluster could not be read",
             BAD_CONFIGURATION: f"{_USAGE}, a reassignment file not read, {_SPARK}"},
    "report": {OK: "the report written", BAD_CONFIGURATION: f"{_USAGE}, a history that cannot be read, {_SPARK}"},
}


def epilog(command: str, *examples: str) -> str:
    """A command's help after its options: examples, then its exit codes (from EXIT_CODES)."""
    lines = ["\b", "Examples:", *(f"  {example}" for example in examples), "", "\b", "Exit codes:"]
    lines += [f"  {code}  {meaning}" for code, meaning in EXIT_CODES[command].items()]
    return "\n".join(lines)


# The libraries' loggers: their lines stay out of the log unless --log-level DEBUG (the sidecar says in one
# line of its own what failed). kafka-python's DEBUG records hold whole requests, SASL passwords included.
LIBRARY_LOGGERS = ("kafka", "py4j", "pyspark", "py.warnings")
SILENT = logging.CRITICAL + 1


def fail(message: str, code: int = BAD_CONFIGURATION) -> NoReturn:
    """One line on stderr and exit code 2 (or `code`); commands call it, never the builders (they raise)."""
    click.echo(f"quota-sidecar: {message}", err=True)
    sys.exit(code)


def load_config(paths: tuple[str, ...], overrides: tuple[str, ...],
                aggregator: bool = False) -> configuration.SidecarConfig:
    try:
        return configuration.load(paths, overrides, aggregator)
    except ConfigError as error:
        fail(str(error))


def config_options(command):
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="Override one property (the client.quota.callback.static. prefix may be left out).")(command)
    return click.option("--config", "config_paths", multiple=True, type=click.Path(dir_okay=False),
                        help="A Java-style properties file, e.g. the broker's server.properties; repeat it to read "
                             "several (a later file's key wins), e.g. one of secrets mounted apart.")(command)


def deprecated(old: str, new: str) -> None:
    """The one line an old spelling prints on stderr; it keeps working for one release."""
    click.echo(f"quota-sidecar: {old} is deprecated and goes in the next release: use {new}", err=True)


class Duration(click.ParamType):
    """30s, 5m, 2h, 30d, PT30S, P30D (and a bare number of seconds where `bare_seconds`), as a timedelta;
    `words` are taken as they are (report's --since ALL)."""
    name = "duration"

    def __init__(self, bare_seconds: bool = False, words: tuple[str, ...] = ()):
        self.bare_seconds, self.words = bare_seconds, words

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        if value.upper() in self.words:
            return value.upper()
        try:
            return properties.command_line_duration(value, self.bare_seconds)
        except ValueError:
            allowed = properties.command_line_duration.allowed
            self.fail(f"{value!r}: expected {allowed}" + (", or a number of seconds" if self.bare_seconds else "")
                      + "".join(f", or {word}" for word in self.words), param, ctx)


def output_option(*choices: str, aliases: dict[str, str] | None = None):
    """-o/--output, its first choice the default; `aliases` maps the old flags (--json, --table) to a choice:
    hidden, deprecated, still working."""
    aliases = aliases or {}

    def alias_given(flag: str):
        def remember(ctx: click.Context, _param, given: bool) -> None:
            if given:
                deprecated(flag, f"-o {aliases[flag]}")
                ctx.meta.setdefault("output alias", aliases[flag])
        return remember

    def resolved(ctx: click.Context, _param, value: str | None) -> str:
        return value or ctx.meta.get("output alias") or choices[0]

    def decorate(command):
        for flag in aliases:
            command = click.option(flag, is_flag=True, hidden=True, expose_value=False,
                                   callback=alias_given(flag))(command)
        return click.option("-o", "--output", type=click.Choice(choices), callback=resolved,
                            help=f"What to print: {', '.join(choices)} (default {choices[0]}).")(command)
    return decorate


LOG_LEVELS = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)
LOG_LEVEL_HELP = "DEBUG also shows the libraries' own logs (kafka-python, py4j, pyspark) from INFO up."


def set_log_level(level: str) -> None:
    """The log on stderr at `level`; given twice (before and after the subcommand), the second one's."""
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level.upper())
    logging.captureWarnings(True)  # warnings of libraries go through py.warnings, quiet like the rest
    for library in LIBRARY_LOGGERS:
        logging.getLogger(library).setLevel(logging.INFO if level.upper() == "DEBUG" else SILENT)


# --log-level after the subcommand as well (quota-sidecar status --log-level DEBUG): the same option on every
# command, applied when given; the group's own sets it before.
_SUBCOMMAND_LOG_LEVEL = click.Option(["--log-level"], type=LOG_LEVELS, expose_value=False, is_eager=True,
                                     help=LOG_LEVEL_HELP + " As before the subcommand.",
                                     callback=lambda _ctx, _param, level: level and set_log_level(level))


def with_global_options(command: click.Command) -> click.Command:
    if _SUBCOMMAND_LOG_LEVEL not in command.params:
        command.params.append(_SUBCOMMAND_LOG_LEVEL)
    for each in getattr(command, "commands", {}).values():
        with_global_options(each)
    return command

