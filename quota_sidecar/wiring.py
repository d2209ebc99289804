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
    from .loop import Sidecar

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
    pipeline = build_pipeline(config, admin.cluster_id, create_topics=running)
    runner = build_replication(config, admin, store, pipeline, measure_network) if config.replication.enabled else None
    # Built with the opt-out too: what an earlier run cordoned is handed back.
    cordoner = None if config.broker_id is None else Cordoner(config.broker_id, admin, store, config.cordon_log_dirs)
    znodes = None
    if session is not None:
        from .observe.znode_volumes import ZnodeVolumes

        znodes = ZnodeVolumes(session, config.broker_id)
    decider = Decider(config, pipeline.judge_volumes, runner.decider if runner else None, pipeline.ask_rates_ahead)
    sidecar = Sidecar(config, admin, store, decider, replication=runner, cordoner=cordoner, znodes=znodes,
                      pipeline=pipeline, cover=build_cover(config, admin, pipeline) if running else None)
    if running:
        sidecar.warm_up()
    return sidecar


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


def build_pipeline(config: configuration.SidecarConfig, cluster_id: Callable[[], str], create_topics: bool = True):
    """The agent's end of the pipeline (pipeline.bootstrap.servers; the watched cluster by default)."""
    from .pipeline.transport import Pipeline

    return Pipeline(config.pipeline.client, cluster_id, config.broker_id, config.poll_timeout.total_seconds(),
                    config.pipeline.observations_topic, config.pipeline.decisions_topic, create_topics)


def build_cover(config: configuration.SidecarConfig, admin, pipeline):
    """The heartbeats and the watch of the brokers whose agent is down (cover.after), or None."""
    if not config.covering:
        return None
    from .decide.cover import Cover
    from .observe.cover_watch import CoverWatch
    from .pipeline.heartbeats import Heartbeats

    after, interval = config.cover_after.total_seconds(), config.cover_interval.total_seconds()
    topic = config.pipeline.heartbeats_topic
    heartbeats = Heartbeats(config.pipeline.client, admin.cluster_id, config.broker_id, topic, after,
                            ensure_topic=lambda: pipeline.ensure_heartbeats_topic(topic))
    cover = Cover(heartbeats, config.broker_id, after, interval)
    return CoverWatch(heartbeats, cover.targets, admin, config.storage_limit, interval, config.fill_window.total_seconds())


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
