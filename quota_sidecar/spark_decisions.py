"""Binds the decider to the Spark aggregations in spark_jobs/, on a session started once and reused."""

from __future__ import annotations

import logging

from .config import SidecarConfig
from .decider import VolumeJudge
from .throttles import RateJudge


log = logging.getLogger(__name__)


def _on_session(config: SidecarConfig, decide, warm_up: tuple | None = None):
    """Calls decide(spark, ...) on the cached session; a failure drops a shared session so that the next
    poll reconnects (a restarted Spark Connect server), while this poll counts as failed.

    `warm_up` arguments (no rows) run the query once at start-up: its first run plans and compiles it,
    seconds that would otherwise delay the first pass, and with it a move's first throttle.
    """
    from spark_jobs import session  # pyspark loads only where a decision is made

    url = config.spark_url or None
    session.get_session(url)  # start (or connect) now, at start-up, not at the first poll

    def call(*args):
        try:
            return decide(session.get_session(url), *args)
        except Exception:
            session.discard(url)
            raise

    if warm_up is not None:
        try:
            call(*warm_up)
        except Exception as failure:  # the first pass will try again, and count a failure then
            log.warning("warming up the Spark query failed: %s", failure)
    return call


def volume_judge(config: SidecarConfig) -> VolumeJudge:
    from spark_jobs import volume_violations

    limit = config.storage_limit
    return _on_session(config, volume_violations.decide, None if limit is None else ([], limit.as_params()))


def rate_judge(config: SidecarConfig) -> RateJudge:
    from spark_jobs import replication_rates

    return _on_session(config, replication_rates.decide, ([],))
