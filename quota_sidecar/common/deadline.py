"""The deadline of one pass: `with within(seconds):` bounds everything the thread does inside it.

A pass (a storage poll, a replication pass, `status --direct`) runs on one thread; the admin calls, their
retries and back-offs, the state topic's reads and writes and the wait for the aggregator's decision all ask `left()` how long
they may still wait, so that the pass ends within its deadline whatever the cluster or the aggregator does.
Outside `within` there is no deadline and `left(at_most)` is just `at_most`.

Low in the layers: it imports nothing of ours but errors.py.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from .errors import PassTimeout

_local = threading.local()


@contextmanager
def within(seconds: float, what: str = "the pass", clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Bound the calling thread's work to `seconds` from now; a deadline already set and sooner stays."""
    outer = getattr(_local, "deadline", None)
    until = clock() + seconds
    mine = (until, seconds, what, clock)
    _local.deadline = mine if outer is None or until < outer[0] else outer
    try:
        yield
    finally:
        _local.deadline = outer


def time_left() -> float | None:
    """Seconds until the deadline (0 once passed), or None outside `within`."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return None
    until, _, _, clock = deadline
    return max(0.0, until - clock())


def left(at_most: float | None = None, doing: str = "") -> float | None:
    """How long the caller may still wait: the time left, capped at `at_most` (None: no cap).

    Raises PassTimeout when the deadline has passed, so that nothing starts that could not finish.
    """
    remaining = time_left()
    if remaining is None:
        return at_most
    if remaining <= 0:
        raise timed_out(doing)
    return remaining if at_most is None else min(at_most, remaining)


def capped(seconds: float) -> float:
    """`seconds`, or the time left when that is shorter (0 once passed); never raises."""
    remaining = time_left()
    return seconds if remaining is None else min(seconds, remaining)


def expired() -> bool:
    remaining = time_left()
    return remaining is not None and remaining <= 0


def timed_out(doing: str = "") -> PassTimeout:
    """The error of a pass whose deadline ran out while `doing`."""
    deadline = getattr(_local, "deadline", None)
    seconds, what = (deadline[1], deadline[2]) if deadline else (0.0, "the pass")
    while_doing = f" while {doing}" if doing else ""
    return PassTimeout(f"{what} ran out of its {seconds:g}s deadline{while_doing}")
