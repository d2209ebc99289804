"""The agent's parts, wired: what `run` (and `status --direct`) build from a configuration."""

from __future__ import annotations

from typing import Callable

from .common.errors import ConfigError
from .configuration import config as configuration


def build_sidecar(config: configuration.SidecarConfig, measure_network: bool = True, running: bool = True):
    """The sidecar with all its parts; ConfigError for a setting that only a combination of keys makes wrong.
    `running` (run): its clients connect now (the records' writer, the pipeline, whose topics it creates when
    they are missing), not in its first pass; else (status --direct) it creates nothing.

    The throttle factor (spark_jobs/volume_violations.py) and the replication rates
    (spark_jobs/replication_rates.py) are decided by the aggregator, which pipeline/transport.py asks through
    the pipeline's topics; the deciders (decider.py, throttles.py) carry their state between polls.
    """
    from .act.cluster_store import ClusterStore
    from .act.cordoning import Cordoner
    from .common.refusals import REFUSALS
    from .decide import acls
    from .decide.decider import Decider
    from .decide.refusal_lines import RefusalLines
    from .kafka_clients.admin import ClusterAdmin

    # A permission refused is said in one line naming what stops without it (clean-up asks for what run does).
    REFUSALS.explain = RefusalLines(config, [acls.RUN if running else acls.STATUS_DIRECT]).explain
    session = None
    if config.zookeeper_connect:
        from .observe.zookeeper_session import ZooKeeperSession

        session = ZooKeeperSession(config.zookeeper_connect, config.zookeeper_session_timeout.total_seconds())
    admin = ClusterAdmin(config.admin_client)
    if config.state_store == "zookeeper":
        from .act.zookeeper_store import ZooKeeperStore

        store = ZooKeeperStore(session)
    else:
        store = ClusterStore(config.admin_client)
    # Built with the opt-out too: what an earlier run cordoned is handed back.
    cordoner = None if config.broker_id is None else Cordoner(config.broker_id, admin, store, config.cordon_log_dirs)
    znodes = None
    if session is not None:
        from .observe.znode_volumes import ZnodeVolumes

        znodes = ZnodeVolumes(session, config.broker_id)
    sidecar = assemble(
        config, admin, store,
        lambda pipeline, replication: Decider(config, pipeline.judge_volumes, replication.decider,
                                              pipeline.ask_rates_ahead),
        replication_of=(lambda pipeline: build_replication(config, admin, store, pipeline, measure_network))
        if config.replication.enabled else None,
        cordoner=cordoner, znodes=znodes,
        pipeline_of=lambda while_waiting: build_pipeline(config, admin.cluster_id, running, while_waiting),
        cover_of=(lambda woken, holding, pipeline: build_cover(config, admin, pipeline, woken, holding))
        if running and config.covering else None)
    if running:
        sidecar.warm_up()
    return sidecar


def assemble(config: configuration.SidecarConfig, admin, store, decider_of: Callable, clock: Callable | None = None,
             replication_of: Callable | None = None, cordoner=None, znodes=None, pipeline_of: Callable | None = None,
             cover_of: Callable | None = None):
    """The loop and the parts it drives, from the clients and the features chosen: `decider_of(pipeline,
    replication)` the decider; `pipeline_of(while_waiting)` the pipeline, given what the local verdict does while
    a pass waits for the aggregator (None: no aggregator asked); `replication_of(pipeline)` the replication
    throttles' runner; `cover_of(woken, holding, pipeline)` the watch of the brokers whose agent is down, given
    what wakes the loop and whether this agent's verdict holds. A feature left out (None) is a part that does
    nothing."""
    import threading

    from .act.cordoning import NoCordoner
    from .act.local_guard import LocalGuard, NoGuard
    from .act.local_verdict import LocalVerdict, NoVerdict
    from .act.pass_writes import PassWrites
    from .act.quota_writes import QuotaWriter
    from .act.replication import NoReplication
    from .act.snapshot import Counters, utcnow
    from .common.failure_report import FailureReport
    from .decide import descent, quotas
    from .loop import Features, Sidecar
    from .observe.cluster_view import Observer
    from .observe.cover_watch import NoCover
    from .observe.local_watch import LocalWatch, NoWatch, as_volumes, pass_horizon
    from .observe.znode_volumes import NoZnodes
    from .pipeline.transport import NoPipeline

    clock = clock or utcnow
    counters = Counters()
    quota_writer = QuotaWriter(config.quotas, admin, store, counters)
    poll_report = FailureReport("poll", "polls")
    replication_report = FailureReport("replication pass", "replication passes")
    wake = threading.Event()  # the local watch (or the cover's) asks for a pass now
    verdict = decider = None  # built below; the callbacks read them once the loop runs

    def woken() -> None:
        """The watch (or the cover's) asks for a pass now; the verdict is written at once if a pass is under way."""
        wake.set()
        verdict.ahead_of_the_pass()

    watch = NoWatch()
    settings, limit = config.local_watch, config.storage_limit
    if settings.enabled and limit is not None and config.storage_check_enabled:
        offer = None if znodes is None or config.broker_id is None else (
            lambda samples: znodes.offer(as_volumes(config.broker_id, samples, clock())))
        watch = LocalWatch(settings, limit, woken, lambda: pass_horizon(settings, limit, counters.last_poll_seconds),
                           on_sample=offer, fill_window=config.fill_window.total_seconds())
    has_verdict = watch.on or cover_of is not None  # the local watch's verdict, or the cover's
    pipeline = NoPipeline() if pipeline_of is None else pipeline_of(
        (lambda: verdict.while_deciding()) if has_verdict else None)
    replication = NoReplication() if replication_of is None else replication_of(pipeline)
    guard = NoGuard() if replication_of is None or not watch.on else LocalGuard(
        replication, admin, store, limit, config.cancel_moves_at_limit, counters, watch)
    # its heartbeats say whether this agent's verdict holds
    cover = NoCover() if cover_of is None else cover_of(woken, lambda: bool(verdict.holds()), pipeline)
    verdict = NoVerdict() if not has_verdict else LocalVerdict(
        watch, cover, quota_writer, lambda now: decider.judged_locally(now), counters, clock)
    decider = decider_of(pipeline, replication)
    cordoner, znodes = cordoner or NoCordoner(), znodes or NoZnodes()

    def rates_in_force(in_force, owned):
        return quotas.tenant_rates(in_force, owned, config.quotas), descent.in_force(in_force, owned)

    observer = Observer(config, admin, znodes, replication, replication_report, watch, rates_in_force)
    writes = PassWrites(quota_writer, store, verdict, guard, replication, cordoner, counters, poll_report,
                        replication_report)
    return Sidecar(config, admin, store, decider, quota_writer, observer, writes,
                   Features(watch, guard, verdict, cover, replication, cordoner, znodes, pipeline),
                   counters, poll_report, replication_report, wake, clock)


def build_replication(config: configuration.SidecarConfig, admin, store, pipeline, measure_network: bool):
    from .act.replication import ReplicationRunner
    from .decide.throttles import ReplicationDecider
    from .observe.netstats import NetworkSampler

    if config.broker_id is None:
        raise ConfigError(f"replication throttles ({configuration.CAPACITY_KEY}) need this sidecar's broker: "
                          f"set node.id in the file or {configuration.PREFIX}broker.id")
    sampler = None
    if measure_network:
        window = config.replication.network_window.total_seconds()
        sampler = NetworkSampler(config.replication.network_interface, window).start()
    decider = ReplicationDecider(config.replication, pipeline.judge_rates, own_broker=config.broker_id)
    return ReplicationRunner(config.replication, config.broker_id, admin, store, decider, sampler)


def build_pipeline(config: configuration.SidecarConfig, cluster_id: Callable[[], str], create_topics: bool = True,
                   while_waiting: Callable[[], None] | None = None):
    """The agent's end of the pipeline (pipeline.bootstrap.servers; the watched cluster by default)."""
    from .pipeline.transport import Pipeline

    return Pipeline(config.pipeline.client, cluster_id, config.broker_id, config.poll_timeout.total_seconds(),
                    config.pipeline.observations_topic, config.pipeline.decisions_topic, create_topics, while_waiting)


def build_cover(config: configuration.SidecarConfig, admin, pipeline, woken: Callable[[], None],
                holding: Callable[[], bool]):
    """The heartbeats and the watch of the brokers whose agent is down (cover.after), or None. `woken` asks the
    loop for a pass now; `holding` says whether this agent's local verdict holds, in its heartbeats."""
    if not config.covering:
        return None
    from .decide.cover import Cover
    from .observe.cover_watch import CoverWatch
    from .pipeline.heartbeats import Heartbeats

    after, interval = config.cover_after.total_seconds(), config.cover_interval.total_seconds()
    topic = config.pipeline.heartbeats_topic
    heartbeats = Heartbeats(config.pipeline.client, admin.cluster_id, config.broker_id, topic, after,
                            ensure_topic=lambda: pipeline.ensure_heartbeats_topic(topic), holding=holding)
    cover = Cover(heartbeats, config.broker_id, after, interval)
    return CoverWatch(heartbeats, cover.targets, admin, config.storage_limit, interval, config.fill_window.total_seconds(),
                      wake=woken)


def build_handback(config: configuration.SidecarConfig, dry_run: bool = False):
    """`quota-sidecar cleanup`'s Handback, its clients' closing, for the watched cluster and the pipeline's."""
    from .act.cluster_store import ClusterStore
    from .act.handback import DryRun, Handback
    from .kafka_clients.admin import ClusterAdmin

    opened = []

    def opening(client):
        opened.append(client)
        return DryRun(client) if dry_run else client

    if config.state_store == "zookeeper":
        from .act.zookeeper_store import ZooKeeperStore
        from .observe.zookeeper_session import ZooKeeperSession

        timeout = config.zookeeper_session_timeout.total_seconds()
        store = opening(ZooKeeperStore(ZooKeeperSession(config.zookeeper_connect, timeout)))  # its close ends the session
    else:
        store = opening(ClusterStore(config.admin_client))
    admin = opening(ClusterAdmin(config.admin_client))
    pipeline_admin = (lambda: opening(ClusterAdmin(config.pipeline.client))) if config.pipeline.named else None

    def close() -> None:
        for client in reversed(opened):
            client.close()

    settle = 0.0 if dry_run else config.poll_timeout.total_seconds()
    return Handback(config, admin, store, pipeline_admin, settle), close
