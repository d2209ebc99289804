"""Binds the decider to the Spark aggregations in spark_jobs/, on a session started once and reused."""

from __future__ import annotations

from .config import SidecarConfig
from .decider import VolumeJudge
from .throttles import RateJudge


def _session(config: SidecarConfig):
    from spark_jobs import session  # pyspark loads only where a decision is made

    return session.get_session(config.spark_url or None)


def volume_judge(config: SidecarConfig) -> VolumeJudge:
    from spark_jobs import volume_violations

    spark = _session(config)
    return lambda rows, params: volume_violations.decide(spark, rows, params)


def rate_judge(config: SidecarConfig) -> RateJudge:
    from spark_jobs import replication_rates

    spark = _session(config)
    return lambda rows: replication_rates.decide(spark, rows)
