"""The sidecar loop: poll the cluster, decide, write what changed; stop between passes on SIGTERM.

One thread runs the passes and owns all their state; at the end of every pass it publishes a frozen Snapshot,
the only thing the HTTP thread reads. Every pass ends within `poll.timeout` (deadline.py); a failed poll is
one WARNING naming the cause, the first poll that succeeds again one INFO line saying how long they failed.
The parts come finished from wiring.py: the observer reads the cluster (observe/cluster_view.py), the decider
decides, the pass's writes write (act/pass_writes.py); an absent feature is a part that does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, ContextManager, Iterable, Mapping, Protocol, Sequence

from .act.pass_writes import PassWrites
from .act.quota_writes import QuotaWriter
from .act.snapshot import CordonView, Counters, CoverView, LocalWatchView, ReplicationView, Snapshot, utcnow
from .common import allocator, deadline, records
from .common.errors import AdminError, DecisionFailed, HandedBack
from .common.failure_report import FailureReport
from .common.observation import Observation, ReplicationObservation, Volume
from .common.refusals import REFUSALS
from .configuration.settings import SidecarConfig
from .decide import descent
from .decide.decider import Decider, Decision
from .observe.cluster_view import Observer
from .observe.local_watch import LocalWatch, NoWatch, pass_horizon
from .observe.volumes import hold_the_pass
from .shutdown import GracefulShutdown

log = logging.getLogger(__name__)


class Guard(Protocol):
    """This broker's disk guard (act/local_guard.py)."""
    moves: list[dict]

    def at_risk(self) -> Mapping: ...
    def keep_between_passes(self, read_records: Callable[[], records.Records], clock: Callable[[], datetime],
                            timeout: float) -> None: ...
    def cleanup(self, all_records: records.Records) -> None: ...


class Verdict(Protocol):
    """The local verdict (act/local_verdict.py): the quotas of the hard limit written ahead of the decision."""

    def holds(self) -> list[str]: ...
    def write_ahead(self, now: datetime) -> None: ...
    def pass_under_way(self) -> ContextManager[None]: ...
    def deciding(self, all_records: records.Records | None) -> ContextManager[None]: ...
    def confirm(self, own: Iterable[Volume]) -> None: ...


class Cover(Protocol):
    """The watch of the brokers whose agent is down (observe/cover_watch.py)."""
    judged: list[tuple[int, str]]

    def start(self) -> object: ...
    def stop(self) -> None: ...
    def saw(self, brokers: Sequence[int]) -> None: ...
    def view(self) -> CoverView | None: ...


class Replication(Protocol):
    """This broker's replication throttles (act/replication.py)."""
    runs_between_polls: bool

    def view(self) -> ReplicationView | None: ...
    def observe(self, all_records: records.Records, guarded: bool = False) -> ReplicationObservation | None: ...
    def cleanup(self, all_records: records.Records) -> None: ...
    def close(self) -> None: ...


class Cordoner(Protocol):
    """This broker's cordoned log dirs (act/cordoning.py)."""
    view: CordonView | None

    def cleanup(self, all_records: records.Records) -> None: ...


class Closes(Protocol):
    """The znodes' volumes (observe/znode_volumes.py)."""

    def close(self) -> None: ...


class Pipeline(Protocol):
    """The agent's end of the pipeline (pipeline/transport.py)."""
    @property
    def last_decision(self) -> dict | None: ...

    def connect(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Features:
    """The parts of the features a configuration may leave out, each one that does nothing when it does; the loop
    knows them by what it calls (the modules that build them are wiring.py's to import)."""
    watch: LocalWatch | NoWatch
    guard: Guard
    verdict: Verdict
    cover: Cover
    replication: Replication
    cordoner: Cordoner
    znodes: Closes
    pipeline: Pipeline


class Sidecar:
    def __init__(self, config: SidecarConfig, admin, store, decider: Decider, quota_writer: QuotaWriter,
                 observer: Observer, writes: PassWrites, features: Features, counters: Counters,
                 poll_report: FailureReport, replication_report: FailureReport, wake: threading.Event,
                 clock: Callable[[], datetime] = utcnow):
        self.config, self.admin, self.store, self.decider, self.clock = config, admin, store, decider, clock
        self.quota_writer, self.observer, self.writes = quota_writer, observer, writes
        self.watch, self.guard, self.verdict = features.watch, features.guard, features.verdict
        self.cover, self.replication, self.cordoner = features.cover, features.replication, features.cordoner
        self.znodes, self.pipeline = features.znodes, features.pipeline
        self.counters = counters
        self.poll_report, self.replication_report = poll_report, replication_report
        self.wake = wake  # the local watch (or the cover's) asks for a pass now
        self.started_at = clock().timestamp()
        self.handed_back = False  # `quota-sidecar cleanup` ran since this process started: it writes nothing more
        self._near_the_limit = False
        self._held_since: float | None = None  # since when the next pass waits (_held)
        self._holding = False  # the next pass waits for the watch's next sample
        self._lock = threading.Lock()  # guards the published snapshot, swapped by the loop, read over HTTP
        self._published: Snapshot | None = None
        self.publish()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._published

    def publish(self) -> None:
        watch = None if not self.watch.on else LocalWatchView(
            tuple(self.watch.dirs), dict(self.watch.unreadable), tuple(self.watch.danger), self.watch.running)
        snapshot = Snapshot(self.config, self.decider.factor, self.decider.last, replace(self.counters),
                            {entity: dict(keys) for entity, keys in self.quota_writer.in_force.items()},
                            self.replication.view(), watch, self.cordoner.view, self.quota_writer.tenants,
                            tuple(self.guard.moves), self.pipeline.last_decision, self.cover.view(),
                            REFUSALS.lately(3 * max(self.config.check_interval, self.config.poll_timeout).total_seconds()),
                            self.quota_writer.last_resort)
        with self._lock:
            self._published = snapshot

    # -------------------------------------------------------------- one pass

    @property
    def _deadline(self) -> float:
        return self.config.poll_timeout.total_seconds()

    def run_pass(self) -> Decision:
        started = time.monotonic()
        try:
            with deadline.within(self._deadline, "the poll"), self.verdict.pass_under_way():
                decision = self._pass()
        finally:
            self.counters.last_poll_seconds = time.monotonic() - started
            self.publish()
        return decision

    def _pass(self) -> Decision:
        now = self.clock()
        try:
            self.verdict.write_ahead(now)
            all_records = self.read_records()
            if self.writes.before_reading(all_records, now):
                all_records = self.read_records()  # the pass plans its writes on the records as they are now
        except AdminError as error:  # nothing can be written without knowing what is ours; still decide
            all_records = None
            observation = Observation(at=now, error=f"reading the sidecars' records: {error}")
        else:
            observation = replace(self.observer.observe(all_records, now, self.guarded),
                                  local_samples=self.observer.local_samples(now),
                                  held_locally=bool(self.verdict.holds()))
        with self.verdict.deciding(all_records):
            decision = self.decider.decide(observation)
        self.counters.polls += 1
        self.counters.poll_failures += decision.error is not None
        self.counters.fallback_applied += decision.entered_fallback
        self.counters.limit_violations += len(decision.violations)
        self.writes.after(decision, observation, all_records, self._violated())
        # What the broker says of its own dirs confirms the watch's, whatever the aggregator answered: the local
        # verdict must not wait for a decision.
        own = [v for v in observation.volumes if v.broker_id == self.config.broker_id]
        if own:
            self.verdict.confirm(own)
        if decision.error is None:
            self.cover.saw(observation.brokers)
        return decision

    def _violated(self) -> set[int]:
        return {v["broker_id"] for v in self.decider.known_violations}

    def guarded(self) -> bool:
        """Whether this broker's disk guard is on: a volume of it violated the limit at the last poll, or the
        watch sees a dir of it at or near the limit."""
        return self.config.broker_id in self._violated() or bool(self.guard.at_risk())

    def run_replication_pass(self) -> None:
        """Between storage polls: moves, network and rates only."""
        try:
            with deadline.within(self._deadline, "the replication pass"), self.verdict.pass_under_way():
                all_records = self.read_records()
                observation = self.replication.observe(all_records, self.guarded())
                decision = self.decider.decide_replication(observation)
                self.writes.replication_throttles(decision, observation, all_records, self._violated(), self.clock())
            if decision.undecided is not None:  # the rule's own rates without figures were applied
                self.replication_report.failure(decision.undecided)
            else:
                self.replication_report.success()
        except (AdminError, DecisionFailed) as error:
            self.replication_report.failure(str(error))
        finally:
            self.publish()

    def read_records(self) -> dict[tuple, dict]:
        """Everything the sidecars keep in the cluster, read once a pass: ownership records, overrides. HandedBack
        once `quota-sidecar cleanup` ran since this process started: a throttle written again after it would stay
        when the pod goes (an uninstall's hook runs before the agents stop)."""
        found = records.parse(self.store.read_all())
        handed_back = records.handed_back_at(found)
        if handed_back is not None and handed_back >= self.started_at:
            self.handed_back = True
            self.quota_writer.stop()
            log.warning("quota-sidecar cleanup handed back what the sidecars set at %s: this agent writes nothing "
                        "more; a new start protects again", datetime.fromtimestamp(handed_back).astimezone().isoformat())
            raise HandedBack()
        return found

    def cleanup(self) -> None:
        """Hand back everything the sidecars set (ownership.py): quotas, throttles, cordons; forget the moves they
        cancelled."""
        all_records = self.quota_writer.cleanup()
        if records.descent_rate(all_records) is not None:
            self.store.delete(records.key(records.DESCENT))
        self.replication.cleanup(all_records)
        self.cordoner.cleanup(all_records)
        self.guard.cleanup(all_records)

    def warm_up(self) -> None:
        """Connect the records' writer and the pipeline (creating its topics when they are missing) now, not
        in the first pass: seconds that would otherwise delay it, and with it a move's first throttle."""
        try:
            self.store.connect()
        except AdminError as failure:  # the first write connects, and says so when it cannot
            log.debug("connecting the records' writer failed: %s", failure)
        try:
            self.pipeline.connect()
        except Exception as failure:  # the first pass tries again, and says so as a failed poll
            log.info("the pipeline is not connected yet: %s", failure)

    def close(self) -> None:
        self.watch.stop()
        self.cover.stop()
        self.replication.close()
        self.admin.close()
        self.store.close()
        self.pipeline.close()
        self.znodes.close()

    # -------------------------------------------------------------- the loop

    def run(self, shutdown: GracefulShutdown) -> None:
        # PT0S disables the storage check, not the loop: other duties still run once a minute.
        full_every = self.config.check_interval.total_seconds() or 60.0
        every = full_every
        between = self.replication.runs_between_polls  # replication passes in between, when they are more frequent
        if between:
            every = min(full_every, self.config.replication.check_interval.total_seconds())
        shutdown.also_wakes(self.wake)
        self.watch.start()
        self.cover.start()
        self.publish()  # the watch runs: ready (/readyz) before the first pass, which may wait for the aggregator
        next_full = next_any = time.monotonic()
        while not shutdown.event.is_set():
            if self.handed_back:  # serves status and metrics until stopped
                shutdown.event.wait(full_every)
                continue
            started = time.monotonic()
            now = self._pass_now()
            if not now:  # the disk guard between passes (or a pass held for the crossing) as well
                try:
                    self.guard.keep_between_passes(self.read_records, self.clock, self._deadline)
                except HandedBack:
                    continue
            # A pass on time waits as the watch's does, and so does a replication pass: it would delay the full one.
            full = now or (started >= next_full and not self._holding)
            if full or (between and started >= next_any and not self._holding):
                try:
                    if full:
                        self.run_pass()
                    else:
                        self.run_replication_pass()
                except HandedBack:
                    continue
                except Exception:  # one failed pass must not stop the protection
                    self.counters.pass_failures += 1
                    log.exception("sidecar pass failed; the next pass retries")
                    self.publish()
                if full and not now:  # at a fixed rate from each pass's start: a slow pass does not push the next back
                    next_full = started + self._full_every(full_every)
                    allocator.give_back_free_memory()
                next_any = started + every
            wait = min(next_any, next_full) - time.monotonic()
            self.wake.wait(max(0.0, min(wait, self.watch.interval) if self._holding else wait))

    def _full_every(self, full_every: float) -> float:
        """The time to the next full pass: a step of the descent while one is under way (decide/descent.py)."""
        last = self.decider.last
        if last is None or last.written_quotas is None:
            return full_every
        if last.descending or descent.under_way(last.written_quotas, last.client_quotas):
            return min(full_every, self.config.quotas.descent_step.total_seconds())
        return full_every

    # -------------------------------------------------------------- the local watch

    def _pass_now(self) -> bool:
        """Whether the local watch (or the cover's) asked for a pass now; one line when a dir comes near the
        limit, one when none is any more."""
        asked = self.wake.is_set()
        self.wake.clear()
        near = list(self.watch.danger)
        if near and not self._near_the_limit:
            log.info("pass now: local dir %s at or near the limit (within %.1fs at its fill rate); passes follow "
                     "at the watch's pace while it stays there", ", ".join(near),
                     pass_horizon(self.config.local_watch, self.config.storage_limit, self.counters.last_poll_seconds))
        recovered = self._near_the_limit and not near  # a pass now lifts what the dirs no longer need
        if recovered:
            log.info("local dirs away from the limit again: a pass now, then every %gs",
                     self.config.check_interval.total_seconds())
        self._near_the_limit = bool(near)
        self._holding = bool(near) and self._held()
        # A covered broker's volume judged violated: the pass writes its verdict first (the cover says so).
        now = asked and (bool(near) and not self._holding or recovered or bool(self.cover.judged))
        self.counters.watch_passes += now
        return now

    def _held(self) -> bool:
        """volumes.hold_the_pass, with how long this pass has waited already."""
        held_since = self._held_since or time.monotonic()
        held = hold_the_pass(self.watch.until_judged, self.counters.last_poll_seconds, time.monotonic() - held_since)
        self._held_since = held_since if held else None
        return held
