"""The agent's own commands: `run` beside a broker, `cleanup` of what the sidecars set."""

from __future__ import annotations

import contextlib
import logging
import sys

import click

from ..common.errors import ConfigError
from ..configuration import config as configuration
from ..observe import host_checks
from .grammar import UNREACHABLE, config_options, epilog, fail, load_config


@click.command(epilog=epilog("run", "quota-sidecar run --config /etc/kafka/server.properties --config secret.properties",
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
    from ..serve import metrics
    from ..serve.http_api import create_app
    from ..serve.http_server import HttpServer
    from ..shutdown import GracefulShutdown
    from ..wiring import build_sidecar

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


@click.command(epilog=epilog("cleanup", "quota-sidecar cleanup --config server.properties --dry-run",
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
    from ..wiring import build_handback

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
