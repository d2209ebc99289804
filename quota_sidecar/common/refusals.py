"""What Kafka's authorizer refused this process lately, for its log lines, status and metric.

Every client's failures are typed in one place (observe/kafka_client.admin_error), which hands each refusal
to REFUSALS. The process's explainer (decide/refusal_lines.py, set by wiring.py) says which permission the refusal
means and which features stop without it: that one line becomes the error's message, so that the failed poll,
pass or write that reports it says it, once a pass, without a traceback (a refusal is a PermanentAdminError:
nothing retries it within the pass). Without an explainer, the line names the request and the refusal.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from .errors import AuthorizationRefused


@dataclass(frozen=True)
class Refusal:
    permission: str  # "ALTER_CONFIGS on CLUSTER": what the authorizer checked, as `quota-sidecar acls` grants it
    line: str  # the one line: the permission, the principal, the request, what stops without it
    times: int
    last_at: float  # time.time() of the last refusal


class Refusals:
    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.explain: Callable[[AuthorizationRefused], tuple[str, str]] | None = None  # -> (permission, line)
        self._lock = threading.Lock()  # the loop, the local watch and the HTTP thread all make requests
        self._seen: dict[str, Refusal] = {}

    def refused(self, error: AuthorizationRefused) -> AuthorizationRefused:
        """Record `error` and give it its one line as its message."""
        request = str(error)
        permission, line = self.explain(error) if self.explain else (error.resource_kind, f"refused: {request}")
        error.args = (line,)
        with self._lock:
            before = self._seen.get(permission)
            self._seen[permission] = Refusal(permission, line, (before.times if before else 0) + 1, self.clock())
        return error

    def lately(self, within: float) -> tuple[Refusal, ...]:
        """The permissions refused in the last `within` seconds: each pass asks again for what it needs, so a
        permission not refused for a few passes has been granted (or is no longer asked for)."""
        since = self.clock() - within
        with self._lock:
            return tuple(refusal for refusal in self._seen.values() if refusal.last_at >= since)


REFUSALS = Refusals()
