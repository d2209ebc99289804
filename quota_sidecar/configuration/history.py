"""The history's keys and what `quota-sidecar report` reads of a configuration (config.load_capacity)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping

from ..common.vocabulary import StorageLimit


@dataclass(frozen=True)
class HistoryConfig:
    """The aggregator's history of volume observations (Parquet), which `quota-sidecar report` forecasts from."""
    location: str = ""  # empty: none kept
    retention: timedelta = timedelta(days=90)
    interval: timedelta = timedelta(minutes=5)  # how often the aggregator appends to it
    jars: tuple[str, ...] = ()  # its filesystem's (S3A), when not the default's

    @classmethod
    def of(cls, values: Mapping[str, object]) -> HistoryConfig:
        """From the parsed keys (config._parse_known)."""
        return cls(values["history.location"], values["history.retention"], values["history.interval"],
                   values["history.jars"])

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
