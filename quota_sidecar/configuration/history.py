"""The history's keys and what `quota-sidecar report` reads of a configuration (config.load_capacity)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ..common.vocabulary import StorageLimit


@dataclass(frozen=True)
class HistoryConfig:
    """The aggregator's history of volume observations (Parquet), which `quota-sidecar report` forecasts from."""
    location: str = ""  # empty: none kept
    retention: timedelta = timedelta(days=90)
    interval: timedelta = timedelta(minutes=5)  # how often the aggregator appends to it

    @property
    def enabled(self) -> bool:
        return bool(self.location)


@dataclass(frozen=True)
class CapacityConfig:
    """What `quota-sidecar report` reads of a configuration: the agents' storage limit and the history's keys.
    It watches no cluster, so it needs no bootstrap servers."""
    storage_limit: StorageLimit | None
    history: HistoryConfig = HistoryConfig()
    spark_url: str = ""
