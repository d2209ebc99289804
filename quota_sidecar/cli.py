"""The `quota-sidecar` command: run, status, evaluate."""

from __future__ import annotations

import json
import logging
import sys

import click

from . import __version__, config as configuration
from .errors import ConfigError


def fail(message: str) -> None:
    """One line on stderr and a non-zero exit, before anything touched the cluster."""
    click.echo(f"quota-sidecar: {message}", err=True)
    sys.exit(2)


def load_config(path: str | None, overrides: tuple[str, ...]) -> configuration.SidecarConfig:
    try:
        return configuration.load(path, overrides)
    except ConfigError as error:
        fail(str(error))


def config_options(command):
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="Override one property (the client.quota.callback.static. prefix may be left out).")(command)
    return click.option("--config", "config_path", type=click.Path(dir_okay=False),
                        help="A Java-style properties file, e.g. the broker's server.properties.")(command)


@click.group()
@click.version_option(__version__, prog_name="quota-sidecar")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def main(log_level: str) -> None:
    """A sidecar beside every Kafka broker: disk-full protection and replication throttles."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


@main.command()
@config_options
@click.option("--snapshots", "snapshots_path", required=True, type=click.Path(dir_okay=False),
              help="A JSON list of recorded observations in time order.")
def evaluate(config_path: str | None, overrides: tuple[str, ...], snapshots_path: str) -> None:
    """Replay recorded observations through the decision path (Spark included), without a cluster."""
    from .evaluate import SnapshotError, evaluate as replay, load_snapshots
    from .spark_decisions import volume_judge

    config = load_config(config_path, overrides)
    try:
        items = load_snapshots(snapshots_path)
        decisions = replay(config, items, volume_judge(config))
    except SnapshotError as error:
        fail(str(error))
    click.echo(json.dumps(decisions, indent=2))
