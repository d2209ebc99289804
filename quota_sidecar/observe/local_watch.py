"""This broker's own log dirs, sampled with statvfs between passes: a flood is seen within a watch interval.

A pass (DescribeLogDirs of every broker, the aggregator's decision, the writes) takes a fraction of a second;
the check interval is a minute by default, and a producer can fill a disk in less. The watch reads the
log dirs of the sidecar's own broker every `storage.local.watch.interval` (a statvfs call costs
microseconds) and wakes the loop when one is at the limit or would reach it within the trigger horizon
(volumes.in_danger). In a pod, the dirs are the broker's data volume mounted read-only into the sidecar.
Each round's samples also go to `on_sample` (the znode of the sidecar's volumes, znode_volumes.py), which
must not wait: the watch keeps its cadence whatever ZooKeeper does.
"""

from __future__ import annotations

import logging
import os
import statistics
import threading
import time
from collections import deque
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping

from ..common.observation import Volume
from ..common.periodic import PeriodicWorker
from ..common.vocabulary import StorageLimit
from ..configuration.settings import LocalWatchConfig
from .volumes import (GUARD_HORIZON_SECONDS, REACTION_MEMORY_SECONDS, REACTION_WRITES, TRIGGER_WINDOW_SECONDS,
                      VERDICT_WRITE_SECONDS, LocalSample, at_the_limit, current_fill_rate, default_horizon, in_danger,
                      predicted, time_left, until_judged)

log = logging.getLogger(__name__)


def statvfs_sample(log_dir: str, at: float) -> LocalSample:
    """What Kafka reports for a log dir (File.getTotalSpace, File.getUsableSpace), read locally."""
    found = os.statvfs(log_dir)
    return LocalSample(log_dir, at, found.f_blocks * found.f_frsize, found.f_bavail * found.f_frsize)


def as_volumes(broker_id: int, samples: Iterable[LocalSample], now: datetime) -> tuple[Volume, ...]:
    """Samples (monotonic times) as volume measurements of this broker, at wall-clock times relative to `now`."""
    offset = now.timestamp() - time.monotonic()
    return tuple(Volume(broker_id, sample.log_dir, sample.total_bytes, sample.available_bytes,
                        datetime.fromtimestamp(sample.at + offset, timezone.utc)) for sample in samples)


def own_volumes(broker_id: int, log_dirs: Iterable[str], now: datetime) -> list[Volume]:
    """The broker's log dirs read now, as volumes (its znode, znode_volumes.py); none that cannot be read."""
    found = []
    for log_dir in log_dirs:
        try:
            sample = statvfs_sample(log_dir, 0.0)
        except OSError:  # the watch says so, once
            continue
        found.append(Volume(broker_id, log_dir, sample.total_bytes, sample.available_bytes, now))
    return found


def pass_horizon(settings: LocalWatchConfig, limit: StorageLimit, last_pass_seconds: float | None) -> float:
    """How far ahead of the limit a local volume asks for a pass: the configured horizon or a few passes,
    plus the lead time of predicted violations, so that the pass that predicts one runs in time."""
    horizon = (settings.horizon.total_seconds() if settings.horizon is not None else
               default_horizon(last_pass_seconds, settings.interval.total_seconds()))
    return horizon + limit.lead_time.total_seconds()


class LocalWatch:
    """Samples the dirs in a daemon thread; `wake()` is called each time a dir is in the danger zone."""

    on = True

    def __init__(self, config: LocalWatchConfig, limit: StorageLimit, wake: Callable[[], None],
                 horizon: Callable[[], float], read: Callable[[str, float], LocalSample] = statvfs_sample,
                 clock: Callable[[], float] = time.monotonic,
                 on_sample: Callable[[list[LocalSample]], None] | None = None, fill_window: float = 60.0):
        self.limit, self.wake, self.horizon, self.read, self.clock = limit, wake, horizon, read, clock
        self.on_sample = on_sample
        self.interval = config.interval.total_seconds()
        self.dirs = list(config.log_dirs)
        self.unreadable: dict[str, str] = {}  # dir -> why it is not watched (said once)
        self.danger: list[str] = []
        self.at_limit: list[str] = []  # the dirs the last sample found at or below the hard limit
        # The dirs above it that reach it within the agent's reaction time at their fastest fill rate of the fill
        # window, or since they were first judged so: the flood the verdict holds writes nothing now, and would
        # again once lifted. They stay judged until their free space grows (a deletion, retention).
        self.reaching: list[str] = []
        self._held_rates: dict[str, float] = {}  # dir judged at or near the limit -> the fastest rate seen since
        self.reaction = self.interval + VERDICT_WRITE_SECONDS  # seconds from a sample to the quota in force
        self._writes: deque[tuple[float, float]] = deque(maxlen=REACTION_WRITES)  # (sampled at, seconds) of writes
        self._sampled_at: float | None = None
        # Those, and with a lead time the dirs that reach the limit within it at their fill rate over the fill
        # window: the local verdict's (local_verdict.py).
        self.judged: list[str] = []
        # The dirs at the limit or within the horizon at the fastest fill rate of the last `fill_window` seconds:
        # the disk guard's (local_guard.py). A move held by it fills nothing, so its current rate says nothing
        # of the burst that lifting the guard would let through.
        self.guard_zone: list[str] = []
        self.fill_window = fill_window
        # dir -> its samples within the fill window, kept only for a lead time's predictions
        self._fill: dict[str, deque[LocalSample]] = {}
        self._rates: dict[str, deque[tuple[float, float]]] = {}  # dir -> (when, fill rate) within the fill window
        self.until_judged: float | None = None  # seconds from the last sample until a dir is judged violated
        self._history: dict[str, deque[LocalSample]] = {log_dir: deque() for log_dir in self.dirs}
        self._lock = threading.Lock()
        # The watch only speeds passes up: when a round fails, the loop goes on without it.
        self._worker = PeriodicWorker("local-watch", self._round, self.interval, on_failure=lambda: log.exception(
            "the local watch failed; passes keep their interval"))

    def start(self) -> LocalWatch:
        log.info("watching the local log dirs %s every %.2gs", ", ".join(self.dirs), self.interval)
        self._worker.start()
        return self

    def stop(self) -> None:
        self._worker.stop()

    @property
    def running(self) -> bool:
        return self._worker.running

    def latest(self) -> list[LocalSample]:
        """The newest sample of every watched dir."""
        with self._lock:
            return [samples[-1] for samples in self._history.values() if samples]

    def history(self) -> dict[str, list[LocalSample]]:
        """The samples of the last trigger window, per watched dir."""
        with self._lock:
            return {log_dir: list(samples) for log_dir, samples in self._history.items() if samples}

    def exclude(self, reasons: Mapping[str, str]) -> None:
        """Stop watching dirs that turn out not to be the broker's (volumes.foreign_dirs)."""
        with self._lock:
            for log_dir, why in reasons.items():
                if log_dir not in self.unreadable:
                    log.warning("not watching %s locally: %s; passes keep their interval", log_dir, why)
                    self.unreadable[log_dir] = why
                    self._history.pop(log_dir, None)
                    self._fill.pop(log_dir, None)

    def sample(self) -> list[str]:
        """One round: read every dir, keep the window, and return the dirs in the danger zone, those that
        entered the guard zone this round, and those that left the danger zone (a pass lifts what they no longer
        need)."""
        now = self._sampled_at = self.clock()
        found_now = []
        with self._lock:
            self.reaction = self._reaction(now)
            for log_dir in list(self._history):
                try:
                    found = self.read(log_dir, now)
                except OSError as error:
                    if log_dir not in self.unreadable:
                        why = f"cannot read it: {error.strerror or error}"
                        log.warning("not watching %s locally: %s; passes keep their interval", log_dir, why)
                        self.unreadable[log_dir] = why
                    continue
                if self.unreadable.pop(log_dir, None) is not None:
                    log.info("watching %s locally again", log_dir)
                samples = self._history[log_dir]
                samples.append(found)
                found_now.append(found)
                while samples and now - samples[0].at > TRIGGER_WINDOW_SECONDS:
                    samples.popleft()
                if self.limit.lead_time:
                    window = self._fill.setdefault(log_dir, deque())
                    window.append(found)
                    while now - window[0].at > self.fill_window:
                        window.popleft()
            left = time_left(self._history, self.limit)
            peaks = self._peak_rates(now)
            horizon = self.horizon()
            danger_before, self.danger = self.danger, in_danger(left, horizon)
            guarded_before = set(self.guard_zone)
            self.guard_zone = in_danger(time_left(self._history, self.limit, peaks),
                                        max(horizon, GUARD_HORIZON_SECONDS))
            self.at_limit = at_the_limit(left)
            held = {d: max(peaks.get(d, 0.0), self._held_rates.get(d, 0.0)) for d in {*peaks, *self._held_rates}}
            self.reaching = [d for d in at_the_limit(time_left(self._history, self.limit, held), self.reaction)
                             if d not in self.at_limit]
            self._held_rates = {d: held[d] for d in self.at_limit + self.reaching if d in held}
            self.judged = self.at_limit + self.reaching + [d for d in predicted(self._fill, self.limit)
                                                           if d not in self.reaching]
            self.until_judged = until_judged(left, self.limit, self.reaction)
            wake_for = self.danger + [d for d in self.guard_zone if d not in guarded_before and d not in self.danger] \
                + [d for d in danger_before if d not in self.danger]
        if self.on_sample is not None and found_now:
            self.on_sample(found_now)
        return wake_for

    def reacted(self, write_seconds: float) -> None:
        """The local verdict's last write took this long (after the last sample): the reaction time follows."""
        with self._lock:
            self._writes.append((self._sampled_at or 0.0, write_seconds))
            self.reaction = self._reaction(self._sampled_at or 0.0)

    def _reaction(self, now: float) -> float:
        """The watch interval and the median of the verdict's recent writes. Not the last write alone: one a fault
        slowed (while the records' leader was cut off) would make a dir held well above the limit look as if it
        still reached it at the flood's rate, and as no write follows a quota in force already, the throttle would
        stay for good. Writes older than REACTION_MEMORY_SECONDS are forgotten alike."""
        recent = [seconds for at, seconds in self._writes if now - at <= REACTION_MEMORY_SECONDS]
        return self.interval + (statistics.median(recent) if recent else VERDICT_WRITE_SECONDS)

    def _peak_rates(self, now: float) -> dict[str, float]:
        """Each dir's fastest fill rate over the fill window, this round's included."""
        peaks = {}
        for log_dir, samples in self._history.items():
            rates = self._rates.setdefault(log_dir, deque())
            if samples and (rate := current_fill_rate(samples)) is not None:
                rates.append((now, rate))
            while rates and now - rates[0][0] > self.fill_window:
                rates.popleft()
            if rates:
                peaks[log_dir] = max(rate for _, rate in rates)
        return peaks

    def _round(self) -> None:
        if self.sample():
            self.wake()


class NoWatch:
    """Without the local watch (local.watch.enabled=false, or no storage limit): nothing sampled, judged or woken."""

    on = running = False
    interval = float("inf")  # it never samples
    until_judged: float | None = None
    dirs: tuple[str, ...] = ()
    unreadable: dict[str, str] = {}
    danger = at_limit = reaching = judged = guard_zone = ()

    def start(self) -> NoWatch:
        return self

    def stop(self) -> None:
        pass

    def latest(self) -> list[LocalSample]:
        return []

    def history(self) -> dict[str, list[LocalSample]]:
        return {}

    def exclude(self, reasons: Mapping[str, str]) -> None:
        pass

    def reacted(self, write_seconds: float) -> None:
        pass
