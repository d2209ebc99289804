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
from typing import NoReturn

import click

from . import __version__
from .common.errors import AdminError, ConfigError
from .configuration import config as configuration
from .decide import acls as permissions
from .observe import host_checks
from .serve import acls_text

# Exit codes, as `quota-sidecar --help` documents them.
OK, UNREACHABLE, BAD_CONFIGURATION = 0, 1, 2
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


# Installed with pip install 'quota-sidecar[spark]'; a module of spark_jobs, never imported by the agent.
SPARK_COMMANDS = {"aggregate": "spark_jobs.commands:aggregate", "evaluate": "spark_jobs.commands:evaluate",
                  "plan": "spark_jobs.commands:plan", "report": "spark_jobs.commands:report"}


class Commands(click.Group):
    """The agent's commands, and the Spark commands imported by name when called or listed (click's
    documented lazy subcommands)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *SPARK_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SPARK_COMMANDS:
            return super().get_command(ctx, name)
        module, attribute = SPARK_COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=Commands, epilog="Exit codes: 0 ok; 1 the cluster could not be reached (status); 2 bad configuration or "
                    "usage: an invalid key or value, a port that cannot be listened on, a Spark that cannot start.")
@click.version_option(__version__, prog_name="quota-sidecar")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="DEBUG also shows the libraries' own logs (kafka-python, py4j, pyspark) from INFO up.")
def main(log_level: str) -> None:
    """A sidecar beside every Kafka broker: disk-full protection and replication throttles."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)  # warnings of libraries go through py.warnings, quiet like the rest
    for library in LIBRARY_LOGGERS:
        logging.getLogger(library).setLevel(logging.INFO if log_level.upper() == "DEBUG" else SILENT)


@main.command()
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


@main.command()
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
    again.

    Exit code 1 when a part could not be handed back (one line each on stderr; run it again).
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


@main.command()
@config_options
@click.option("--url", help=f"A running sidecar's HTTP endpoint; {_DEFAULT_URL}.")
@click.option("--direct", is_flag=True, help="Read the cluster straight away, without asking a sidecar.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
@click.option("--timeout", default=5.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds to wait for the sidecar's answer, and for each read of the cluster with --direct "
                   "(the aggregator's decision is waited for as a pass does, within poll.timeout).")
def status(config_paths: tuple[str, ...], overrides: tuple[str, ...], url: str | None, direct: bool, as_json: bool,
           timeout: float) -> None:
    """Brokers, log dirs, the throttle factor and the quotas in force, at a glance.

    Exit code 1 when the cluster cannot be read (one line on stderr says what could not be reached).
    """
    from .serve import status as view

    config = load_config(config_paths, overrides) if (config_paths or overrides or not url) else None
    url, context = _reach(url, config)
    data, why = (None, None) if direct else _status_from_sidecar(url, timeout, context)
    if data is None:
        if config is None:
            fail(f"no sidecar answered at {url} ({why}); give --config to read the cluster instead")
        if why is not None:  # said on stderr: --json output stays clean
            click.echo(f"no sidecar answered at {url} ({why}); reading the cluster instead", err=True)
        try:
            data = _status_from_cluster(config, timeout)
        except ConfigError as error:
            fail(str(error))
        except AdminError as error:
            fail(f"cannot read the cluster: {error}", UNREACHABLE)
    click.echo(json.dumps(data, indent=2) if as_json else view.render(data))


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


@main.group()
def throttle() -> None:
    """Read, set and remove replication throttle overrides through a sidecar's API."""


def throttle_options(command):
    command = click.option("--broker", "broker_id", type=int, help="A broker's override instead of the global one.")(command)
    command = click.option("--url", help=f"A sidecar's HTTP endpoint; {_DEFAULT_URL}.")(command)
    return config_options(command)


def _call_api(method: str, config_paths, overrides, url, broker_id, body=None) -> None:
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
            click.echo(json.dumps(json.load(response), indent=2))
    except urllib.error.HTTPError as error:
        fail(f"{method} {path}: HTTP {error.code}: {json.load(error).get('error', error.reason)}")
    except urllib.error.URLError as error:
        fail(f"no sidecar answered at {base}: {error.reason}")


@throttle.command("get")
@throttle_options
def throttle_get(config_paths, overrides, url, broker_id) -> None:
    """Show the global override, or one broker's."""
    _call_api("GET", config_paths, overrides, url, broker_id)


@throttle.command("set")
@throttle_options
@click.argument("rate", type=click.IntRange(min=1))
@click.option("--autoremove", is_flag=True, help="Remove the global override once the current moves finish.")
def throttle_set(config_paths, overrides, url, broker_id, rate: int, autoremove: bool) -> None:
    """Set an override RATE in bytes/s (token: QUOTA_SIDECAR_API_TOKEN or api.token of --config)."""
    _call_api("PUT", config_paths, overrides, url, broker_id, {"rate": rate, "autoremove": autoremove})


@throttle.command("remove")
@throttle_options
def throttle_remove(config_paths, overrides, url, broker_id) -> None:
    """Remove the global override, or one broker's."""
    _call_api("DELETE", config_paths, overrides, url, broker_id)


@main.command()
def keys() -> None:
    """Every configuration key: its default, what it allows, what it means (the README's table)."""
    from .configuration.keys import keys_table

    click.echo(keys_table())


@main.command("acls")
@config_options
@click.option("--principal", required=True, help="The principal the process runs as, Type:name (User:quota-sidecar).")
@click.option("--for", "processes", multiple=True, metavar="PROCESS",
              help="What the principal runs: run (the default), aggregate, status-direct, plan, cleanup (what "
                   "run --cleanup adds); repeat it or separate with commas.")
@click.option("--aggregator", is_flag=True, help="The principal runs the aggregator (--for aggregate).")
@click.option("--command-config", metavar="FILE",
              help="The client properties (Java's names) of a principal allowed to create ACLs: passed on to "
                   "kafka-acls.sh, or used by --apply.")
@click.option("--table", "as_table", is_flag=True, help="Print a Markdown table (the README's) instead of commands.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of commands.")
@click.option("--apply", "apply", is_flag=True,
              help="Create the ACLs missing, as the principal of --command-config; remove none. Exit 1 if one fails.")
def acls_command(config_paths: tuple[str, ...], overrides: tuple[str, ...], principal: str, processes: tuple[str, ...],
                 aggregator: bool, command_config: str | None, as_table: bool, as_json: bool, apply: bool) -> None:
    """The kafka-acls commands that grant a principal what a process needs with this configuration, and
    nothing more: each preceded by what needs it and what happens without it. Nothing is applied without
    --apply."""
    kind, _, name = principal.partition(":")
    if not kind or not name or any(c.isspace() for c in kind):
        fail(f"--principal {principal!r}: expected Type:name, e.g. User:quota-sidecar")
    wanted = [p.strip() for each in processes for p in each.split(",") if p.strip()]
    wanted += [permissions.AGGREGATE] * aggregator
    unknown = [p for p in wanted if p not in permissions.PROCESSES]
    if unknown:
        fail(f"--for {unknown[0]}: expected one of {', '.join(permissions.PROCESSES)}")
    if as_table + as_json + apply > 1:
        fail("--table, --json and --apply: give one of them")
    if apply and not command_config:
        fail("--apply needs --command-config FILE: the client properties of a principal allowed to create ACLs")
    wanted = [p for p in permissions.PROCESSES if p in (wanted or [permissions.RUN])]
    config = load_config(config_paths, overrides, aggregator=wanted == [permissions.AGGREGATE])
    found = permissions.required(config, wanted)
    if apply:
        _apply_acls(acls_text.as_json(found, config, principal), command_config)
    elif as_table:
        click.echo(acls_text.table(found))
    elif as_json:
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
        fail(f"nothing applied: {error}", code=1)
    for each in applied:
        acl = each.acl
        what = (f"{acl['permission']} {acl['principal']} {acl['operation']} on {acl['resource_type']} "
                f"{acl['resource_name']} ({acl['bootstrap_servers']})")
        click.echo(f"{'created' if each.created else 'failed' if each.error else 'already there'}: {what}"
                   + (f": {each.error}" if each.error else ""))
    if any(each.error for each in applied):
        sys.exit(1)
