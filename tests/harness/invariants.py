"""The invariants a soak checks, how often each was checked, and every violation with the faults around it.

A soak that says "no violation" means something only with how many times each promise was looked at, and under
which faults: the ledger counts checks per invariant, and a violation keeps its time, so that the report places
it against the nemesis's events (nemesis.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from .nemesis import Event

# The promises (issue 19), by name: what each checks.
INVARIANTS = {
    "no log dir offline": "every broker's log dirs online in DescribeLogDirs",
    "no volume full": "the small filesystem's free bytes above zero (statvfs every 10 ms)",
    "every acknowledged record read": "each acknowledged record (acks=all) read back at the end",
    "quotas converge": "the quotas in force become what the volumes call for within a validity and two check "
                       "intervals of a difference's start or of the last heal, whichever is later",
    "bystanders untouched": "values the sidecars did not set are as they were",
    "nothing left after clean-up": "no quota, record or cordon of the sidecars after run --cleanup",
    "no traceback": "no process of the quota work logged a traceback",
    "memory steady": "agents' and the aggregator's RSS grew by at most the allowance from when each was warm (run "
                     "a few minutes, the soak half over) to the end",
}


@dataclass(frozen=True)
class Violation:
    at: float  # seconds from the soak's start
    invariant: str
    detail: str


class Ledger:
    """Thread-safe: the soak's checkers run in threads of their own."""

    def __init__(self):
        self.checks: Counter[str] = Counter()
        self.violations: list[Violation] = []
        self._lock = threading.Lock()

    def check(self, invariant: str, holds: bool, detail: str = "", at: float = 0.0) -> bool:
        if invariant not in INVARIANTS:
            raise ValueError(f"unknown invariant {invariant!r}")
        with self._lock:
            self.checks[invariant] += 1
            if not holds:
                self.violations.append(Violation(round(at, 1), invariant, detail))
        return holds

    def unchecked(self) -> list[str]:
        return [name for name in INVARIANTS if not self.checks[name]]


class Convergence:
    """The "quotas converge" invariant, each second with no fault in force: a difference between the quotas in force
    and what the volumes call for must end within `within` seconds of its start, or of the last heal when that is
    later (a fault may hold it up). Also the time from each heal to the first agreement, by the fault's kind."""

    def __init__(self, within: float):
        self.within = within
        self.after: dict[str, list[float]] = {}  # fault kind -> seconds from its heal to the quotas' agreement
        self._healed_at: float | None = None
        self._converging: tuple[str, float] | None = None  # (the kind last healed, when), until they agree
        self._differs_since: float | None = None

    def healed(self, kind: str, at: float) -> None:
        if at != self._healed_at:
            self._healed_at, self._converging = at, (kind, at)

    def agree(self, at: float) -> None:
        if self._converging is not None:
            self.after.setdefault(self._converging[0], []).append(at - self._converging[1])
            self._converging = None
        self._differs_since = None

    def differ(self, at: float) -> float | None:
        """Since when a difference seen at `at` lasts past its allowance (said once per allowance), else None."""
        since = self._differs_since = self._differs_since or at
        if at - max(since, self._healed_at or 0.0) <= self.within:
            return None
        self._differs_since = at
        return since


class MemoryGrowth:
    """The "memory steady" invariant: each process's RSS from its first sample once it is warm (it has run `warm`
    seconds and the soak is at `after`) to its last. A process started again is compared from its own warm sample, if
    it reached one: a heap or a cache still filling after a start is not a leak."""

    def __init__(self, after: float, warm: float):
        self.after, self.warm = after, warm
        self._seen: dict[tuple[str, int], float] = {}  # (name, pid) -> when first sampled
        self._warm: dict[tuple[str, int], int] = {}  # (name, pid) -> RSS at its first warm sample
        self._last: dict[tuple[str, int], int] = {}

    def sample(self, at: float, name: str, pid: int, rss: int) -> None:
        process = (name, pid)
        seen = self._seen.setdefault(process, at)
        if process not in self._warm and at >= self.after and at - seen >= self.warm:
            self._warm[process] = rss
        self._last[process] = rss

    def grown(self) -> dict[str, int]:
        """Bytes each warm process grew by, named with its pid when its name had several."""
        names = [name for name, _ in self._warm]
        return {name if names.count(name) == 1 else f"{name} (pid {pid})": self._last[(name, pid)] - rss
                for (name, pid), rss in self._warm.items()}


def around(violation: Violation, events: Sequence[Event], seconds: float = 60.0) -> list[Event]:
    """The nemesis's events within `seconds` before a violation, and the fault in force at it."""
    return [event for event in events if violation.at - seconds <= event.at <= violation.at]


def report(ledger: Ledger, events: Sequence[Event], convergence: dict[str, list[float]]) -> str:
    """Markdown: faults injected by kind, each invariant's checks and violations, the violations with the faults
    before them, and the time to converge after each kind of fault (median, max)."""
    injected = Counter(event.fault.kind for event in events if event.what == "inject")
    failed = [event for event in events if event.error is not None]
    lines = ["| fault | injected | converged after (median, max) |", "|---|---|---|"]
    for kind, count in sorted(injected.items()):
        times = sorted(convergence.get(kind, []))
        converged = f"{times[len(times) // 2]:.1f} s, {times[-1]:.1f} s" if times else "–"
        lines.append(f"| {kind} | {count} | {converged} |")
    lines += ["", "| invariant | checked | violated |", "|---|---|---|"]
    for name in INVARIANTS:
        violated = sum(violation.invariant == name for violation in ledger.violations)
        lines.append(f"| {name} | {ledger.checks[name]:,} | {violated} |")
    for violation in ledger.violations:
        before = "; ".join(f"+{e.at:.1f} s {e.what} {e.fault.kind}" for e in around(violation, events)) or "none"
        lines.append(f"\n- +{violation.at:.1f} s **{violation.invariant}**: {violation.detail} (faults before: {before})")
    for event in failed:
        lines.append(f"\n- the nemesis could not {event.what} {event.fault}: {event.error}")
    return "\n".join(lines)
