"""A rule of spark_jobs/ bound to the session of the configured URL: the callables ("judges") `evaluate` and
`plan` give the deciders when they run in this process. The session is started once and reused.

A decision runs on a worker thread and the pass waits for it only until its deadline (deadline.py): a
Spark that hangs fails that poll, and the factor's timeline goes on. Failures leave as one line.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

from quota_sidecar.common import deadline
from quota_sidecar.common.errors import DecisionFailed, PassTimeout, SparkUnavailable
from spark_jobs import session


def on_spark(spark_url: str, decide: Callable, start: bool = True) -> Callable:
    """`decide(spark, *args)` as `judge(*args)` on the cached session of `spark_url` (empty: embedded).

    With `start`, the session starts now, at start-up, not at the first poll: SparkUnavailable when an
    embedded or in-process driver cannot start. A Spark Connect server that does not answer yet is left to
    the polls, which fail and retry. A failure drops a shared session so that the next poll reconnects (a
    restarted Spark Connect server), while this poll counts as failed.
    """
    url = spark_url or None
    if start:
        try:
            session.get_session(url)
        except session.SparkStartError as error:
            if not session.is_connect(url):
                raise SparkUnavailable(str(error)) from None
    worker = _Worker()

    def judge(*args):
        try:
            return worker.run(lambda: decide(session.get_session(url), *args))
        except PassTimeout:
            session.discard(url)
            raise
        except session.SparkStartError as error:
            if not session.is_connect(url):
                raise SparkUnavailable(str(error)) from None
            raise DecisionFailed(str(error)) from None
        except Exception as error:
            session.discard(url)
            raise DecisionFailed(session.reason(error)) from error

    return judge


class _Worker:
    """A daemon thread that runs one call at a time. When the caller stops waiting (its deadline ran out), the
    thread is left to finish that call by itself and the next call gets a new thread."""

    def __init__(self):
        self._calls: queue.SimpleQueue | None = None
        self._lock = threading.Lock()

    def run(self, call: Callable):
        answer: dict = {}
        done = threading.Event()
        with self._lock:
            if self._calls is None:
                self._calls = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(self._calls,), name="spark-decision", daemon=True).start()
            calls = self._calls
        calls.put((call, answer, done))
        if not done.wait(deadline.left(doing="deciding in Spark")):
            with self._lock:
                if self._calls is calls:
                    self._calls = None
                calls.put(None)  # the stuck thread ends once its call returns
            raise deadline.timed_out("waiting for Spark's decision")
        if "error" in answer:
            raise answer["error"]
        return answer["value"]


def _serve(calls: queue.SimpleQueue) -> None:
    while (item := calls.get()) is not None:
        call, answer, done = item
        try:
            answer["value"] = call()
        except Exception as error:
            answer["error"] = error
        finally:
            done.set()
