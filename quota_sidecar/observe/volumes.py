"""Volume records (proposal 047), the memory of the last volumes of every broker, each volume's recent
history (from which the Spark job computes its fill rate), and when a local volume needs a pass now."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Mapping, Sequence

from ..common.observation import Volume
from ..common.vocabulary import StorageLimit


VolumesByBroker = Mapping[int, tuple[Volume, ...]]
VolumeKey = tuple[int, str]  # (broker id, log dir)
History = Mapping[VolumeKey, tuple[Volume, ...]]  # each volume's measurements, oldest first


def remember(previous: VolumesByBroker, answered: VolumesByBroker, now: datetime,
             validity: timedelta) -> dict[int, tuple[Volume, ...]]:
    """The volumes a decision considers after a successful poll.

    Brokers that answered bring their fresh volumes. A broker that dropped out of the cluster view keeps
    its last volumes while they are younger than the validity duration, so a full broker that restarts
    does not release the throttle.
    """
    kept = {broker: volumes for broker, volumes in previous.items()
            if broker not in answered and volumes and now - _newest(volumes) < validity}
    return {**kept, **{broker: tuple(volumes) for broker, volumes in answered.items()}}


def by_broker(brokers: Iterable[int], volumes: Iterable[Volume]) -> dict[int, tuple[Volume, ...]]:
    grouped: dict[int, list[Volume]] = {broker: [] for broker in brokers}
    for volume in volumes:
        grouped.setdefault(volume.broker_id, []).append(volume)
    return {broker: tuple(found) for broker, found in grouped.items()}


# A volume's history goes into every observation an agent publishes, several a second while a dir is near the
# limit, onto every broker's disk: all of the local watch's samples (ten a second) would fill the disk they protect.
# A dozen points a window give the fill rate's slope as well.
HISTORY_POINTS = 12


def recorded(history: History, seen: Iterable[Volume], now: datetime,
             window: timedelta) -> dict[VolumeKey, tuple[Volume, ...]]:
    """`history` with the measurements `seen`: usable ones only, none more than `window` before `now` (a volume
    with none left drops out), and of each volume the newest in each 1/HISTORY_POINTS of the window.

    `seen` may be any source of measurements of a volume: a poll's volumes (the remembered volume of an
    absent broker comes back with its old time and is kept once), or samples a sidecar takes of its own
    broker's volumes between polls.
    """
    points = {key: {volume.observed_at: volume for volume in volumes} for key, volumes in history.items()}
    for volume in seen:
        if volume.usable:
            points.setdefault(key_of(volume), {})[volume.observed_at] = volume
    spacing = window.total_seconds() / HISTORY_POINTS
    recent = {key: _newest_each(spacing, (volume for at, volume in sorted(by_time.items()) if now - at <= window))
              for key, by_time in points.items()}
    return {key: volumes for key, volumes in recent.items() if volumes}


def _newest_each(spacing: float, volumes: Iterable[Volume]) -> tuple[Volume, ...]:
    """Measurements oldest first → the newest in each `spacing` seconds of the clock, oldest first."""
    newest: dict[int, Volume] = {}
    for volume in volumes:
        newest[math.floor(volume.observed_at.timestamp() / spacing)] = volume
    return tuple(newest.values())


def with_history(history: History, volumes: Iterable[Volume], now: datetime) -> list[dict]:
    """The Spark job's rows: every volume's measurements in `history`, and the volume itself, each at its
    time relative to `now`. The volume is there even when it is older than the window (an absent broker's
    remembered volume): it is judged, and alone it has no fill rate."""
    rows = []
    for volume in volumes:
        points = {point.observed_at: point for point in history.get(key_of(volume), ())}
        points.setdefault(volume.observed_at, volume)
        rows += [point.as_row(now) for _, point in sorted(points.items())]
    return rows


def key_of(volume: Volume) -> VolumeKey:
    return volume.broker_id, volume.log_dir


def _newest(volumes: tuple[Volume, ...]) -> datetime:
    return max(volume.observed_at for volume in volumes)


# ---------------------------------------------------------------- the local watch (local_watch.py)

# The fill rate that triggers a pass is measured over this much of the newest local samples: long enough
# to smooth a producer's batches, short enough to see a flood begin within a second.
TRIGGER_WINDOW_SECONDS = 1.0
HORIZON_PASSES = 3  # by default a pass starts when the limit is this many last-pass durations away
HOLD_PASSES = 2  # and a pass waits when a dir would be judged violated within this many
# Between the sample that shows a dir about to reach the limit and its quota in force: the watch interval and the
# local verdict's write, this long until the first write is measured (LocalWatch.reacted).
VERDICT_WRITE_SECONDS = 0.1
REACTION_WRITES = 5  # the writes whose median is the verdict's write time (a fault's slow one is an outlier)
REACTION_MEMORY_SECONDS = 300.0  # and a write older than this is forgotten: with none left, VERDICT_WRITE_SECONDS
# The disk guard looks at least this far ahead (local_guard.py): the watch sees a move's burst within a few samples
# and the guard is in force a few tenths of a second later, time in which a move at full speed must not cross.
GUARD_HORIZON_SECONDS = 2.0


@dataclass(frozen=True)
class LocalSample:
    """One statvfs reading of a local log dir, the way Kafka measures it (usable and total space)."""
    log_dir: str
    at: float  # monotonic seconds
    total_bytes: int
    available_bytes: int


def fill_rate(samples: Sequence[LocalSample]) -> float | None:
    """Bytes/s by which available space shrinks: the least-squares slope over the samples, negated; None
    with fewer than two distinct times."""
    if len(samples) < 2:
        return None
    n = len(samples)
    mean_t = sum(s.at for s in samples) / n
    mean_a = sum(s.available_bytes for s in samples) / n
    spread = sum((s.at - mean_t) ** 2 for s in samples)
    if spread == 0:
        return None
    return -sum((s.at - mean_t) * (s.available_bytes - mean_a) for s in samples) / spread


def current_fill_rate(samples: Sequence[LocalSample]) -> float | None:
    """The fill rate over the trigger window of the newest samples."""
    newest = samples[-1]
    return fill_rate([s for s in samples if newest.at - s.at <= TRIGGER_WINDOW_SECONDS])


def seconds_to_limit(samples: Sequence[LocalSample], limit: StorageLimit, rate: float | None = None) -> float | None:
    """0 at or below the limit now; the time to it at `rate` (the current fill rate unless given); None when
    not filling (the rule's, StorageLimit.judge)."""
    newest = samples[-1]
    rate = current_fill_rate(samples) if rate is None else rate
    return limit.judge(newest.available_bytes, newest.total_bytes, rate)["seconds_to_limit"]


def time_left(history: Mapping[str, Sequence[LocalSample]], limit: StorageLimit,
              rates: Mapping[str, float] | None = None) -> dict[str, float]:
    """Seconds to the limit of every local dir at it or filling (seconds_to_limit), once per watch round; at
    the given fill rates when there are (else the current ones)."""
    return {log_dir: seconds for log_dir, samples in history.items()
            if samples and (seconds := seconds_to_limit(samples, limit, (rates or {}).get(log_dir))) is not None}


def at_the_limit(left: Mapping[str, float], reaction: float = 0.0) -> list[str]:
    """The local dirs at or below the limit now, or that reach it within `reaction` seconds (`left`: time_left):
    the hard limit's verdict on each. Judged `reaction` early, what a producer writes while the agent reacts
    lands before the limit, not past it."""
    return [log_dir for log_dir, seconds in left.items() if seconds <= reaction]


def predicted(history: Mapping[str, Sequence[LocalSample]], limit: StorageLimit) -> list[str]:
    """The dirs (or a cover's volumes) above the limit that reach it within the lead time at their fill rate over
    the samples given (those of the fill window): the aggregator's predicted violation (StorageLimit.judge, the
    rule spark_jobs/volume_violations.py renders), on the watch's own samples. None without a lead time."""
    return [log_dir for log_dir, samples in history.items() if samples and limit.judge(
        samples[-1].available_bytes, samples[-1].total_bytes, fill_rate(samples))["predicted"]]


def in_danger(left: Mapping[str, float], horizon: float) -> list[str]:
    """The local dirs at the limit, or that would reach it within `horizon` seconds (`left`: time_left)."""
    return [log_dir for log_dir, seconds in left.items() if seconds <= horizon]


def until_judged(left: Mapping[str, float], limit: StorageLimit, reaction: float = 0.0) -> float | None:
    """Seconds until the first local dir is judged violated at its fill rate (`left`: time_left): the reaction
    time before it reaches the limit, or the lead time when longer; 0 when one is already; None when none is
    filling."""
    ahead = max(limit.lead_time.total_seconds(), reaction)
    return max(0.0, min(left.values()) - ahead) if left else None


def hold_the_pass(until: float | None, pass_seconds: float, held_for: float) -> bool:
    """Whether a pass should wait for the next sample: the watch expects a dir to be judged violated before the
    pass could end, too late for its decision (made on the free space at its start) to see it, and the loop busy
    with it when the sample that shows the crossing comes. That sample brings the quotas of a local dir judged
    violated at once (local_verdict.py); a pass started just before would only delay them. Passes under load vary by half,
    and the forecast with them: HOLD_PASSES of the last one. Never for longer: the forecast may be wrong."""
    longest = HOLD_PASSES * pass_seconds
    return until is not None and 0.0 < until < longest and held_for < longest


def default_horizon(last_pass_seconds: float | None, interval: float) -> float:
    """A few passes' worth, so the throttle lands before the crossing; never less than one watch interval."""
    return max(HORIZON_PASSES * (last_pass_seconds or 1.0), interval)


def foreign_dirs(latest: Mapping[str, LocalSample], reported: Iterable[Volume]) -> dict[str, str]:
    """Local dirs whose filesystem is not the one the broker reports for the same path (another host, a
    mount of something else): dir -> why. A dir the broker does not report is not judged."""
    by_dir = {volume.log_dir: volume for volume in reported if volume.usable}
    return {log_dir: f"its filesystem holds {sample.total_bytes} bytes, the broker reports "
                     f"{by_dir[log_dir].total_bytes} for {log_dir}"
            for log_dir, sample in latest.items()
            if log_dir in by_dir and not _same_size(sample.total_bytes, by_dir[log_dir].total_bytes)}


def _same_size(a: int, b: int) -> bool:
    return abs(a - b) <= 0.01 * max(a, b)  # filesystems report the same size; allow rounding by block


def with_published(brokers: Sequence[int], reported: Sequence[Volume],
                   published: VolumesByBroker) -> tuple[tuple[int, ...], tuple[Volume, ...]]:
    """The brokers that answered and their volumes, once the sidecars' znode volumes are known.

    A broker whose DescribeLogDirs carries sizes keeps them: the broker's own word. One whose log dirs come
    without sizes (Kafka < 3.3) takes the volumes its sidecar published; with none published (no sidecar
    beside it, or its znode vanished with its sidecar) it counts as absent, so its last volumes count
    until the validity duration, as for a broker that left the cluster.
    """
    reported_by_broker = by_broker(brokers, reported)
    answered, volumes = [], []
    for broker in brokers:
        own = reported_by_broker[broker]
        if not any(volume.error is None and volume.total_bytes < 0 for volume in own):
            answered.append(broker)
            volumes += own
        elif published.get(broker):
            answered.append(broker)
            volumes += published[broker]
    return tuple(answered), tuple(volumes)
