"""The volumes of the brokers whose agent is down, read by the agent that covers them (`targets`: decide/cover.py).

Every `cover.interval` it asks those brokers, and only those, for their volumes with DescribeLogDirs (no
topics: ~260 bytes an answer, whatever the number of partitions), and judges them as the local watch judges
its own dirs: at the limit, or with a lead time within it at the fill rate of the fill window. A volume judged
so wakes the loop, whose pass writes the local verdict's quotas first (act/local_verdict.py), as the agent
beside that broker would have.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping, Sequence

from ..common import deadline
from ..common.errors import AdminError
from ..common.failure_report import FailureReport
from ..common.periodic import PeriodicWorker
from ..common.vocabulary import StorageLimit
from ..pipeline.heartbeats import Heartbeats
from .volumes import TRIGGER_WINDOW_SECONDS, LocalSample, at_the_limit, predicted, time_left

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoverView:
    """The agents heard (broker -> seconds since its agent's last beat was read) and the brokers this agent
    covers (decide/cover.py)."""
    heard: Mapping[int, float]
    covering: tuple[int, ...]


class CoverWatch:
    def __init__(self, heartbeats: Heartbeats, targets: Callable[[Iterable[int], float], list[int]], admin,
                 limit: StorageLimit, interval: float, fill_window: float, wake: Callable[[], None] = lambda: None,
                 monotonic: Callable[[], float] = time.monotonic,
                 utcnow: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self.heartbeats, self.targets, self.admin, self.limit = heartbeats, targets, admin, limit
        self.interval, self.monotonic, self.utcnow = interval, monotonic, utcnow
        self.window = max(fill_window if limit.lead_time else 0.0, TRIGGER_WINDOW_SECONDS)
        self.wake = wake  # asks the loop for a pass now
        self.brokers: tuple[int, ...] = ()  # the cluster's live brokers at the last poll that succeeded (saw)
        self.covered: list[int] = []  # the brokers of the last round
        self.judged: list[tuple[int, str]] = []  # (broker, log dir) at the limit, or within the lead time of it
        self._history: dict[tuple[int, str], deque[LocalSample]] = {}
        self._report = FailureReport("DescribeLogDirs of a covered broker", "DescribeLogDirs of covered brokers",
                                     first_only=True)
        # Covering only adds to the passes: when a round fails, the loop goes on without it.
        self._worker = PeriodicWorker("cover-watch", self._round, interval, on_failure=lambda: log.exception(
            "covering the brokers whose agent is down failed; their volumes wait for the passes"))

    def start(self) -> CoverWatch:
        self.heartbeats.start()
        self._worker.start()
        return self

    def stop(self) -> None:
        self._worker.stop()
        self.heartbeats.stop()

    def saw(self, brokers: Sequence[int]) -> None:
        """The cluster's live brokers, as a poll that succeeded read them."""
        self.brokers = tuple(brokers)

    def view(self) -> CoverView:
        return CoverView(self.heard(), tuple(self.covered))

    def holding_agents(self) -> list[int]:
        """The other live agents whose local verdict holds, as their heartbeats say."""
        return self.heartbeats.holding_agents()

    def heard(self) -> dict[int, float]:
        """Each agent heard: seconds since its last beat was read."""
        now = self.monotonic()
        return {agent: now - seen for agent, seen in sorted(self.heartbeats.last_seen().items())}

    def sample(self) -> list[tuple[int, str]]:
        """One round: which brokers to cover, their volumes now, and those judged violated."""
        now = self.monotonic()
        self.covered = covered = self.targets(self.brokers, now)
        self._history = {key: samples for key, samples in self._history.items() if key[0] in covered}
        if covered:
            try:
                with deadline.within(max(self.interval, 1.0), "covering"):
                    volumes = self.admin.describe_volumes(covered, self.utcnow())
                self._report.success()
            except AdminError as error:  # the next round asks again; what was judged stays judged meanwhile
                self._report.failure(str(error))
                return self.judged
            for volume in volumes:
                if volume.usable:
                    samples = self._history.setdefault((volume.broker_id, volume.log_dir), deque())
                    samples.append(LocalSample(volume.log_dir, now, volume.total_bytes, volume.available_bytes))
                    while now - samples[0].at > self.window:
                        samples.popleft()
        self.judged = sorted(at_the_limit(time_left(self._history, self.limit)) + predicted(self._history, self.limit))
        return self.judged

    def _round(self) -> None:
        if self.sample():
            self.wake()


class NoCover:
    """Without cover.after (or for status --direct): no heartbeats, no broker covered."""

    judged: list[tuple[int, str]] = []

    def start(self) -> NoCover:
        return self

    def stop(self) -> None:
        pass

    def saw(self, brokers: Sequence[int]) -> None:
        pass

    def view(self) -> None:
        return None

    def holding_agents(self) -> list[int]:
        return []
