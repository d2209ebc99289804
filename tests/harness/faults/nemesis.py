"""A nemesis on a seeded schedule: the faults production brings, injected into the lab one after another.

As Jepsen's nemesis and Trogdor's fault specs do it: a schedule made from a seed alone (the same seed, the same
faults at the same offsets on the same targets), each fault injected, held for a while and healed before the next,
and every injection and heal logged with its time, so that a violation can be read against what was going on.
Every kind comes once, in a seeded order, before any comes twice. The lab says how to inject and heal each kind
(`Nemesis(actions)`); the schedule knows only names.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

# What each kind does to its target (a broker id, or None for the aggregator and the cluster's controller).
KINDS: Mapping[str, str] = {
    "kill-agent": "SIGKILL of a broker's agent, started again at the heal",
    "pause-agent": "SIGSTOP of a broker's agent (a long GC pause), SIGCONT at the heal",
    "kill-aggregator": "SIGKILL of the aggregator, started again from its checkpoint at the heal",
    "kill-broker": "SIGKILL of a broker (its agent stays), started again at the heal",
    "pause-broker": "SIGSTOP of a broker, SIGCONT at the heal",
    "cut-broker": "a broker's link down (its network namespace cut off from the others and the clients), up at "
                  "the heal",
    "kill-active-controller": "SIGKILL of the node that is the active KRaft controller, started again at the heal",
    "move-records-leader": "the leader of the sidecars' records topic moved to another broker (no heal)",
}
NO_TARGET = frozenset({"kill-aggregator", "kill-active-controller", "move-records-leader"})


@dataclass(frozen=True)
class Fault:
    at: float  # seconds from the soak's start
    kind: str
    target: int | None  # a broker id; None for NO_TARGET's kinds
    hold: float  # seconds from its injection to its heal

    def __str__(self) -> str:
        on = "" if self.target is None else f" on broker {self.target}"
        return f"{self.kind}{on} at +{self.at:.1f} s for {self.hold:.1f} s"


def schedule(seed: int, seconds: float, brokers: Sequence[int], kinds: Sequence[str] = tuple(KINDS),
             gap: tuple[float, float] = (20.0, 45.0), hold: tuple[float, float] = (5.0, 20.0),
             long_gap: tuple[int, float] | None = None) -> list[Fault]:
    """The faults of a soak of `seconds`: a quiet `gap` before each (the cluster settles), each held for `hold`;
    every kind once in a seeded order first, then kinds at random. None starts after `seconds` less its hold.
    `long_gap` (n, s): after every n-th fault s seconds of quiet instead, long enough to judge convergence."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}: choose from {sorted(KINDS)}")
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    faults, at = [], rng.uniform(*gap)
    while True:
        kind = first.pop(0) if first else rng.choice(list(kinds))
        held = round(rng.uniform(*hold), 1)
        if at + held > seconds:
            return faults
        target = None if kind in NO_TARGET else rng.choice(list(brokers))
        faults.append(Fault(round(at, 1), kind, target, held))
        at += held + rng.uniform(*gap)
        if long_gap is not None and len(faults) % long_gap[0] == 0:
            at += long_gap[1]


Action = Callable[[Fault], None]


@dataclass(frozen=True)
class Event:
    at: float  # seconds from the soak's start
    what: str  # "inject" or "heal"
    fault: Fault
    error: str | None = None  # the action failed: the soak says so (a lab that cannot inject proves nothing)


class Nemesis:
    """Runs a schedule in a thread: `actions[kind]` is (inject, heal). `active()` is the fault in force, if any."""

    def __init__(self, faults: Sequence[Fault], actions: Mapping[str, tuple[Action, Action]],
                 clock: Callable[[], float] = time.monotonic):
        missing = sorted({fault.kind for fault in faults} - set(actions))
        if missing:
            raise ValueError(f"the lab cannot inject {missing}")
        self.faults, self.actions, self.clock = list(faults), actions, clock
        self.events: list[Event] = []
        self._active: Fault | None = None
        self._started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> Nemesis:
        self._started = self.clock()
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """No new fault; the one in force is healed first."""
        self._stop.set()
        self._thread.join(timeout)

    def active(self) -> Fault | None:
        return self._active

    def quiet_since(self) -> float | None:
        """Seconds from the soak's start when the last fault was healed (None: one is in force, or none was)."""
        if self._active is not None or not self.events:
            return None
        return self.events[-1].at

    def elapsed(self) -> float:
        return self.clock() - self._started

    def _run(self) -> None:
        for fault in self.faults:
            if self._stop.wait(max(0.0, fault.at - self.elapsed())):
                return
            self._do("inject", fault)
            self._active = fault
            self._stop.wait(fault.hold)  # a stop heals at once
            self._do("heal", fault)
            self._active = None

    def _do(self, what: str, fault: Fault) -> None:
        inject, heal = self.actions[fault.kind]
        error = None
        try:
            (inject if what == "inject" else heal)(fault)
        except Exception as failure:  # said in the report: the soak did not test what it meant to
            error = f"{type(failure).__name__}: {failure}"
            log.warning("nemesis: %s %s failed: %s", what, fault, error)
        self.events.append(Event(round(self.elapsed(), 1), what, fault, error))
        log.info("nemesis: %s %s", what, fault)
