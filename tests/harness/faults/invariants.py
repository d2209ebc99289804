"""The invariants a soak checks, how often each was checked, and every violation with the faults around it.

A soak that says "no violation" means something only with how many times each promise was looked at, and under
which faults: the ledger counts checks per invariant, and a violation keeps its time, so that the report places
it against the nemesis's events (nemesis.py).
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from harness.faults.nemesis import Event

# The promises, by name: what each checks.
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
    "producers back after a lift": "after each lift of a throttle that was not the last resort, the steady "
                                   "producer's acknowledged rate is back to 90 % of its rate within 30 s (a 5 s span "
                                   "at that rate starting within 25 s of the lift)",
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


class Recovery:
    """The "producers back after a lift" invariant. Each second: a steady producer's records acknowledged so far,
    and the producer quota in force. A lift is a throttle (a quota below `lifted`) becoming `lifted` or none; the
    producer must then reach `share` of its `rate` over some `window` seconds starting within `within` of the lift.
    A lift after the last resort (1 B/s in force at some second since the previous lift) is counted apart: a Java
    producer throttled at 1 B/s waits out its throttle after the lift, and comes back only when restarted."""

    LAST_RESORT = 1.0

    def __init__(self, rate: float, lifted: float, share: float = 0.9, within: float = 25.0, window: float = 5.0):
        self.rate, self.lifted, self.share, self.within, self.window = rate, lifted, share, within, window
        self.returned: list[float] = []  # seconds from each lift judged to the first span at the rate
        self.after_last_resort: list[float] = []  # when the lifts after the last resort came
        self.last_resort_episodes = 0  # seconds at 1 B/s after one at another quota (or none)
        self._times: list[float] = []
        self._acknowledged: list[int] = []
        self._pending: list[float] = []  # lifts not yet judged
        self._throttled = False
        self._last_resort = False
        self._previous: float | None = None

    def acknowledged(self, at: float, so_far: int) -> None:
        self._times.append(at)
        self._acknowledged.append(so_far)

    def quota(self, at: float, in_force: float | None) -> str | None:
        """The quota in force at `at`: "lift" or "lift after the last resort" when it lifts a throttle, else None."""
        if in_force == self.LAST_RESORT:
            self.last_resort_episodes += self._previous != self.LAST_RESORT
            self._last_resort = True
        self._previous = in_force
        throttled = in_force is not None and in_force < self.lifted
        lifted, self._throttled = self._throttled and not throttled, throttled
        if not lifted:
            return None
        if self._last_resort:
            self._last_resort = False
            self.after_last_resort.append(at)
            return "lift after the last resort"
        self._pending.append(at)
        return "lift"

    def due(self, at: float) -> list[tuple[float, float | None, float]]:
        """The lifts that can be judged at `at`: (when, seconds to the first span at the rate or None, the best
        span's rate in records/s)."""
        done = [lift for lift in self._pending if at >= lift + self.within + self.window]
        self._pending = [lift for lift in self._pending if lift not in done]
        return [(lift, *self._back(lift)) for lift in done]

    def pending(self) -> int:
        """Lifts too recent to judge yet."""
        return len(self._pending)

    @property
    def throttled(self) -> bool:
        """The quota in force at the last second read: a lift is still to come."""
        return self._throttled

    def _back(self, lift: float) -> tuple[float | None, float]:
        best = 0.0
        first = bisect.bisect_left(self._times, lift)
        for i in range(first, len(self._times)):
            start = self._times[i]
            if start > lift + self.within:
                break
            end = bisect.bisect_left(self._times, start + self.window, lo=i)
            if end == len(self._times):
                break
            rate = (self._acknowledged[end] - self._acknowledged[i]) / (self._times[end] - start)
            best = max(best, rate)
            if rate >= self.share * self.rate:
                return start - lift, rate
        return None, best


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
