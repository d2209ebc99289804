"""Binds the decider to the Spark aggregations in spark_jobs/, on a session started once and reused."""

from __future__ import annotations

from .config import SidecarConfig
from .decider import VolumeJudge
from .throttles import RateJudge


def _on_session(config: SidecarConfig, decide):
    """Calls decide(spark, ...) on the cached session; a failure drops a shared session so that the next
    poll reconnects (a restarted Spark Connect server), while this poll counts as failed."""
    from spark_jobs import session  # pyspark loads only where a decision is made

    url = config.spark_url or None
    session.get_session(url)  # start (or connect) now, at start-up, not at the first poll

    def call(*args):
        try:
            return decide(session.get_session(url), *args)
        except Exception:
            session.discard(url)
            raise

    return call


def volume_judge(config: SidecarConfig) -> VolumeJudge:
    from spark_jobs import volume_violations

    return _on_session(config, volume_violations.decide)


def rate_judge(config: SidecarConfig) -> RateJudge:
    from spark_jobs import replication_rates

    return _on_session(config, replication_rates.decide)
