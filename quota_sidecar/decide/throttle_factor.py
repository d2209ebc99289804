"""The throttle factor's timeline (proposal 047): initial, computed, last_valid and fallback."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

INITIAL, COMPUTED, LAST_VALID, FALLBACK = "initial", "computed", "last_valid", "fallback"


@dataclass(frozen=True)
class FactorState:
    factor: float = 1.0            # the factor in force
    source: str = INITIAL
    valid_factor: float = 1.0      # the last valid factor and when it became valid
    valid_from: datetime | None = None  # None until the first poll
    last_success_at: datetime | None = None
    fallback_switches: int = 0     # how many times the fallback took over

    def age(self, now: datetime) -> timedelta | None:
        return None if self.valid_from is None else now - self.valid_from

    @property
    def decided_at(self) -> datetime | None:
        """The last successful pass or, when none succeeded, the first poll (None before it): the decisions are
        stale once it is older than the validity."""
        return self.last_success_at or self.valid_from


def after_success(state: FactorState, factor: float, now: datetime) -> FactorState:
    return replace(state, factor=factor, source=COMPUTED, valid_factor=factor, valid_from=now, last_success_at=now)


def after_failure(state: FactorState, now: datetime, validity: timedelta, fallback: float) -> FactorState:
    """Keep the last valid factor while now <= valid_from + validity, then apply the fallback."""
    valid_from = state.valid_from or now  # the initial factor is valid from the first poll
    if now <= valid_from + validity:
        source = INITIAL if state.last_success_at is None else LAST_VALID
        return replace(state, factor=state.valid_factor, source=source, valid_from=valid_from)
    switches = state.fallback_switches + (state.source != FALLBACK)
    return replace(state, factor=fallback, source=FALLBACK, valid_from=valid_from, fallback_switches=switches)


def after_incomplete(state: FactorState, now: datetime, fallback: float) -> FactorState:
    """A broker seen before has been absent for longer than the validity: its volumes are unknown, so the
    cluster cannot be judged and the fallback applies until it returns (proposal 047's inconsistent view)."""
    switches = state.fallback_switches + (state.source != FALLBACK)
    return replace(state, factor=fallback, source=FALLBACK, valid_from=state.valid_from or now,
                   fallback_switches=switches)
