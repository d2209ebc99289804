"""The `quota-sidecar` command (run, status, evaluate, plan, throttle, keys), and the wiring of the sidecar's parts."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import NoReturn

import click

from . import __version__, config as configuration, host_checks
from .errors import AdminError, ConfigError, SparkUnavailable

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


def load_config(paths: tuple[str, ...], overrides: tuple[str, ...]) -> configuration.SidecarConfig:
    try:
        return configuration.load(paths, overrides)
    except ConfigError as error:
        fail(str(error))


def config_options(command):
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="Override one property (the client.quota.callback.static. prefix may be left out).")(command)
    return click.option("--config", "config_paths", multiple=True, type=click.Path(dir_okay=False),
                        help="A Java-style properties file, e.g. the broker's server.properties; repeat it to read "
                             "several (a later file's key wins), e.g. one of secrets mounted apart.")(command)


@click.group(epilog="Exit codes: 0 ok; 1 the cluster could not be reached (status); 2 bad configuration or "
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
@click.option("--reassignment", "plan_path", required=True, type=click.Path(dir_okay=False),
              help='A kafka-reassign-partitions plan: {"version":1,"partitions":[{"topic","partition","replicas"}]}.')
@click.option("--throttle", type=click.IntRange(min=1), help="The throttle to plan for, bytes/s (default: the "
              "rates in force on the brokers, which the sidecars set).")
@click.option("--within", help="An ISO-8601 duration: the smallest throttle that ends the move in that time.")
@click.option("--measure", default="PT10S", show_default=True,
              help="Time between the two readings of the leaders' sizes that give the incoming rates.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
def plan(config_paths: tuple[str, ...], overrides: tuple[str, ...], plan_path: str, throttle: int | None,
         within: str | None, measure: str, as_json: bool) -> None:
    """How long a reassignment takes and which throttle it needs (KIP-73's bounds), before it runs. Read-only."""
    from spark_jobs import move_plan

    from .admin import ClusterAdmin
    from .judges import on_spark
    from .planning import PlanError, plan_rows, read_cluster, read_plan, render, summary
    from .properties import positive_duration

    if throttle is not None and within is not None:
        fail("--throttle and --within: give one of them")
    durations = {}
    for name, value in (("--within", within), ("--measure", measure)):
        try:
            durations[name] = None if value is None else positive_duration(value)
        except ValueError:
            fail(f"{name}={value!r}: expected {positive_duration.allowed}")
    config = load_config(config_paths, overrides)
    try:
        moves = read_plan(plan_path)
        admin = ClusterAdmin(config.admin_client)
        try:
            cluster = read_cluster(admin, moves, durations["--measure"])
        finally:
            admin.close()
        rows = plan_rows(moves, cluster, config.replication, throttle, durations.get("--within"))
        brokers = on_spark(config.spark_url, move_plan.decide)(rows) if rows else []
    except (PlanError, SparkUnavailable) as error:
        fail(str(error))
    except AdminError as error:
        fail(f"cannot read the cluster: {error}", UNREACHABLE)
    result = summary(moves, cluster, brokers, throttle, durations.get("--within"))
    click.echo(json.dumps(result, indent=2) if as_json else render(result))


@main.command()
@config_options
@click.option("--snapshots", "snapshots_path", required=True, type=click.Path(dir_okay=False),
              help="A JSON list of recorded observations in time order.")
def evaluate(config_paths: tuple[str, ...], overrides: tuple[str, ...], snapshots_path: str) -> None:
    """Replay recorded observations through the decision path (Spark included), without a cluster."""
    from spark_jobs import replication_rates, volume_violations

    from .evaluate import SnapshotError, evaluate as replay, load_snapshots
    from .judges import on_spark

    config = load_config(config_paths, overrides)
    try:
        items = load_snapshots(snapshots_path)
        rates = on_spark(config.spark_url, replication_rates.decide) if config.replication.enabled else None
        decisions = replay(config, items, on_spark(config.spark_url, volume_violations.decide), rates)
    except (SnapshotError, SparkUnavailable) as error:
        fail(str(error))
    click.echo(json.dumps(decisions, indent=2))


def build_sidecar(config: configuration.SidecarConfig, measure_network: bool = True, start_spark: bool = True):
    """The sidecar with all its parts; ConfigError for a setting that only a combination of keys makes wrong,
    SparkUnavailable when `start_spark` and an embedded Spark cannot start (else it starts at first use).
    With `start_spark` its queries are warmed up too, so that the first poll fits in its deadline.

    The throttle factor is decided in spark_jobs/volume_violations.py, the replication rates in
    spark_jobs/replication_rates.py and throttles.py; the deciders carry their state between polls.
    """
    from spark_jobs import volume_violations

    from .admin import ClusterAdmin
    from .cluster_store import ClusterStore
    from .cordoning import Cordoner
    from .decider import Decider
    from .judges import on_spark
    from .loop import Sidecar

    session = None
    if config.zookeeper_connect:
        from .zookeeper_session import ZooKeeperSession

        session = ZooKeeperSession(config.zookeeper_connect, config.zookeeper_session_timeout.total_seconds())
    admin = ClusterAdmin(config.admin_client)
    if config.state_store == "zookeeper":
        from .zookeeper_store import ZooKeeperStore

        store = ZooKeeperStore(session)
    else:
        store = ClusterStore(config.admin_client)
    runner = (build_replication(config, admin, store, measure_network, start_spark)
              if config.replication.enabled else None)
    try:
        judge = on_spark(config.spark_url, volume_violations.decide, start_spark)
    except SparkUnavailable:
        if runner is not None:
            runner.close()
        raise
    # Built with the opt-out too: what an earlier run cordoned is handed back.
    cordoner = None if config.broker_id is None else Cordoner(config.broker_id, admin, store, config.cordon_log_dirs)
    znodes = None
    if session is not None:
        from .znode_volumes import ZnodeVolumes

        znodes = ZnodeVolumes(session, config.broker_id)
    sidecar = Sidecar(config, admin, store, Decider(config, judge, runner.decider if runner else None),
                      replication=runner, cordoner=cordoner, znodes=znodes)
    if start_spark:
        sidecar.warm_up()
    return sidecar


def build_replication(config: configuration.SidecarConfig, admin, store, measure_network: bool,
                      start_spark: bool = True):
    from spark_jobs import replication_rates

    from .judges import on_spark
    from .netstats import NetworkSampler
    from .replication import ReplicationRunner
    from .throttles import ReplicationDecider

    if config.broker_id is None:
        raise ConfigError(f"replication throttles ({configuration.CAPACITY_KEY}) need this sidecar's broker: "
                          f"set node.id in the file or {configuration.PREFIX}broker.id")
    sampler = None
    if measure_network:
        window = config.replication.network_window.total_seconds()
        sampler = NetworkSampler(config.replication.network_interface, window).start()
    decider = ReplicationDecider(config.replication, on_spark(config.spark_url, replication_rates.decide, start_spark),
                                 own_broker=config.broker_id)
    return ReplicationRunner(config.replication, config.broker_id, admin, store, decider, sampler)


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
    from . import metrics
    from .http_api import HttpServer, create_app
    from .shutdown import GracefulShutdown

    log = logging.getLogger("quota_sidecar")
    log.info("starting with %s", config.redacted())
    try:
        sidecar = build_sidecar(config)
    except (ConfigError, SparkUnavailable) as error:
        fail(str(error))
    if sidecar.cordoner is None and config.cordon_log_dirs:
        log.info("log dirs are not cordoned: storage.cordon.log.dirs needs this sidecar's broker "
                 "(node.id in the file or %sbroker.id)", configuration.PREFIX)
    shutdown = GracefulShutdown().install()  # after Spark's start: pyspark puts a SIGINT handler of its own
    app = create_app(sidecar.snapshot, sidecar.store, config.api_token, metrics.registry_for(sidecar.snapshot))
    try:
        server = HttpServer(app, config.http_host, config.http_port).start()
    except OSError as error:  # taken since check_host looked
        sidecar.close()
        fail(host_checks.listen_error(config, error))
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
@click.option("--timeout", default=5.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds to wait for the sidecar's answer, and for each read of the cluster with --direct "
                   "(an embedded Spark's start is not counted).")
def status(config_paths: tuple[str, ...], overrides: tuple[str, ...], url: str | None, direct: bool, as_json: bool,
           timeout: float) -> None:
    """Brokers, log dirs, the throttle factor and the quotas in force, at a glance.

    Exit code 1 when the cluster cannot be read (one line on stderr says what could not be reached).
    """
    from . import status as view

    config = load_config(config_paths, overrides) if (config_paths or overrides or not url) else None
    url = url or f"http://{config.http_host}:{config.http_port}"
    data, why = (None, None) if direct else _status_from_sidecar(url, timeout)
    if data is None:
        if config is None:
            fail(f"no sidecar answered at {url} ({why}); give --config to read the cluster instead")
        if why is not None:  # said on stderr: --json output stays clean
            click.echo(f"no sidecar answered at {url} ({why}); reading the cluster instead", err=True)
        try:
            data = _status_from_cluster(config, timeout)
        except (ConfigError, SparkUnavailable) as error:
            fail(str(error))
        except AdminError as error:
            fail(f"cannot read the cluster: {error}", UNREACHABLE)
    click.echo(json.dumps(data, indent=2) if as_json else view.render(data))


def _status_from_sidecar(url: str, timeout: float) -> tuple[dict | None, str | None]:
    """(the sidecar's status, None), or (None, why it did not answer)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=timeout) as response:
            return json.load(response), None
    except urllib.error.URLError as error:
        return None, str(error.reason)
    except (ConnectionError, TimeoutError) as error:
        return None, str(error) or type(error).__name__
    except ValueError as error:
        return None, f"its answer is not JSON: {error}"


def _status_from_cluster(config: configuration.SidecarConfig, timeout: float) -> dict:
    """One read-only pass (Sidecar.look) through the same decision path: nothing is written to the cluster.
    Spark starts only once the cluster has been read: an unreachable cluster is told at once."""
    from . import status as view
    from .snapshot import utcnow

    sidecar = build_sidecar(config, measure_network=False, start_spark=False)
    try:
        return view.build(sidecar.look(timeout), utcnow(), mode="direct: no sidecar answered, one poll made now")
    finally:
        sidecar.close()


@main.group()
def throttle() -> None:
    """Read, set and remove replication throttle overrides through a sidecar's API."""


def throttle_options(command):
    command = click.option("--broker", "broker_id", type=int, help="A broker's override instead of the global one.")(command)
    command = click.option("--url", help="A sidecar's HTTP endpoint; default http://<http.host>:<http.port>.")(command)
    return config_options(command)


def _call_api(method: str, config_paths, overrides, url, broker_id, body=None) -> None:
    import os
    import urllib.error
    import urllib.request

    config = load_config(config_paths, overrides) if config_paths or overrides else None
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
    from .keys import keys_table

    click.echo(keys_table())
