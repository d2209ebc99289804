"""Bounded waits for what a cluster or a sidecar does a moment later."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold in time; an AssertionError, so a test fails rather than errors."""


def eventually(check: Callable[[], T], timeout: float, what: str = "", every: float = 0.5,
               retry_on: tuple[type[BaseException], ...] = (AssertionError,)) -> T:
    """check()'s first truthy result, retried every `every` seconds while it is falsy or raises `retry_on`.

    Anything else check() raises ends the wait at once: a sidecar that failed is not a slow one.
    After `timeout` seconds the last failure (or `what`) is the test's.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if result := check():
                return result
            failure = None
        except retry_on as error:
            failure = error
        if time.monotonic() > deadline:
            reason = f"{what}: " if what else ""
            raise WaitTimeout(f"{reason}still not so after {timeout:.0f}s"
                              + (f": {failure}" if failure else "")) from failure
        time.sleep(every)


def equal(read: Callable[[], T], expected: T, timeout: float = 15.0, every: float = 0.1) -> T:
    """Until read() returns `expected` (brokers apply a write a moment after the controller did)."""
    last: list[T] = []

    def check() -> bool:
        last[:] = [read()]
        return last[0] == expected

    try:
        eventually(check, timeout, every=every)
    except WaitTimeout:
        raise WaitTimeout(f"still {last[0]!r} after {timeout:.0f}s, expected {expected!r}") from None
    return expected


def within(condition: Callable[[], object], timeout: float) -> bool:
    """Whether `condition` holds within `timeout` seconds (checked every 50 ms): a probe's answer, not a failure."""
    try:
        return bool(eventually(condition, timeout, every=0.05))
    except WaitTimeout:
        return False
