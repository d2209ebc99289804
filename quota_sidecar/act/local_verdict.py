"""The local verdict: a violation's quotas written from the local watch alone.

When the watch's last sample shows a dir of this broker at the hard limit, or reaching it within the agent's own
reaction time (a watch interval and the median of the verdict's recent writes) at its fastest fill rate of the fill
window (and since, until its free space grows), so that what a producer writes meanwhile lands before the limit, or
with a lead time reaching it within the lead time at its fill rate over the fill window (the aggregator's rule, on the
watch's own samples every watch interval), and the broker reported that dir as the same filesystem (confirmed by
the last poll that succeeded), the factor is 0 whatever the cluster's view or the aggregator say: the quotas are
written before a pass reads the cluster, and again while it waits for the aggregator (up to poll.timeout, all of
it when the aggregator is down), without waiting for either; and while the verdict holds, a decision lifts none.
The agent that covers brokers whose agent is down (observe/cover_watch.py) writes their verdict alike.

The other agents' decisions, made on DescribeLogDirs and not on the verdict's samples, see no violation in a dir
judged within its reaction time of the limit: each agent's heartbeat says whether its verdict holds
(pipeline/heartbeats.py), and while a live agent's does, the others lift nothing either: a lift while another
agent's verdict holds would let the flood write again until that verdict's next write.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterable, Iterator, Mapping

from ..common import records
from ..common.errors import AdminError
from ..common.observation import Volume
from ..observe.cover_watch import CoverWatch, NoCover
from ..observe.local_watch import LocalWatch, NoWatch
from ..observe.volumes import foreign_dirs
from .quota_writes import QuotaWriter
from .snapshot import Counters

log = logging.getLogger(__name__)


class LocalVerdict:
    def __init__(self, watch: LocalWatch | NoWatch, cover: CoverWatch | NoCover, quota_writer: QuotaWriter,
                 judged_locally: Callable[[datetime], Mapping], counters: Counters, clock: Callable[[], datetime]):
        self.watch, self.cover = watch, cover
        self.quota_writer = quota_writer
        self.judged_locally = judged_locally  # the quotas of a factor of 0 (Decider.judged_locally)
        self.counters = counters
        self.clock = clock
        self.confirmed_dirs: set[str] = set()  # local dirs the broker reported as the same filesystem
        self.written_while_deciding = False  # by the pass under way, while it waited for the aggregator
        self._deciding_on: records.Records | None = None  # that pass's records
        self._held_by: list[int] = []  # the other agents whose verdict held at the last look
        self._records: records.Records | None = None  # as the last pass read them, for write_ahead
        self._writing = threading.Lock()  # the loop's writes and one ahead of the pass under way
        self._ahead_lock = threading.Lock()
        self._pass_under_way = False
        self._ahead: threading.Thread | None = None  # the write ahead of the pass under way, once a pass

    def holds(self) -> list[str]:
        """Why the verdict holds: each confirmed dir of this broker the watch's last sample judges violated, and
        each volume of a covered broker the cover's judges so; none when it does not."""
        local = [
            f"local dir {d} {self._how_near(d)} in its statvfs samples" for d in self.watch.judged
            if d in self.confirmed_dirs]
        covered = [
            f"broker {broker}'s {log_dir} judged violated in DescribeLogDirs (its agent is down)"
            for broker, log_dir in self.cover.judged]
        return local + covered

    def held_anywhere(self) -> bool:
        """Whether this agent's verdict holds, or a live agent's heartbeat says its own does: a pass lifts nothing."""
        return bool(self.holds()) or bool(self._held_elsewhere())

    def _held_elsewhere(self) -> list[int]:
        held_by = self.cover.holding_agents()
        if held_by != self._held_by:
            log.info("%s", f"the local verdict of agent(s) {held_by} holds: this agent lifts nothing until it lets go"
                     if held_by else "no other agent's local verdict holds any more")
            self._held_by = held_by
        return held_by

    def write_ahead(self, now: datetime, when: str = "before the pass reads the records") -> None:
        """Before a pass reads the records (a read that stalls while the records topic's leader is cut off, until
        Kafka fences it, while a flood keeps writing), the writes that the records last read name already: their
        values go first, without a record (ownership.Write.named)."""
        if self._records is not None:
            self.write(self._records, now, when, named_only=True)

    @contextmanager
    def pass_under_way(self) -> Iterator[None]:
        """Around a pass of the loop: what ahead_of_the_pass needs to know."""
        with self._ahead_lock:
            self._pass_under_way, self._ahead = True, None
        try:
            yield
        finally:
            with self._ahead_lock:
                self._pass_under_way = False

    def ahead_of_the_pass(self) -> None:
        """Called by the watch (or the cover's) as it wakes the loop. A pass under way sees the dirs only when the
        next begins, and it may be stuck reading a records topic whose leader was cut off, long enough for a flood
        to fill the disk. So what write_ahead writes is written now, in a thread of its own, once a pass."""
        with self._ahead_lock:
            if not self._pass_under_way or self._ahead is not None or not self.holds():
                return
            self._ahead = threading.Thread(target=self.write_ahead, args=(self.clock(), "while a pass is under way"),
                                           name="verdict-ahead", daemon=True)
            self._ahead.start()

    def write(self, all_records: records.Records, now: datetime, when: str, named_only: bool = False) -> bool:
        """The quotas, when the verdict holds; whether it does."""
        with self._writing:
            return self._write(all_records, now, when, named_only)

    def _write(self, all_records: records.Records, now: datetime, when: str, named_only: bool) -> bool:
        self._records = all_records
        reasons = self.holds()
        if not reasons:
            return False
        writes, started = self.counters.writes, time.monotonic()
        try:
            self.quota_writer.apply(self.judged_locally(now), all_records, seen_at=now, named_only=named_only)
        except AdminError as error:  # the pass's own writes try again; a verdict not in force is said at once
            log.warning("%s: writing the local verdict's quotas %s failed: %s", "; ".join(reasons), when, error)
        if self.counters.writes > writes:
            self.watch.reacted(time.monotonic() - started)
            log.info("%s: quotas written %s", "; ".join(reasons), when)
        return True

    def _how_near(self, log_dir: str) -> str:
        if log_dir in self.watch.at_limit:
            return "at the limit"
        if log_dir in self.watch.reaching:
            return f"within the agent's reaction time ({self.watch.reaction:.2f}s) of the limit at its fill rate"
        return "within the lead time of the limit at its fill rate"

    @contextmanager
    def deciding(self, all_records: records.Records | None) -> Iterator[None]:
        """Around a pass's wait for the aggregator: while_deciding writes with the pass's records meanwhile."""
        self.written_while_deciding = False
        self._deciding_on = all_records
        try:
            yield
        finally:
            self._deciding_on = None

    def while_deciding(self) -> None:
        """Called by the pipeline between its polls while a pass waits for the aggregator: a dir that reaches the
        limit meanwhile gets its quota now, once a pass."""
        if self._deciding_on is not None and not self.written_while_deciding:
            self.written_while_deciding = self.write(self._deciding_on, self.clock(),
                                                     "while the pass waits for the aggregator")

    def confirm(self, own: Iterable[Volume]) -> None:
        """After a poll that succeeded, with this broker's volumes as the broker reported them: the watch stops
        sampling dirs on another filesystem, and only the usable ones of the same filesystem may trigger."""
        own = list(own)
        latest = {log_dir: samples[-1] for log_dir, samples in self.watch.history().items()}
        foreign = foreign_dirs(latest, own)
        self.watch.exclude(foreign)
        self.confirmed_dirs = {v.log_dir for v in own if v.usable} - set(foreign)


class NoVerdict:
    """Without the local watch and the cover: the decisions alone write the quotas."""

    def holds(self) -> list[str]:
        return []

    def held_anywhere(self) -> bool:
        return False

    def write_ahead(self, now: datetime, when: str = "before the pass reads the records") -> None:
        pass

    @contextmanager
    def pass_under_way(self) -> Iterator[None]:
        yield

    def ahead_of_the_pass(self) -> None:
        pass

    def write(self, all_records: records.Records, now: datetime, when: str, named_only: bool = False) -> bool:
        return False

    @contextmanager
    def deciding(self, all_records: records.Records | None) -> Iterator[None]:
        yield

    def confirm(self, own: Iterable[Volume]) -> None:
        pass
