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
AGGREGATION_RESTART_AFTER = 5.0  # s: between a failed micro-batch and the query's new start


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
    """Replay recorded observations through the decision path, without a cluster: in this process's Spark,
    or by a running aggregator when pipeline.bootstrap.servers is set (as cluster evaluate-<random>)."""
    import uuid

    from .evaluate import SnapshotError, evaluate as replay, load_snapshots
    from .wiring import build_pipeline, rate_judge, volume_judge

    config = load_config(config_paths, overrides)
    replaying = f"evaluate-{uuid.uuid4().hex[:12]}"
    pipeline = build_pipeline(config, lambda: replaying)
    try:
        items = load_snapshots(snapshots_path)
        rates = rate_judge(config, pipeline) if config.replication.enabled else None
        decisions = replay(config, items, volume_judge(config, pipeline), rates)
    except (SnapshotError, SparkUnavailable) as error:
        fail(str(error))
    finally:
        if pipeline is not None:
            pipeline.close()
    click.echo(json.dumps(decisions, indent=2))


@main.command()
@config_options
def aggregate(config_paths: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Decide for every agent that publishes to the pipeline (pipeline.bootstrap.servers), until SIGTERM or
    Ctrl-C: one Spark Structured Streaming query. Needs pip install 'quota-sidecar[spark]'."""
    import socket
    import tempfile

    from .admin import ClusterAdmin
    from .pipeline import end_offsets, ensure_topics
    from .properties import SIDECAR_CLIENT_ID
    from .shutdown import GracefulShutdown

    config = load_config(config_paths, overrides, aggregator=True)
    pipeline = config.pipeline
    try:
        from spark_jobs import aggregation, session
    except ImportError as error:
        fail(f"aggregate needs pyspark ({error}): pip install 'quota-sidecar[spark]'")
    jars = pipeline.kafka_jars or _connector_jars()
    checkpoint = pipeline.checkpoint or os.path.join(tempfile.gettempdir(), "quota-sidecar-aggregator")
    log = logging.getLogger("quota_sidecar")
    try:
        with ClusterAdmin(pipeline.client) as admin:
            ensure_topics(admin, pipeline.observations_topic, pipeline.decisions_topic)
        starting = end_offsets(pipeline.client, pipeline.observations_topic)
        spark = session.get_session(config.spark_url, "quota-sidecar-aggregator",
                                    {"spark.jars": ",".join(jars), "spark.sql.session.timeZone": "UTC"})
        # The agents' client id: the exemption they write keeps the pipeline out of the throttle it carries.
        kafka_options = {"client.id": SIDECAR_CLIENT_ID, **pipeline.java_properties}

        def started():
            return aggregation.start(spark, kafka_options, pipeline.observations_topic, pipeline.decisions_topic,
                                     checkpoint, f"{socket.gethostname()}/{os.getpid()}", starting)

        query = started()
    except AdminError as error:
        fail(f"cannot reach the pipeline cluster: {error}", UNREACHABLE)
    except Exception as error:  # Spark's errors come as many types; one line says which
        fail(f"cannot start the aggregation: {session.reason(error)}")
    shutdown = GracefulShutdown().install()  # after Spark's start: pyspark puts a SIGINT handler of its own
    log.info("deciding for the agents of %s: %s -> %s (checkpoint %s)", pipeline.bootstrap_servers,
             pipeline.observations_topic, pipeline.decisions_topic, checkpoint)
    try:
        while not shutdown.event.wait(1.0):
            if not query.isActive:  # a micro-batch failed (a write timed out...): resume from the checkpoint
                log.warning("the aggregation stopped: %s; starting it again in %.0fs",
                            session.reason(query.exception()), AGGREGATION_RESTART_AFTER)
                if shutdown.event.wait(AGGREGATION_RESTART_AFTER):
                    break
                try:
                    query = started()
                except Exception as error:
                    fail(f"cannot start the aggregation again: {session.reason(error)}", UNREACHABLE)
    finally:
        if query.isActive:
            query.stop()
        session.stop_sessions()


def _connector_jars() -> list[str]:
    """The jars of Spark's Kafka connector that `make setup` resolved (build/spark-kafka.classpath)."""
    listed = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "spark-kafka.classpath")
    try:
        with open(listed, encoding="utf-8") as file:
            return [jar for jar in file.read().strip().split(":") if jar]
    except OSError:
        fail(f"no jars of Spark's Kafka connector: set {configuration.PREFIX}aggregator.kafka.jars, or run "
             f"`make setup` in the checkout ({listed})")


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
    from .wiring import build_sidecar

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
    from .wiring import build_sidecar

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
