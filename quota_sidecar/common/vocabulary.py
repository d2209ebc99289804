"""The rules' vocabulary, spelled once for the agent and the aggregator (spark_jobs): why a replication rate
is what it is, the states of a moving replica, and the storage limit the volume rule applies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping

import isodate

from . import storage_rule

# Why a rate is what it is, in precedence order: safety first, then the operators, then the rule.
DISK_GUARD, BROKER_OVERRIDE, GLOBAL_OVERRIDE = "disk_guard", "broker_override", "global_override"
# The rule's own reasons (spark_jobs/replication_rates.py spells its SQL with these); keep_up raises the
# others to KIP-73's lower bound, the rate a move needs to end at all.
KEEP_UP, FAIL_SAFE, KEPT, UNCHANGED, COMPUTED = "keep_up", "fail_safe", "kept", "unchanged", "computed"
RULE_REASONS = (KEEP_UP, FAIL_SAFE, KEPT, UNCHANGED, COMPUTED)

# A moving replica's state, and why a stuck one is stuck (spark_jobs/move_progress.py spells its SQL with these).
CAUGHT_UP, MOVING, STUCK = "caught_up", "moving", "stuck"
CANNOT_KEEP_UP, NO_PROGRESS = "cannot_keep_up", "no_progress"


@dataclass(frozen=True)
class StorageLimit:
    """Exactly one of the two hard limits is set; a soft limit, if any, is of the same kind and above it."""
    min_available_bytes: int | None = None
    min_available_ratio: float | None = None
    soft_min_available_bytes: int | None = None
    soft_min_available_ratio: float | None = None
    lead_time: timedelta = timedelta(0)  # 0: no predicted violations
    # Where the producer quotas start down in steps (decide/descent.py), of the hard limit's kind and above it,
    # or within how long of the hard limit at the fill rate; unset: no descent, the hard limit alone.
    descent_min_available_bytes: int | None = None
    descent_min_available_ratio: float | None = None
    descent_horizon: timedelta | None = None

    def __post_init__(self):
        hard = [kind for kind, value in (("bytes", self.min_available_bytes), ("ratio", self.min_available_ratio))
                if value is not None]
        if len(hard) != 1:
            raise ValueError(f"set exactly one of min_available_bytes and min_available_ratio, got {self!r}")
        other = "ratio" if hard == ["bytes"] else "bytes"
        for level in ("soft", "descent"):
            if getattr(self, f"{level}_min_available_{other}") is not None:
                raise ValueError(f"the {level} limit must be of the hard limit's kind ({hard[0]}), got {self!r}")

    @classmethod
    def from_params(cls, params: Mapping) -> StorageLimit:
        """The limit of as_params' names (a batch run's, the forecast's); ValueError unless it is one."""
        horizon = params.get("descent_horizon_seconds")
        return cls(**{name: params.get(name) for name in _LEVELS},
                   lead_time=timedelta(seconds=params.get("lead_time_seconds") or 0.0),
                   descent_horizon=None if horizon is None else timedelta(seconds=horizon))

    def judge(self, available_bytes: int, total_bytes: int, fill_bytes_per_sec: float | None = None,
              terms: tuple = storage_rule.VERDICT) -> dict:
        """The rule's verdict on a volume's newest measurement at a fill rate (storage_rule: at_limit,
        seconds_to_limit, violated, predicted...), as the aggregator's Spark job judges it."""
        return storage_rule.judged({**self.as_params(), "available_bytes": available_bytes,
                                    "total_bytes": total_bytes, "fill_bytes_per_sec": fill_bytes_per_sec}, terms)

    def at_limit(self, available_bytes: int, total_bytes: int) -> bool:
        """At or below the hard limit now, compared in the limit's own unit (storage_rule.AT_LIMIT)."""
        return self.judge(available_bytes, total_bytes, terms=storage_rule.AT_LIMIT_TERMS)["at_limit"]

    def limit_bytes(self, total_bytes: int) -> float:
        """The available bytes at the hard limit on a volume of this size."""
        return self.judge(0, total_bytes, terms=(storage_rule.LIMIT_BYTES,))["limit_bytes"]

    def margin(self, available_bytes: int, total_bytes: int) -> float:
        """How far the volume is above the limit, in the limit's unit (bytes or ratio); <= 0 violates."""
        return self.judge(available_bytes, total_bytes, terms=storage_rule.MARGIN_TERMS)["margin"]

    def as_params(self) -> dict:
        """The limit as the rule's columns (storage_rule), each volume row's in the aggregator."""
        return {"min_available_bytes": self.min_available_bytes, "min_available_ratio": self.min_available_ratio,
                "soft_min_available_bytes": self.soft_min_available_bytes,
                "soft_min_available_ratio": self.soft_min_available_ratio,
                "lead_time_seconds": self.lead_time.total_seconds(),
                "descent_min_available_bytes": self.descent_min_available_bytes,
                "descent_min_available_ratio": self.descent_min_available_ratio,
                "descent_horizon_seconds": None if self.descent_horizon is None else self.descent_horizon.total_seconds()}

    def describe(self) -> str:
        if self.min_available_bytes is not None:
            text = f"available bytes <= {self.min_available_bytes}"
        else:
            text = f"available ratio <= {self.min_available_ratio}"
        soft = self.soft_min_available_bytes if self.soft_min_available_bytes is not None else self.soft_min_available_ratio
        if soft is not None:
            text += f", soft zone below {soft}"
        if self.lead_time:
            text += f", or reached within {isodate.duration_isoformat(self.lead_time)} at the fill rate"
        descent = self.descent_min_available_bytes if self.descent_min_available_bytes is not None \
            else self.descent_min_available_ratio
        if descent is not None:
            text += f", producer quotas down in steps below {descent}"
        if self.descent_horizon is not None:
            text += f" or within {isodate.duration_isoformat(self.descent_horizon)} of the limit"
        return text


_LEVELS = ("min_available_bytes", "min_available_ratio", "soft_min_available_bytes", "soft_min_available_ratio",
           "descent_min_available_bytes", "descent_min_available_ratio")
