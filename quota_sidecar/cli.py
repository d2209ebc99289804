"""The `quota-sidecar` command: the agent's (run, status, throttle, keys, acls), and by name those that need
Spark (aggregate, evaluate, plan, report: spark_jobs/commands.py), loaded only when called so that the agent never
imports pyspark."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
from datetime import timedelta
from typing import NoReturn

import click

from . import __version__
from .common.errors import AdminError, ConfigError
from .configuration import config as configuration, properties
from .decide import acls as permissions
from .observe import host_checks
from .serve import acls_text

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


_LOG_LEVELS = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)
_LOG_LEVEL_HELP = "DEBUG also shows the libraries' own logs (kafka-python, py4j, pyspark) from INFO up."


def set_log_level(level: str) -> None:
    """The log on stderr at `level`; given twice (before and after the subcommand), the second one's."""
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level.upper())
    logging.captureWarnings(True)  # warnings of libraries go through py.warnings, quiet like the rest
    for library in LIBRARY_LOGGERS:
        logging.getLogger(library).setLevel(logging.INFO if level.upper() == "DEBUG" else SILENT)


# --log-level after the subcommand as well (quota-sidecar status --log-level DEBUG): the same option on every
# command, applied when given; the group's own sets it before.
_SUBCOMMAND_LOG_LEVEL = click.Option(["--log-level"], type=_LOG_LEVELS, expose_value=False, is_eager=True,
                                     help=_LOG_LEVEL_HELP + " As before the subcommand.",
                                     callback=lambda _ctx, _param, level: level and set_log_level(level))


def with_global_options(command: click.Command) -> click.Command:
    if _SUBCOMMAND_LOG_LEVEL not in command.params:
        command.params.append(_SUBCOMMAND_LOG_LEVEL)
    for each in getattr(command, "commands", {}).values():
        with_global_options(each)
    return command


# Installed with pip install 'quota-sidecar[spark]'; a module of spark_jobs, never imported by the agent.
SPARK_COMMANDS = {"aggregate": "spark_jobs.commands:aggregate", "evaluate": "spark_jobs.commands:evaluate",
                  "plan": "spark_jobs.commands:plan", "report": "spark_jobs.commands:report"}


class Commands(click.Group):
    """The agent's commands, and the Spark commands imported by name when called or listed (click's
    documented lazy subcommands); each with the global options, and a bad value said in one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *SPARK_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SPARK_COMMANDS:
            command = super().get_command(ctx, name)
        else:
            module, attribute = SPARK_COMMANDS[name].split(":")
            command = getattr(importlib.import_module(module), attribute)
        return command and with_global_options(command)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.BadParameter as error:  # one line, as the configuration's bad values
            fail(f"{error.param.opts[-1] if error.param is not None else error.param_hint}: {error.message}")


@click.group(cls=Commands, epilog="\b\nExamples:\n  quota-sidecar status --log-level DEBUG\n"
                                  "  quota-sidecar replication-overrides get -o json\n\n"
                                  "Exit codes: 0 ok; 1 the cluster or a sidecar could not be reached, or a part "
                                  "failed; 2 bad configuration or usage. Each command's --help lists its own.")
@click.version_option(__version__, prog_name="quota-sidecar")
@click.option("--log-level", default="INFO", show_default=True, type=_LOG_LEVELS,
              help=_LOG_LEVEL_HELP + " Before or after the subcommand.")
def main(log_level: str) -> None:
    """A sidecar beside every Kafka broker: disk-full protection and replication throttles."""
    set_log_level(log_level)


@main.command(epilog=epilog("run", "quota-sidecar run --config /etc/kafka/server.properties --config secret.properties",
                            "quota-sidecar run --config server.properties --set http.port=8081 --cleanup"))
@config_options
@click.option("--cleanup", is_flag=True,
              help="When stopped, put back every quota the sidecars set, as it was before, and uncordon the log dirs "
                   "this one cordoned.")
def run(config_paths: tuple[str, ...], overrides: tuple[str, ...], cleanup: bool) -> None:
    """Run the sidecar loop until SIGTERM or Ctrl-C."""
    config = load_config(config_paths, overrides)
    try:
        host_checks.check_host(config)
    except ConfigError as error:
        fail(str(error))
    from .serve import metrics
    from .serve.http_api import create_app
    from .serve.http_server import HttpServer
    from .shutdown import GracefulShutdown
    from .wiring import build_sidecar

    log = logging.getLogger("quota_sidecar")
    log.info("starting with %s", config.redacted())
    try:
        sidecar = build_sidecar(config)
    except ConfigError as error:
        fail(str(error))
    if config.broker_id is None and config.cordon_log_dirs:
        log.info("log dirs are not cordoned: storage.cordon.log.dirs needs this sidecar's broker "
                 "(node.id in the file or %sbroker.id)", configuration.PREFIX)
    shutdown = GracefulShutdown().install()
    app = create_app(sidecar.snapshot, sidecar.store, config.api_token, metrics.registry_for(sidecar.snapshot),
                     config.http_plain_changes)
    servers = []
    try:
        servers.append(HttpServer(app, config.http_host, config.http_port, config.http_tls).start())
        if config.http_plain_port is not None:
            servers.append(HttpServer(app, config.http_host, config.http_plain_port).start(
                "/metrics, /status, /healthz, /readyz; /throttle changes only from this host"))
    except OSError as error:  # a port taken since check_host looked
        for server in servers:
            server.stop()
        sidecar.close()
        fail(host_checks.listen_error(config, error, *(("http.plain.port", config.http_plain_port) if servers else ())))
    if config.http_plain_changes and config.api_token:
        log.warning("override changes are taken over plain HTTP from any address (http.plain.changes=true): the "
                    "token travels in clear text")
    try:
        sidecar.run(shutdown)
        if cleanup:
            sidecar.cleanup()
            log.info("clean-up done: every quota the sidecars set is back to what it was")
    finally:
        for server in servers:
            server.stop()
        sidecar.close()


@main.command(epilog=epilog("cleanup", "quota-sidecar cleanup --config server.properties --dry-run",
                            "quota-sidecar cleanup --config server.properties --topics"))
@config_options
@click.option("--dry-run", is_flag=True, help="Say what would be handed back; change nothing.")
@click.option("--topics", "delete_topics", is_flag=True,
              help="Also delete the sidecars' topics (records, observations, decisions, heartbeats) once everything "
                   "else is handed back.")
def cleanup(config_paths: tuple[str, ...], overrides: tuple[str, ...], dry_run: bool, delete_topics: bool) -> None:
    """Hand back everything the sidecars set in the cluster, for every broker: the client quotas (the default
    user's, the tenants', the sidecars' own exemption), the replication throttle rates and throttled-replica lists,
    the cordoned log dirs; forget the overrides and the cancelled moves. A value someone changed since the sidecars
    wrote it is left as it is. One line per change on stdout; a second run finds nothing left to do. Agents still
    running write nothing more once it has run (helm uninstall runs it in a pre-delete hook); a new start protects
    again. A part not handed back is said in one line on stderr.
    """
    from .wiring import build_handback

    config = load_config(config_paths, overrides)
    handback, close = build_handback(config, dry_run)
    if dry_run:
        click.echo("dry run: nothing is changed; cleanup would make these changes:")
    with _changes_on_stdout():
        try:
            handback.run(delete_topics)
        finally:
            close()
    for failure in handback.failures:
        click.echo(f"quota-sidecar: not handed back: {failure}", err=True)
    if handback.failures:
        sys.exit(UNREACHABLE)


class _Printed(logging.Handler):
    """The sidecar's change lines as plain lines: INFO on stdout, the rest on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(record.getMessage(), err=record.levelno > logging.INFO)


@contextlib.contextmanager
def _changes_on_stdout():
    logger = logging.getLogger("quota_sidecar")
    handler, propagate, level = _Printed(logging.INFO), logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(min(logging.INFO, logging.getLogger().getEffectiveLevel()))
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, level


_DEFAULT_URL = ("default this host's: http.host and http.plain.port when set, else http.port (https with http.tls.*, "
                "trusting exactly its certificate file)")


@main.command(epilog=epilog("status", "quota-sidecar status",
                            "quota-sidecar status --url https://kafka-0.kafka:8080 -o json",
                            "quota-sidecar status --direct --config server.properties --timeout 30s"))
@config_options
@click.option("--url", help=f"A running sidecar's HTTP endpoint; {_DEFAULT_URL}.")
@click.option("--direct", is_flag=True, help="Read the cluster straight away, without asking a sidecar.")
@output_option("table", "json", aliases={"--json": "json"})
@click.option("--timeout", default="5s", show_default=True, type=Duration(bare_seconds=True),
              help="How long to wait for the sidecar's answer, and for each read of the cluster with --direct "
                   "(the aggregator's decision is waited for as a pass does, within poll.timeout).")
def status(config_paths: tuple[str, ...], overrides: tuple[str, ...], url: str | None, direct: bool, output: str,
           timeout: timedelta) -> None:
    """Brokers, log dirs, the throttle factor and the quotas in force, at a glance. When the cluster cannot be
    read, one line on stderr says what could not be reached."""
    from .serve import status as view

    config = load_config(config_paths, overrides) if (config_paths or overrides or not url) else None
    url, context = _reach(url, config)
    timeout = timeout.total_seconds()
    data, why = (None, None) if direct else _status_from_sidecar(url, timeout, context)
    if data is None:
        if config is None:
            fail(f"no sidecar answered at {url} ({why}); give --config to read the cluster instead")
        if why is not None:  # said on stderr: -o json stays clean
            click.echo(f"no sidecar answered at {url} ({why}); reading the cluster instead", err=True)
        try:
            data = _status_from_cluster(config, timeout)
        except ConfigError as error:
            fail(str(error))
        except AdminError as error:
            fail(f"cannot read the cluster: {error}", UNREACHABLE)
    click.echo(json.dumps(data, indent=2) if output == "json" else view.render(data))


def _reach(url: str | None, config: configuration.SidecarConfig | None):
    """(URL, TLS context) of the sidecar to ask: --url as given (another sidecar's https: its CA), else this host's,
    over https trusting exactly its certificate file."""
    return (url, None) if url else (_endpoint(config), _pinned(config))


def _endpoint(config: configuration.SidecarConfig | None) -> str:
    """Where this host's sidecar answers: its plain listener when it has one beside https."""
    if config is None:
        return "http://127.0.0.1:8080"
    if config.http_tls is not None and config.http_plain_port is None:
        return f"https://{config.http_host}:{config.http_port}"
    return f"http://{config.http_host}:{config.http_plain_port or config.http_port}"


def _pinned(config: configuration.SidecarConfig | None):
    """For https to this host's sidecar: trust exactly its certificate file, whatever names the certificate
    carries (the pod's own, not 127.0.0.1)."""
    if config is None or config.http_tls is None:
        return None
    import ssl

    context = ssl.create_default_context(cafile=config.http_tls[0])
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf itself is the anchor
    context.check_hostname = False
    return context


def _status_from_sidecar(url: str, timeout: float, context=None) -> tuple[dict | None, str | None]:
    """(the sidecar's status, None), or (None, why it did not answer)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=timeout, context=context) as response:
            return json.load(response), None
    except urllib.error.URLError as error:
        return None, str(error.reason)
    except (ConnectionError, TimeoutError) as error:
        return None, str(error) or type(error).__name__
    except ValueError as error:
        return None, f"its answer is not JSON: {error}"


def _status_from_cluster(config: configuration.SidecarConfig, timeout: float) -> dict:
    """One read-only pass (serve/direct_status.look) through the same decision path: nothing is written to the
    cluster and no topic is created; the aggregator is asked once the cluster has been read, so that an unreachable
    cluster is told at once."""
    from .act.snapshot import utcnow
    from .serve import status as view
    from .serve.direct_status import look
    from .wiring import build_sidecar

    sidecar = build_sidecar(config, measure_network=False, running=False)
    try:
        return view.build(look(sidecar, timeout), utcnow(), mode="direct: no sidecar answered, one poll made now")
    finally:
        sidecar.close()


@main.group("replication-overrides", epilog="\b\nExamples:\n  quota-sidecar replication-overrides get\n"
                                          "  quota-sidecar replication-overrides set 50000000 --autoremove")
def replication_overrides() -> None:
    """Read, set and remove the replication throttle overrides (KIP-73 rates every sidecar applies instead of the
    computed ones) through a sidecar's API. The producer throttle is not set here."""


def override_options(command):
    command = output_option("table", "json")(command)
    command = click.option("--broker", "broker_id", type=int, help="A broker's override instead of the global one.")(command)
    command = click.option("--url", help=f"A sidecar's HTTP endpoint; {_DEFAULT_URL}.")(command)
    return config_options(command)


def _call_api(method: str, config_paths, overrides, url, broker_id, output: str, body=None) -> None:
    import urllib.error
    import urllib.request

    config = load_config(config_paths, overrides) if config_paths or overrides else None
    base, context = _reach(url, config)
    token = os.environ.get("QUOTA_SIDECAR_API_TOKEN") or (config.api_token if config else "")
    path = "/throttle" if broker_id is None else f"/throttle/{broker_id}"
    request = urllib.request.Request(base.rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        fail(f"{method} {path}: HTTP {error.code}: {json.load(error).get('error', error.reason)}",
             UNREACHABLE if error.code >= 500 else BAD_CONFIGURATION)
    except urllib.error.URLError as error:
        fail(f"no sidecar answered at {base}: {error.reason}", UNREACHABLE)
    except (ConnectionError, TimeoutError) as error:
        fail(f"no sidecar answered at {base}: {error or type(error).__name__}", UNREACHABLE)
    click.echo(json.dumps(answer, indent=2) if output == "json" else _override_text(answer))


def _override_text(answer: dict) -> str:
    """An override's answer as lines of `name: value`: whose, the rate (or none), who changed it last."""
    lines = [f"override: {'global' if answer.get('broker_id') is None else 'broker ' + str(answer['broker_id'])}"]
    if "removed" in answer:
        return "\n".join([*lines, f"removed: {'yes' if answer['removed'] else 'no (there was none)'}"])
    found = answer.get("override") or {}
    lines.append(f"rate: {found['rate']} bytes/s" if "rate" in found else "rate: none (the computed rates apply)")
    lines += [f"{name}: {value}" for name, value in found.items() if name != "rate"]
    lines += [f"changed {name}: {value}" for name, value in (answer.get("changed") or {}).items()]
    return "\n".join(lines)


@replication_overrides.command("get", epilog=epilog(
    "replication-overrides get", "quota-sidecar replication-overrides get",
    "quota-sidecar replication-overrides get --broker 1 -o json"))
@override_options
def override_get(config_paths, overrides, url, broker_id, output) -> None:
    """Show the global override, or one broker's."""
    _call_api("GET", config_paths, overrides, url, broker_id, output)


@replication_overrides.command("set", epilog=epilog(
    "replication-overrides set",
    "QUOTA_SIDECAR_API_TOKEN=... quota-sidecar replication-overrides set 50000000 --autoremove",
    "quota-sidecar replication-overrides set 20000000 --broker 2 --config server.properties"))
@override_options
@click.argument("rate", type=click.IntRange(min=1))
@click.option("--autoremove", is_flag=True, help="Remove the global override once the current moves finish.")
def override_set(config_paths, overrides, url, broker_id, output, rate: int, autoremove: bool) -> None:
    """Set an override RATE in bytes/s (token: QUOTA_SIDECAR_API_TOKEN or api.token of --config)."""
    _call_api("PUT", config_paths, overrides, url, broker_id, output, {"rate": rate, "autoremove": autoremove})


@replication_overrides.command("remove", epilog=epilog(
    "replication-overrides remove", "quota-sidecar replication-overrides remove",
    "quota-sidecar replication-overrides remove --broker 2 --url https://kafka-2.kafka:8080"))
@override_options
def override_remove(config_paths, overrides, url, broker_id, output) -> None:
    """Remove the global override, or one broker's."""
    _call_api("DELETE", config_paths, overrides, url, broker_id, output)


@main.group("throttle", hidden=True, commands=replication_overrides.commands)
@click.pass_context
def throttle(ctx: click.Context) -> None:
    """Deprecated: replication-overrides (its old name, printing JSON as it did)."""
    deprecated("quota-sidecar throttle", "quota-sidecar replication-overrides")
    ctx.meta.setdefault("output alias", "json")


@main.command(epilog=epilog("keys", "quota-sidecar keys --filter replication",
                            "quota-sidecar keys --filter 'storage.*.bytes' -o json"))
@click.option("--filter", "pattern", metavar="TEXT",
              help="Only the keys whose name contains TEXT, or matches it as a glob when it has * ? or [ "
                   "(storage.*.bytes).")
@output_option("table", "json")
def keys(pattern: str | None, output: str) -> None:
    """Every configuration key: its default, what it allows, what it means, as a Markdown table (the README's) or
    JSON."""
    from .configuration.keys import keys_json, keys_table

    click.echo(json.dumps(keys_json(pattern), indent=2) if output == "json" else keys_table(pattern))


@main.command("acls", epilog=epilog(
    "acls", "quota-sidecar acls --config server.properties --principal User:quota-sidecar",
    "quota-sidecar acls --config aggregator.properties --principal User:aggregator --for aggregate -o table",
    "quota-sidecar acls --config server.properties --principal User:quota-sidecar --apply "
    "--command-config admin.properties"))
@config_options
@click.option("--principal", required=True, help="The principal the process runs as, Type:name (User:quota-sidecar).")
@click.option("--for", "processes", multiple=True, metavar="PROCESS",
              help="What the principal runs: run (the default), aggregate, status-direct, plan, cleanup (what "
                   "run --cleanup adds); repeat it or separate with commas.")
@click.option("--aggregator", is_flag=True, help="The principal runs the aggregator (--for aggregate).")
@click.option("--command-config", metavar="FILE",
              help="The client properties (Java's names) of a principal allowed to create ACLs: passed on to "
                   "kafka-acls.sh, or used by --apply.")
@output_option("commands", "table", "json", aliases={"--table": "table", "--json": "json"})
@click.option("--apply", "apply", is_flag=True,
              help="Create the ACLs missing, as the principal of --command-config; remove none. Exit 1 if one fails.")
def acls_command(config_paths: tuple[str, ...], overrides: tuple[str, ...], principal: str, processes: tuple[str, ...],
                 aggregator: bool, command_config: str | None, output: str, apply: bool) -> None:
    """The ACLs a principal needs for a process with this configuration, and nothing more: as kafka-acls commands
    (each preceded by what needs it and what happens without it), a Markdown table (the README's) or JSON. Nothing
    is applied without --apply."""
    kind, _, name = principal.partition(":")
    if not kind or not name or any(c.isspace() for c in kind):
        fail(f"--principal {principal!r}: expected Type:name, e.g. User:quota-sidecar")
    wanted = [p.strip() for each in processes for p in each.split(",") if p.strip()]
    wanted += [permissions.AGGREGATE] * aggregator
    unknown = [p for p in wanted if p not in permissions.PROCESSES]
    if unknown:
        fail(f"--for {unknown[0]}: expected one of {', '.join(permissions.PROCESSES)}")
    if apply and output != "commands":
        fail(f"-o {output} and --apply: give one of them")
    if apply and not command_config:
        fail("--apply needs --command-config FILE: the client properties of a principal allowed to create ACLs")
    wanted = [p for p in permissions.PROCESSES if p in (wanted or [permissions.RUN])]
    config = load_config(config_paths, overrides, aggregator=wanted == [permissions.AGGREGATE])
    found = permissions.required(config, wanted)
    if apply:
        _apply_acls(acls_text.as_json(found, config, principal), command_config)
    elif output == "table":
        click.echo(acls_text.table(found))
    elif output == "json":
        click.echo(json.dumps(acls_text.as_json(found, config, principal), indent=2))
    else:
        click.echo(acls_text.commands(found, config, principal, wanted, command_config))


def _apply_acls(entries: list[dict], command_config: str) -> None:
    """One line per ACL: created, already there, or why it failed (exit 1)."""
    from .act.acl_writes import apply
    from .configuration.admin_client import client_kwargs
    from .configuration.properties import read_properties

    try:
        admin = client_kwargs({**read_properties(command_config), "bootstrap.servers": entries[0]["bootstrap_servers"]})
    except (ConfigError, OSError) as error:
        fail(f"--command-config {command_config}: {error}")
    try:
        applied = apply(entries, admin)
    except AdminError as error:
        fail(f"nothing applied: {error}", UNREACHABLE)
    for each in applied:
        acl = each.acl
        what = (f"{acl['permission']} {acl['principal']} {acl['operation']} on {acl['resource_type']} "
                f"{acl['resource_name']} ({acl['bootstrap_servers']})")
        click.echo(f"{'created' if each.created else 'failed' if each.error else 'already there'}: {what}"
                   + (f": {each.error}" if each.error else ""))
    if any(each.error for each in applied):
        sys.exit(UNREACHABLE)
