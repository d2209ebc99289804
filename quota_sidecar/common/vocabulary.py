"""The rules' vocabulary, spelled once for the agent and the aggregator (spark_jobs): why a replication rate
is what it is, the states of a moving replica, and the storage limit the volume rule applies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import isodate

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

    def limit_bytes(self, total_bytes: int) -> float:
        """The available bytes at the hard limit on a volume of this size."""
        if self.min_available_bytes is not None:
            return float(self.min_available_bytes)
        return self.min_available_ratio * total_bytes

    def at_limit(self, available_bytes: int, total_bytes: int) -> bool:
        """At or below the hard limit now, compared in the limit's own unit: a ratio limit with the available ratio
        (0 on a volume of no size), as the proposal words it. In bytes, 0.29 × 100 rounds above 29, and a volume at
        exactly 29 % would not be at a limit of 0.29."""
        if self.min_available_bytes is not None:
            return available_bytes <= self.min_available_bytes
        return (available_bytes / total_bytes if total_bytes > 0 else 0.0) <= self.min_available_ratio

    def as_params(self) -> dict:
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
