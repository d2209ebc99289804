"""The loop without a cluster: a store that fails on purpose (fault injection) drives failed polls and failed
passes; the loop counts them, publishes what it saw, writes nothing, and stops between passes."""

import threading
from datetime import timedelta

import pytest

from quota_sidecar.decider import Decider
from quota_sidecar.errors import RetryableAdminError
from quota_sidecar.loop import GracefulShutdown, Sidecar
from quota_sidecar.throttle_factor import FALLBACK, INITIAL

from builders import AT, sidecar_config


class FailingStore:
    """Fault injection: every read of the sidecars' records raises `error`; `after` is called on each read."""

    def __init__(self, error: Exception, after=lambda reads: None):
        self.error, self.after, self.reads = error, after, 0

    def read_all(self, create: bool = True):
        self.reads += 1
        self.after(self.reads)
        raise self.error

    def close(self):
        pass


class UnreachedAdmin:
    """Fault injection: an admin that fails the test if a pass gets as far as the cluster."""

    def close(self):
        pass

    def __getattr__(self, name):
        raise AssertionError(f"the admin was called ({name}) although the records could not be read")


def never_judged(rows, limit):
    raise AssertionError("volumes were judged although the poll failed")


class Clock:
    def __init__(self):
        self.now = AT

    def __call__(self):
        return self.now


def sidecar(store, clock=None, **keys) -> Sidecar:
    config = sidecar_config(**keys)
    return Sidecar(config, UnreachedAdmin(), store, Decider(config, never_judged), clock=clock or Clock())


def test_a_failed_poll_is_counted_published_and_writes_nothing():
    car = sidecar(FailingStore(RetryableAdminError("DescribeCluster failed: timed out")))

    decision = car.run_pass()

    snapshot = car.snapshot()
    assert decision.error == "reading the sidecars' records: DescribeCluster failed: timed out"
    assert (snapshot.counters.polls, snapshot.counters.poll_failures, snapshot.counters.writes) == (1, 1, 0)
    assert snapshot.decision is decision and snapshot.factor.source == INITIAL and snapshot.factor.factor == 1.0


def test_failed_polls_past_the_validity_apply_the_fallback_once():
    clock = Clock()
    car = sidecar(FailingStore(RetryableAdminError("no broker")), clock, **{
        "throttle.factor.validity.duration": "PT5M", "throttle.factor.fallback": "0.5"})

    for minute in range(8):
        clock.now = AT + timedelta(minutes=minute)
        car.run_pass()

    assert car.snapshot().factor.source == FALLBACK and car.snapshot().factor.factor == 0.5
    assert car.snapshot().counters.fallback_applied == 1 and car.snapshot().counters.poll_failures == 8


def test_a_pass_that_raises_is_counted_and_the_loop_goes_on_until_shutdown(caplog):
    shutdown = GracefulShutdown()
    store = FailingStore(RuntimeError("a bug"), after=lambda reads: reads == 3 and shutdown.event.set())
    car = sidecar(store, **{"storage.check.interval": "PT0.01S"})

    loop = threading.Thread(target=car.run, args=(shutdown,))
    loop.start()
    loop.join(timeout=30)

    assert not loop.is_alive(), "the loop did not stop on shutdown"
    assert store.reads == 3 and car.snapshot().counters.pass_failures == 3
    assert caplog.text.count("sidecar pass failed; the next pass retries") == 3
    assert "RuntimeError: a bug" in caplog.text  # with its traceback


@pytest.mark.parametrize("keys", [{}, {"storage.check.interval": "PT0S"}])
def test_shutdown_before_the_loop_runs_no_pass(keys):
    shutdown = GracefulShutdown()
    shutdown.event.set()
    store = FailingStore(RuntimeError("must not run"))

    sidecar(store, **keys).run(shutdown)

    assert store.reads == 0
