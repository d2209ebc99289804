"""A Spark aggregation of spark_jobs/ bound to the session of the configured URL: the callables ("judges")
the deciders are given. The session is started once, at start-up, and reused for every poll."""

from __future__ import annotations

from typing import Callable


def on_spark(spark_url: str, decide: Callable) -> Callable:
    """`decide(spark, *args)` as `judge(*args)` on the cached session of `spark_url` (empty: embedded). A
    failure drops a shared session so that the next poll reconnects (a restarted Spark Connect server),
    while this poll counts as failed."""
    from spark_jobs import session  # pyspark loads only where a decision is made

    url = spark_url or None
    session.get_session(url)  # start (or connect) now, at start-up, not at the first poll

    def judge(*args):
        try:
            return decide(session.get_session(url), *args)
        except Exception:
            session.discard(url)
            raise

    return judge
