"""The `quota-sidecar` command: run, status, evaluate."""

from __future__ import annotations

import json
import logging
import sys

import click

from . import __version__, config as configuration
from .errors import AdminError, ConfigError


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
    from .spark_decisions import rate_judge, volume_judge

    config = load_config(config_path, overrides)
    try:
        items = load_snapshots(snapshots_path)
        rates = rate_judge(config) if config.replication.enabled else None
        decisions = replay(config, items, volume_judge(config), rates)
    except SnapshotError as error:
        fail(str(error))
    click.echo(json.dumps(decisions, indent=2))


def build_sidecar(config: configuration.SidecarConfig, measure_network: bool = True):
    from .admin import ClusterAdmin
    from .cluster_store import ClusterStore
    from .decider import Decider
    from .loop import Sidecar
    from .spark_decisions import volume_judge

    kwargs = config.admin_client_kwargs()
    admin, store = ClusterAdmin(kwargs), ClusterStore(kwargs)
    runner = build_replication(config, admin, store, measure_network) if config.replication.enabled else None
    decider = Decider(config, volume_judge(config), runner.decider if runner else None)
    return Sidecar(config, admin, store, decider, replication=runner)


def build_replication(config: configuration.SidecarConfig, admin, store, measure_network: bool):
    from .netstats import NetworkSampler
    from .replication import ReplicationRunner
    from .spark_decisions import rate_judge
    from .throttles import ReplicationDecider

    if config.broker_id is None:
        fail("replication throttles need this sidecar's broker: set node.id in the file or "
             f"{configuration.PREFIX}broker.id")
    sampler = None
    if measure_network:
        window = config.replication.network_window.total_seconds()
        sampler = NetworkSampler(config.replication.network_interface, window).start()
    decider = ReplicationDecider(config.replication, rate_judge(config), own_broker=config.broker_id)
    return ReplicationRunner(config, config.broker_id, admin, store, decider, sampler)


@main.command()
@config_options
@click.option("--cleanup", is_flag=True,
              help="When stopped, put back every quota the sidecars set, as it was before.")
def run(config_path: str | None, overrides: tuple[str, ...], cleanup: bool) -> None:
    """Run the sidecar loop until SIGTERM or Ctrl-C."""
    from . import metrics
    from .http_api import HttpServer, create_app
    from .loop import GracefulShutdown

    config = load_config(config_path, overrides)
    log = logging.getLogger("quota_sidecar")
    log.info("starting with %s", config.redacted())
    shutdown = GracefulShutdown().install()
    sidecar = build_sidecar(config)
    sidecar.warm_up()
    server = HttpServer(create_app(sidecar, metrics.registry_for(sidecar)), config.http_host, config.http_port).start()
    try:
        sidecar.run(shutdown)
        if cleanup:
            sidecar.cleanup()
            log.info("clean-up done: every quota the sidecars set is back to what it was")
    finally:
        server.stop()
        sidecar.close()


@main.command()
@config_options
@click.option("--url", help="A running sidecar's HTTP endpoint; default http://<http.host>:<http.port>.")
@click.option("--direct", is_flag=True, help="Read the cluster straight away, without asking a sidecar.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
def status(config_path: str | None, overrides: tuple[str, ...], url: str | None, direct: bool, as_json: bool) -> None:
    """Brokers, log dirs, the throttle factor and the quotas in force, at a glance."""
    from . import status as view

    config = load_config(config_path, overrides) if (config_path or overrides or not url) else None
    url = url or f"http://{config.http_host}:{config.http_port}"
    data, why = (None, None) if direct else _status_from_sidecar(url)
    if data is None:
        if config is None:
            fail(f"no sidecar answered at {url} ({why}); give --config to read the cluster instead")
        if why is not None:  # said on stderr: --json output stays clean
            click.echo(f"no sidecar answered at {url} ({why}); reading the cluster instead", err=True)
        try:
            data = _status_from_cluster(config)
        except AdminError as error:
            fail(f"cannot read the cluster: {error}")
    click.echo(json.dumps(data, indent=2) if as_json else view.render(data))


def _status_from_sidecar(url: str) -> tuple[dict | None, str | None]:
    """(the sidecar's status, None), or (None, why it did not answer)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=5) as response:
            return json.load(response), None
    except urllib.error.URLError as error:
        return None, str(error.reason)
    except (ConnectionError, TimeoutError) as error:
        return None, str(error) or type(error).__name__
    except ValueError as error:
        return None, f"its answer is not JSON: {error}"


def _status_from_cluster(config: configuration.SidecarConfig) -> dict:
    """One poll through the same decision path, reading only: nothing is written to the cluster."""
    from . import status as view
    from .loop import QUOTA_RECORD, of_kind, utcnow

    sidecar = build_sidecar(config, measure_network=False)
    try:
        records = sidecar.read_records()
        decision = sidecar.decider.decide(sidecar.observe(records))
        sidecar.quotas_in_force = sidecar.read_quotas(decision.client_quotas, of_kind(records, QUOTA_RECORD))
        return view.build(sidecar, utcnow(), mode="direct: no sidecar answered, one poll made now")
    finally:
        sidecar.close()


@main.group()
def throttle() -> None:
    """Read, set and remove replication throttle overrides through a sidecar's API."""


def throttle_options(command):
    command = click.option("--broker", "broker_id", type=int, help="A broker's override instead of the global one.")(command)
    command = click.option("--url", help="A sidecar's HTTP endpoint; default http://<http.host>:<http.port>.")(command)
    return config_options(command)


def _call_api(method: str, config_path, overrides, url, broker_id, body=None) -> None:
    import os
    import urllib.error
    import urllib.request

    config = load_config(config_path, overrides) if config_path or overrides else None
    base = url or (f"http://{config.http_host}:{config.http_port}" if config else "http://127.0.0.1:8080")
    token = os.environ.get("QUOTA_SIDECAR_API_TOKEN") or (config.api_token if config else "")
    path = "/throttle" if broker_id is None else f"/throttle/{broker_id}"
    request = urllib.request.Request(base.rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            click.echo(json.dumps(json.load(response), indent=2))
    except urllib.error.HTTPError as error:
        fail(f"{method} {path}: HTTP {error.code}: {json.load(error).get('error', error.reason)}")
    except urllib.error.URLError as error:
        fail(f"no sidecar answered at {base}: {error.reason}")


@throttle.command("get")
@throttle_options
def throttle_get(config_path, overrides, url, broker_id) -> None:
    """Show the global override, or one broker's."""
    _call_api("GET", config_path, overrides, url, broker_id)


@throttle.command("set")
@throttle_options
@click.argument("rate", type=click.IntRange(min=1))
@click.option("--autoremove", is_flag=True, help="Remove the global override once the current moves finish.")
def throttle_set(config_path, overrides, url, broker_id, rate: int, autoremove: bool) -> None:
    """Set an override RATE in bytes/s (token: QUOTA_SIDECAR_API_TOKEN or api.token of --config)."""
    _call_api("PUT", config_path, overrides, url, broker_id, {"rate": rate, "autoremove": autoremove})


@throttle.command("remove")
@throttle_options
def throttle_remove(config_path, overrides, url, broker_id) -> None:
    """Remove the global override, or one broker's."""
    _call_api("DELETE", config_path, overrides, url, broker_id)
