"""The commands that need Spark (pip install 'quota-sidecar[spark]'): `aggregate`, the fleet's aggregator;
`evaluate`, recorded observations replayed through the rules in batch; `plan`, a reassignment's time and
throttle; `report`, the capacity report of the aggregator's history. quota_sidecar/cli names them and
loads this module only when one is called: the agent never imports pyspark. Spark's modules are imported inside
each command, after `needs_spark` has said in one line what to install when pyspark is missing (so
`quota-sidecar --help` lists them without it).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import click

from quota_sidecar.cli.grammar import (BAD_CONFIGURATION, UNREACHABLE, Duration, config_options, deprecated, epilog, fail,
                                       load_config, output_option)
from quota_sidecar.common.errors import AdminError, SparkUnavailable
from quota_sidecar.configuration import config as configuration

REPORT_PAGE = "capacity-report.html"


def needs_spark(command: str) -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as error:
        fail(f"{command} needs pyspark ({error}): pip install 'quota-sidecar[spark]'")


@click.command(epilog=epilog(
    "plan", "quota-sidecar plan --config server.properties --reassignment move.json",
    "quota-sidecar plan --config server.properties --reassignment move.json --within 2h -o json"))
@config_options
@click.option("--reassignment", "plan_path", required=True, type=click.Path(dir_okay=False),
              help='A kafka-reassign-partitions plan: {"version":1,"partitions":[{"topic","partition","replicas"}]}.')
@click.option("--throttle", type=click.IntRange(min=1), help="The throttle to plan for, bytes/s (default: the "
              "rates in force on the brokers, which the sidecars set).")
@click.option("--within", type=Duration(), help="The smallest throttle that ends the move in that time (2h, PT2H).")
@click.option("--measure", default="10s", show_default=True, type=Duration(),
              help="Time between the two readings of the leaders' sizes that give the incoming rates.")
@output_option("table", "json", aliases={"--json": "json"})
def plan(config_paths: tuple[str, ...], overrides: tuple[str, ...], plan_path: str, throttle: int | None,
         within: timedelta | None, measure: timedelta, output: str) -> None:
    """How long a reassignment takes and which throttle it needs (KIP-73's bounds), before it runs. Read-only."""
    needs_spark("plan")
    from quota_sidecar.decide.planning import PlanError, plan_rows, read_cluster, read_plan, render, summary
    from quota_sidecar.kafka_clients.admin import ClusterAdmin
    from spark_jobs import move_plan
    from spark_jobs.judges import on_spark

    if throttle is not None and within is not None:
        fail("--throttle and --within: give one of them")
    config = load_config(config_paths, overrides)
    try:
        moves = read_plan(plan_path)
        admin = ClusterAdmin(config.admin_client)
        try:
            cluster = read_cluster(admin, moves, measure)
        finally:
            admin.close()
        rows = plan_rows(moves, cluster, config.replication, throttle, within)
        brokers = on_spark(config.spark_url, move_plan.decide)(rows) if rows else []
    except (PlanError, SparkUnavailable) as error:
        fail(str(error))
    except AdminError as error:
        fail(f"cannot read the cluster: {error}", UNREACHABLE)
    result = summary(moves, cluster, brokers, throttle, within)
    click.echo(json.dumps(result, indent=2) if output == "json" else render(result))


@click.command(epilog=epilog("evaluate", "quota-sidecar evaluate --config server.properties --snapshots recorded.json"))
@config_options
@click.option("--snapshots", "snapshots_path", required=True, type=click.Path(dir_okay=False),
              help="A JSON list of recorded observations in time order.")
@output_option("json")  # JSON only: -o json is taken as by every command
def evaluate(config_paths: tuple[str, ...], overrides: tuple[str, ...], snapshots_path: str, output: str) -> None:
    """Replay recorded observations through the rules, without a cluster: in this process's Spark (batch),
    or by a running aggregator when pipeline.bootstrap.servers is set (as cluster evaluate-<random>). Prints the
    decisions as JSON."""
    import uuid

    from quota_sidecar.decide.evaluate import SnapshotError, evaluate as replay, load_snapshots
    from quota_sidecar.wiring import build_pipeline

    config = load_config(config_paths, overrides)
    replaying = f"evaluate-{uuid.uuid4().hex[:12]}"
    pipeline = build_pipeline(config, lambda: replaying) if config.pipeline.named else None
    try:
        items = load_snapshots(snapshots_path)
        volumes, rates = _judges(config, pipeline)
        decisions = replay(config, items, volumes, rates)
    except (SnapshotError, SparkUnavailable) as error:
        fail(str(error))
    finally:
        if pipeline is not None:
            pipeline.close()
    click.echo(json.dumps(decisions, indent=2))


def _judges(config: configuration.SidecarConfig, pipeline) -> tuple:
    """(volume judge, rate judge or None): the aggregator's through `pipeline`, else this process's Spark."""
    if pipeline is not None:
        volumes, rates = pipeline.judge_volumes, pipeline.judge_rates
    else:
        needs_spark("evaluate")
        from spark_jobs import replication_rates, volume_violations
        from spark_jobs.judges import on_spark

        volumes = on_spark(config.spark_url, volume_violations.decide)
        rates = on_spark(config.spark_url, replication_rates.decide) if config.replication.enabled else None
    return volumes, rates if config.replication.enabled else None


@click.command(epilog=epilog("aggregate", "quota-sidecar aggregate --config aggregator.properties",
                             "quota-sidecar aggregate --config aggregator.properties --set spark.url=sc://spark:15002"))
@config_options
def aggregate(config_paths: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Decide for every agent that publishes to the pipeline (pipeline.bootstrap.servers), until SIGTERM or
    Ctrl-C: one Spark Structured Streaming query."""
    config = load_config(config_paths, overrides, aggregator=True)
    if not config.spark_url.startswith("sc://"):  # a Spark Connect client needs them
        _without_unused_libraries()
    needs_spark("aggregate")
    from quota_sidecar.common.refusals import REFUSALS
    from quota_sidecar.decide import acls
    from quota_sidecar.decide.refusal_lines import RefusalLines
    from quota_sidecar.shutdown import GracefulShutdown
    from spark_jobs.aggregator import Aggregator, CannotAggregate

    # A permission refused is said in one line naming what stops without it, at start and by Spark's queries.
    REFUSALS.explain = RefusalLines(config, [acls.AGGREGATE]).explain
    aggregator = Aggregator(config)
    shutdown = GracefulShutdown().install()  # a stop asked while Spark starts is honoured once it has started
    try:
        aggregator.serve_forecast()
        aggregator.start()
        shutdown.install()  # again: pyspark's start put a SIGINT handler of its own
        aggregator.supervise(shutdown.event)
    except CannotAggregate as cannot:
        fail(cannot.line, UNREACHABLE if cannot.unreachable else BAD_CONFIGURATION)
    finally:
        aggregator.stop()


# pyspark imports numpy, pandas and pyarrow wherever they are installed (pyspark[connect] installs them) only to learn
# that they are: ~90 MiB of the aggregator's process, whose rules use none of them.
_UNUSED_BY_THE_AGGREGATOR = ("numpy", "pandas", "pyarrow")


def _without_unused_libraries() -> None:
    """This process goes on as if they were not installed (Python's own way: an import of one then fails)."""
    for name in _UNUSED_BY_THE_AGGREGATOR:
        sys.modules.setdefault(name, None)


def _deprecated_json_file(_ctx, _param, path: str | None) -> str | None:
    if path:
        deprecated("--json FILE", "-o json > FILE")
    return path


@click.command(epilog=epilog("report", "quota-sidecar report --config aggregator.properties --out /tmp/report",
                             "quota-sidecar report --history s3a://bucket/history --since 7d --at-risk 30d -o json"))
@config_options
@click.option("--history", "history_path", help="The history (Parquet with the columns cluster, broker, log_dir, "
              "observed_at, total_bytes, available_bytes): a folder, a file or a URL Spark opens. Default: "
              "history.location of --config.")
@click.option("--since", default="30d", show_default=True, type=Duration(words=("ALL",)),
              help="The history's last this much (7d, P30D; ALL for all of it).")
@click.option("--out", "out_dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help=f"The folder of the page, {REPORT_PAGE}.")
@output_option("table", "json")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), hidden=True,
              callback=_deprecated_json_file,
              help="Deprecated: -o json. Also write the numbers as JSON to this file (- for stdout).")
@click.option("--at-risk", default="90d", show_default=True, type=Duration(),
              help="A volume that reaches the limit within it gets a chart (90d, P90D).")
def report(config_paths: tuple[str, ...], overrides: tuple[str, ...], history_path: str | None,
           since: timedelta | str, out_dir: str, output: str, json_path: str | None, at_risk: timedelta) -> None:
    """The capacity report: when each volume reaches the storage limit, from the aggregator's history (one Spark
    batch job). Writes an HTML page with a chart per volume at risk into --out, and prints the volumes by days
    left (or, with -o json, the numbers)."""
    needs_spark("report")
    from datetime import datetime, timezone

    from quota_sidecar.common.errors import ConfigError
    from spark_jobs import report as capacity, report_page, session
    from spark_jobs.history import HistoryError, filesystem_jars

    try:
        config = configuration.load_capacity(config_paths, overrides)
    except ConfigError as error:
        fail(str(error))
    path = history_path or config.history.location
    if not path:
        fail(f"no history: give --history PATH, or {configuration.PREFIX}history.location in --config")
    if "://" not in path and not os.path.exists(path):  # said before a JVM starts
        fail(f"--history {path}: no such file or directory")
    jars = {"spark.jars": ",".join(found)} if (found := filesystem_jars(path, config.history.jars)) else {}
    try:
        spark = session.for_large_data(session.get_session(
            config.spark_url, "quota-sidecar-report", {"spark.sql.session.timeZone": "UTC", **jars}, batch=True))
        built = capacity.build(spark, path, None if since == "ALL" else since, config.storage_limit,
                               datetime.now(timezone.utc), at_risk)
    except (HistoryError, session.SparkStartError) as error:
        fail(str(error))
    except Exception as error:  # Spark's errors come as many types; one line says which
        fail(f"cannot make the report of {path}: {session.reason(error)}")
    finally:
        session.stop_sessions()
    os.makedirs(out_dir, exist_ok=True)
    page = os.path.join(out_dir, REPORT_PAGE)
    with open(page, "w", encoding="utf-8") as file:
        file.write(report_page.html_page(built))
    numbers = json.dumps(capacity.as_json(built), indent=2)
    if json_path and json_path != "-":
        with open(json_path, "w", encoding="utf-8") as file:
            file.write(numbers + "\n")
    click.echo(numbers if output == "json" or json_path == "-" else capacity.as_text(built))
    click.echo(f"wrote {page}" + (f" and {json_path}" if json_path and json_path != "-" else ""), err=True)
