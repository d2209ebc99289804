"""Volume records (proposal 047) and the memory of the last volumes of every broker."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable, Mapping

from .observation import Volume


VolumesByBroker = Mapping[int, tuple[Volume, ...]]


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


def _newest(volumes: tuple[Volume, ...]) -> datetime:
    return max(volume.observed_at for volume in volumes)
