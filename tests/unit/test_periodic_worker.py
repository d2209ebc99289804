"""The periodic worker behind the agent's watches and samplers: its thread, its waits, its wake-up, its failures."""

import logging
import threading
import time

import pytest

from harness.waiting import eventually
from quota_sidecar.common.periodic import PeriodicWorker

LONG = 3600.0  # an interval no test waits out
log = logging.getLogger(__name__)


class Ticks:
    """Counts the ticks; each waits for `gate` when given one, and raises `error` when given one."""

    def __init__(self, gate: threading.Event | None = None, error: BaseException | None = None):
        self.count, self.gate, self.error = 0, gate, error
        self.threads: list[tuple[str, bool]] = []  # (name, daemon) of the thread each tick ran in

    def __call__(self) -> None:
        self.count += 1
        self.threads.append((threading.current_thread().name, threading.current_thread().daemon))
        if self.gate is not None:
            self.gate.wait(10)
        if self.error is not None:
            raise self.error


def test_start_runs_the_ticks_in_a_named_daemon_thread_and_stop_joins_it():
    ticks = Ticks()
    worker = PeriodicWorker("ticking", ticks, 0.01).start()
    assert worker.running
    eventually(lambda: ticks.count >= 3, timeout=5, every=0.01)
    worker.stop()
    assert not worker.running and worker.stopping
    stopped_at = ticks.count
    time.sleep(0.05)
    assert ticks.count == stopped_at and set(ticks.threads) == {("ticking", True)}


def test_the_first_tick_waits_an_interval_unless_told_not_to():
    waiting, at_once = Ticks(), Ticks()
    workers = [PeriodicWorker("waiting", waiting, LONG).start(),
               PeriodicWorker("at-once", at_once, LONG, wait_first=False).start()]
    try:
        eventually(lambda: at_once.count == 1, timeout=5, every=0.01)
        assert waiting.count == 0
    finally:
        for worker in workers:
            worker.stop()


@pytest.mark.parametrize("interval", [LONG, None], ids=["long", "none"])
def test_wake_runs_a_tick_before_the_interval_is_over(interval):
    ticks = Ticks()
    worker = PeriodicWorker("woken", ticks, interval).start()
    try:
        time.sleep(0.05)
        assert ticks.count == 0
        worker.wake()
        eventually(lambda: ticks.count == 1, timeout=5, every=0.01)
        worker.wake()
        eventually(lambda: ticks.count == 2, timeout=5, every=0.01)
    finally:
        worker.stop()


def test_a_wake_during_a_tick_runs_one_more_tick_after_it():
    gate = threading.Event()
    ticks = Ticks(gate)
    worker = PeriodicWorker("woken-while-busy", ticks, LONG, wait_first=False).start()
    try:
        eventually(lambda: ticks.count == 1, timeout=5, every=0.01)
        worker.wake()  # the first tick still waits for the gate
        gate.set()
        eventually(lambda: ticks.count == 2, timeout=5, every=0.01)
    finally:
        worker.stop()


def test_the_seconds_a_tick_returns_replace_the_interval_once():
    waits = iter([0.0, 0.0, LONG])
    ticks = []
    worker = PeriodicWorker("asking", lambda: ticks.append(1) or next(waits), LONG, wait_first=False).start()
    try:
        eventually(lambda: len(ticks) == 3, timeout=5, every=0.01)
        time.sleep(0.05)
        assert len(ticks) == 3  # the third asked for a long wait
    finally:
        worker.stop()


@pytest.mark.parametrize("interval", [LONG, None])
def test_stop_during_a_long_interval_returns_at_once(interval):
    worker = PeriodicWorker("idle", Ticks(), interval).start()
    started = time.monotonic()
    worker.stop()
    assert time.monotonic() - started < 1.0 and not worker.running


def test_stop_waits_for_the_tick_under_way_at_most_its_timeout_and_no_tick_follows():
    gate = threading.Event()
    ticks = Ticks(gate)
    worker = PeriodicWorker("busy", ticks, 0.0, wait_first=False).start()
    eventually(lambda: ticks.count == 1, timeout=5, every=0.01)
    started = time.monotonic()
    worker.stop(timeout=0.1)
    assert 0.1 <= time.monotonic() - started < 1.0 and worker.running  # the tick still waits for its gate
    gate.set()
    eventually(lambda: not worker.running, timeout=5, every=0.01)
    assert ticks.count == 1


def test_stop_with_no_timeout_does_not_join():
    gate = threading.Event()
    ticks = Ticks(gate)
    worker = PeriodicWorker("not-joined", ticks, LONG, wait_first=False).start()
    eventually(lambda: ticks.count == 1, timeout=5, every=0.01)
    worker.stop(timeout=0)
    assert worker.running
    gate.set()
    eventually(lambda: not worker.running, timeout=5, every=0.01)


def test_stop_before_start_is_no_error_and_a_later_start_runs_no_tick():
    ticks = Ticks()
    worker = PeriodicWorker("never", ticks, 0.0, wait_first=False)
    worker.stop()
    worker.start()
    eventually(lambda: not worker.running, timeout=5, every=0.01)
    assert ticks.count == 0


def test_wait_within_a_tick_is_cut_short_by_stop_not_by_wake():
    results, waiting = [], threading.Event()

    def tick():
        waiting.set()
        results.append(worker.wait(LONG))

    worker = PeriodicWorker("waiting-within", tick, LONG, wait_first=False)
    worker.start()
    assert waiting.wait(5)
    worker.wake()
    time.sleep(0.05)
    assert results == []
    worker.stop()
    assert results == [True] and not worker.running


def test_a_tick_that_raises_is_handed_to_on_failure_with_its_traceback_and_ends_the_thread(caplog):
    ticks = Ticks(error=RuntimeError("disk gone"))
    exits = []
    worker = PeriodicWorker("failing", ticks, 0.0, wait_first=False, on_exit=lambda: exits.append(1),
                            on_failure=lambda: log.exception("the watch failed"))
    with caplog.at_level(logging.ERROR, logger=__name__):
        worker.start()
        eventually(lambda: not worker.running, timeout=5, every=0.01)
    [record] = caplog.records
    assert record.getMessage() == "the watch failed" and record.levelno == logging.ERROR
    assert record.exc_info[0] is RuntimeError and str(record.exc_info[1]) == "disk gone"
    assert ticks.count == 1 and exits == [1]


def test_a_tick_that_raises_without_on_failure_goes_to_the_excepthook_and_ends_the_thread(monkeypatch):
    hooked = []
    monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append((args.exc_type, args.thread.name)))
    ticks, exits = Ticks(error=LookupError("no such interface")), []
    worker = PeriodicWorker("unhandled", ticks, 0.0, wait_first=False, on_exit=lambda: exits.append(1)).start()
    eventually(lambda: not worker.running, timeout=5, every=0.01)
    assert hooked == [(LookupError, "unhandled")] and ticks.count == 1 and exits == [1]


def test_on_exit_runs_on_the_thread_after_a_stop():
    exits = []
    worker = PeriodicWorker("exiting", Ticks(), LONG, on_exit=lambda: exits.append(threading.current_thread().name))
    worker.start().stop()
    assert exits == ["exiting"]
