"""One line per failure: a WARNING for each failed poll or pass, an INFO when they succeed again."""

from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger("quota_sidecar.loop")  # the loop's lines, where operators read them


class FailureReport:
    """One WARNING per failed poll (or pass) naming the cause; one INFO line when they succeed again."""

    def __init__(self, what: str, plural: str, monotonic: Callable[[], float] = time.monotonic):
        self.what, self.plural, self.monotonic = what, plural, monotonic
        self.failed = 0
        self.since: float | None = None

    def failure(self, cause: str) -> None:
        if self.since is None:
            self.since = self.monotonic()
        self.failed += 1
        log.warning("%s failed: %s", self.what, cause)

    def success(self) -> None:
        if self.failed:
            log.info("%s succeed again after %d failed %s over %.0fs", self.plural, self.failed,
                     self.what if self.failed == 1 else self.plural, self.monotonic() - self.since)
        self.failed, self.since = 0, None
