"""One line per failure: a WARNING for each failed poll or pass, an INFO when they succeed again."""

from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger("quota_sidecar.loop")  # the loop's lines, where operators read them


class FailureReport:
    """One WARNING per failed poll (or pass) naming the cause; one INFO line when they succeed again. With
    `first_only` (what is tried several times a second), one WARNING for each cause a run of failures meets
    (a permission refused once the broker is back), said once until it succeeds."""

    def __init__(self, what: str, plural: str, monotonic: Callable[[], float] = time.monotonic,
                 first_only: bool = False):
        self.what, self.plural, self.monotonic, self.first_only = what, plural, monotonic, first_only
        self.failed = 0
        self.since: float | None = None
        self.said: set[str] = set()  # the causes of this run of failures said already (first_only)

    def failure(self, cause: str) -> None:
        if self.since is None:
            self.since = self.monotonic()
        self.failed += 1
        if not self.first_only or cause not in self.said:
            log.warning("%s failed: %s%s", self.what, cause, "; said once until it succeeds" if self.first_only else "")
            self.said.add(cause)

    def success(self) -> None:
        if self.failed:
            log.info("%s succeed again after %d failed %s over %.0fs", self.plural, self.failed,
                     self.what if self.failed == 1 else self.plural, self.monotonic() - self.since)
        self.failed, self.since = 0, None
        self.said.clear()

