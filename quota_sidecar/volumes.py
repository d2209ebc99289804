"""Volume records (proposal 047), the memory of the last volumes of every broker, and each volume's recent
history, from which the Spark job computes its fill rate."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable, Mapping

from .observation import Volume


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


def recorded(history: History, seen: Iterable[Volume], now: datetime,
             window: timedelta) -> dict[VolumeKey, tuple[Volume, ...]]:
    """`history` with the measurements `seen`: usable ones only, one per volume and moment, none more than
    `window` before `now` (a volume with none left drops out).

    `seen` may be any source of measurements of a volume: a poll's volumes (the remembered volume of an
    absent broker comes back with its old time and is kept once), or samples a sidecar takes of its own
    broker's volumes between polls.
    """
    points = {key: {volume.observed_at: volume for volume in volumes} for key, volumes in history.items()}
    for volume in seen:
        if volume.usable:
            points.setdefault(key_of(volume), {})[volume.observed_at] = volume
    recent = {key: tuple(volume for at, volume in sorted(by_time.items()) if now - at <= window)
              for key, by_time in points.items()}
    return {key: volumes for key, volumes in recent.items() if volumes}


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
