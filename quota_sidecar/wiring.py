"""The agent's parts, wired: what `run` (and `status --direct`) build from a configuration."""

from __future__ import annotations

from typing import Callable

from . import config as configuration
from .errors import ConfigError, SparkUnavailable


def build_sidecar(config: configuration.SidecarConfig, measure_network: bool = True, start_spark: bool = True):
    """The sidecar with all its parts; ConfigError for a setting that only a combination of keys makes wrong,
    SparkUnavailable when `start_spark` and an embedded Spark cannot start (else it starts at first use).
    With `start_spark` its queries are warmed up too, so that the first poll fits in its deadline.

    The throttle factor is decided in spark_jobs/volume_violations.py, the replication rates in
    spark_jobs/replication_rates.py and throttles.py: by the aggregator when pipeline.bootstrap.servers is
    set (pipeline.py asks it), else in this process's Spark. The deciders carry their state between polls.
    """
    from .admin import ClusterAdmin
    from .cluster_store import ClusterStore
    from .cordoning import Cordoner
    from .decider import Decider
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
    pipeline = build_pipeline(config, admin.cluster_id)
    runner = (build_replication(config, admin, store, measure_network, start_spark, pipeline)
              if config.replication.enabled else None)
    try:
        judge = volume_judge(config, pipeline, start_spark)
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
                      replication=runner, cordoner=cordoner, znodes=znodes, pipeline=pipeline)
    if start_spark:
        sidecar.warm_up()
    return sidecar


def build_replication(config: configuration.SidecarConfig, admin, store, measure_network: bool,
                      start_spark: bool = True, pipeline=None):
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
    decider = ReplicationDecider(config.replication, rate_judge(config, pipeline, start_spark),
                                 own_broker=config.broker_id)
    return ReplicationRunner(config.replication, config.broker_id, admin, store, decider, sampler)


def build_pipeline(config: configuration.SidecarConfig, cluster_id: Callable[[], str]):
    """The agent's end of the pipeline when pipeline.bootstrap.servers is set, else None."""
    if not config.pipeline.enabled:
        return None
    from .pipeline import Pipeline

    return Pipeline(config.pipeline.client, cluster_id, config.broker_id, config.poll_timeout.total_seconds(),
                    config.pipeline.observations_topic, config.pipeline.decisions_topic)


def volume_judge(config: configuration.SidecarConfig, pipeline, start_spark: bool = True):
    """decider.VolumeJudge: the aggregator's through the pipeline, else this process's Spark."""
    if pipeline is not None:
        return pipeline.judge_volumes
    from spark_jobs import volume_violations  # pyspark is imported only where this process decides

    from .judges import on_spark

    return on_spark(config.spark_url, volume_violations.decide, start_spark)


def rate_judge(config: configuration.SidecarConfig, pipeline, start_spark: bool = True):
    """throttles.RateJudge: the aggregator's through the pipeline, else this process's Spark."""
    if pipeline is not None:
        return pipeline.judge_rates
    from spark_jobs import replication_rates

    from .judges import on_spark

    return on_spark(config.spark_url, replication_rates.decide, start_spark)
