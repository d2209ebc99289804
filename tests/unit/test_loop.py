"""The loop without a cluster: a store that fails on purpose (fault injection) drives failed polls and failed
passes; the loop counts them, publishes what it saw, writes nothing, and stops between passes."""

import threading
from datetime import timedelta

import pytest

from quota_sidecar.common import records
from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.decide.decider import Decider
from quota_sidecar.decide.throttle_factor import FALLBACK, INITIAL
from quota_sidecar.loop import Sidecar
from quota_sidecar.shutdown import GracefulShutdown
from quota_sidecar.wiring import assemble

from builders import AT, Clock, MemoryStore, sidecar_config
from harness.waiting import eventually


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



def sidecar(store, clock=None, **keys) -> Sidecar:
    config = sidecar_config(**keys)
    return assemble(config, UnreachedAdmin(), store, lambda *_: Decider(config, never_judged), clock=clock or Clock())


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


def test_a_local_dir_at_the_limit_starts_passes_long_before_the_interval(tmp_path, caplog):
    """The local watch reads a real dir of this machine: a ratio limit of 1.0 puts it at the limit at once."""
    shutdown = GracefulShutdown()
    store = FailingStore(RetryableAdminError("no broker"), after=lambda reads: reads == 4 and shutdown.set())
    car = sidecar(store, **{"storage.check.interval": "PT1H", "storage.local.log.dirs": str(tmp_path),
                            "storage.per.volume.limit.min.available.bytes": None,
                            "storage.per.volume.limit.min.available.ratio": "1.0"})

    loop = threading.Thread(target=car.run, args=(shutdown,))
    with caplog.at_level("INFO", logger="quota_sidecar.loop"):
        loop.start()
        loop.join(timeout=30)

    assert not loop.is_alive(), "four passes did not come within 30 s at a check interval of an hour"
    assert store.reads == 4 and car.snapshot().counters.watch_passes == 3  # the first pass is the regular one
    assert caplog.text.count(f"pass now: local dir {tmp_path} at or near the limit") == 1
    assert car.snapshot().local_watch.near_the_limit == (str(tmp_path),)


def test_a_pass_the_watch_asks_for_waits_while_the_dir_is_judged_violated_only_during_it(tmp_path):
    car = sidecar(FailingStore(RuntimeError("unused")), **{"storage.local.log.dirs": str(tmp_path)})
    car.counters.last_poll_seconds = 0.4
    car.watch.danger, car.watch.until_judged = [str(tmp_path)], 0.2  # as a sample 0.2 s before the crossing finds
    car.wake.set()
    assert not car._pass_now() and car._holding  # its decision would see the free space of just before the crossing;
    # a pass due at the check interval waits too
    car.watch.until_judged = 0.0  # the next sample: at the limit
    car.wake.set()
    assert car._pass_now() and car.counters.watch_passes == 1


def test_a_dir_away_from_the_limit_again_brings_one_pass_now_to_lift_what_it_no_longer_needs(tmp_path, caplog):
    car = sidecar(FailingStore(RuntimeError("unused")), **{"storage.local.log.dirs": str(tmp_path)})
    car.watch.danger = [str(tmp_path)]
    car.wake.set()
    assert car._pass_now()
    car.watch.danger = []  # records deleted: the watch's next sample finds room, and wakes the loop
    car.wake.set()
    with caplog.at_level("INFO", logger="quota_sidecar.loop"):
        assert car._pass_now()
    car.wake.set()  # a wake for something else afterwards: no pass of the watch's
    assert not car._pass_now() and car.counters.watch_passes == 2
    assert "local dirs away from the limit again: a pass now, then every 60s" in caplog.text


def test_without_local_dirs_there_is_no_watch_and_the_interval_holds():
    car = sidecar(FailingStore(RuntimeError("unused")))
    assert not car.watch.on and car.snapshot().local_watch is None


def test_shutdown_wakes_a_loop_waiting_for_its_next_pass():
    shutdown = GracefulShutdown()
    store = FailingStore(RetryableAdminError("no broker"))
    car = sidecar(store, **{"storage.check.interval": "PT1H"})
    loop = threading.Thread(target=car.run, args=(shutdown,))
    loop.start()
    while store.reads == 0:
        threading.Event().wait(0.01)
    shutdown.set()
    loop.join(timeout=5)
    assert not loop.is_alive() and store.reads == 1


def test_an_agent_running_when_cleanup_handed_back_writes_nothing_more_and_a_new_one_goes_on(caplog):
    """cleanup's record, written after this agent started: its passes stop before the cluster (UnreachedAdmin),
    its quota writes too; an agent started after the record reads past it."""
    store = MemoryStore()
    running = sidecar(store)
    store.put(records.key(records.CLEANUP), {"at": AT.timestamp() + 1.0})
    shutdown = GracefulShutdown()
    loop = threading.Thread(target=running.run, args=(shutdown,))
    loop.start()
    try:
        eventually(lambda: running.handed_back, timeout=10, what="the agent standing down")
        assert running.quota_writer.stopped and running.counters.pass_failures == 0
        running.quota_writer.apply(None, {})  # the local verdict's way in writes nothing either
    finally:
        shutdown.set()
        loop.join(timeout=30)
    assert caplog.text.count("quota-sidecar cleanup handed back what the sidecars set") == 1

    started_after = sidecar(store, clock=Clock(AT + timedelta(seconds=2)))
    assert (records.CLEANUP,) in started_after.read_records() and not started_after.handed_back


def test_the_running_watch_is_published_before_the_first_pass_ends(tmp_path):
    """/readyz reads the snapshot: a first pass that waits for the aggregator must not hold a broker's start."""
    shutdown = GracefulShutdown()
    seen = []
    store = FailingStore(RetryableAdminError("no broker"),
                         after=lambda reads: (seen.append(car.snapshot().local_watch.running), shutdown.set()))
    car = sidecar(store, **{"storage.local.log.dirs": str(tmp_path)})
    assert car.snapshot().local_watch.running is False  # built, not started

    loop = threading.Thread(target=car.run, args=(shutdown,))
    loop.start()
    loop.join(timeout=30)
    car.close()

    assert not loop.is_alive() and seen == [True]  # read while the first pass was under way
    assert car.snapshot().local_watch.running is True  # published by that pass, before close() stopped it
