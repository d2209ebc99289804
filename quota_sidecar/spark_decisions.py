"""Binds the decider to the Spark aggregations in spark_jobs/, on a session started once and reused."""

from __future__ import annotations

from .config import SidecarConfig
from .decider import VolumeJudge


def volume_judge(config: SidecarConfig) -> VolumeJudge:
    from spark_jobs import session, volume_violations  # pyspark loads only where a decision is made

    spark = session.get_session(config.spark_url or None)

    def judge(rows: list[dict], params: dict) -> tuple[float, list[dict]]:
        return volume_violations.decide(spark, rows, params)

    return judge
