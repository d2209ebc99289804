"""Volume records (proposal 047) and the memory of the last volumes of every broker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Mapping

from .config import StorageLimit


@dataclass(frozen=True)
class Volume:
    broker_id: int
    log_dir: str
    total_bytes: int          # -1 when the broker did not report it
    available_bytes: int      # -1 when the broker did not report it
    observed_at: datetime     # timezone-aware UTC
    error: str | None = None  # e.g. KAFKA_STORAGE_ERROR for an offline dir

    @property
    def usable(self) -> bool:
        """Only usable volumes enter the decision; the others are shown in status."""
        return self.error is None and self.total_bytes >= 0 and self.available_bytes >= 0

    @property
    def available_ratio(self) -> float | None:
        if not self.usable:
            return None
        return self.available_bytes / self.total_bytes if self.total_bytes else 0.0

    def margin(self, limit: StorageLimit) -> float | None:
        """How far the volume is above the limit, in the limit's unit (bytes or ratio); <= 0 violates."""
        if not self.usable:
            return None
        if limit.min_available_bytes is not None:
            return self.available_bytes - limit.min_available_bytes
        return self.available_ratio - limit.min_available_ratio

    def as_row(self) -> dict:
        return {"broker_id": self.broker_id, "log_dir": self.log_dir, "total_bytes": self.total_bytes,
                "available_bytes": self.available_bytes, "usable": self.usable}


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
