"""The sidecar loop: poll the cluster, decide, write what changed; stop between passes on SIGTERM.

One thread runs the passes and owns all their state; at the end of every pass it publishes a frozen Snapshot,
the only thing the HTTP thread reads. Every pass ends within `poll.timeout` (deadline.py); a failed poll is
one WARNING naming the cause, the first poll that succeeds again one INFO line saying how long they failed.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import Callable

from .act.cordoning import Cordoner
from .act.local_guard import LocalGuard
from .act.local_verdict import LocalVerdict
from .act.quota_writes import QuotaWriter
from .act.replication import ReplicationRunner
from .act.snapshot import Counters, CoverView, LocalWatchView, ReplicationView, Snapshot, utcnow
from .common import allocator, deadline, records
from .common.errors import AdminError, DecisionFailed, HandedBack, RetryableAdminError
from .common.failure_report import FailureReport, report_pass
from .common.observation import Observation, Volume
from .common.refusals import REFUSALS
from .configuration.settings import SidecarConfig
from .decide import descent, quotas
from .decide.decider import Decider, Decision
from .observe.cover_watch import CoverWatch
from .observe.local_watch import LocalWatch, as_volumes, own_volumes
from .observe.volumes import default_horizon, hold_the_pass, with_published
from .observe.znode_volumes import ZnodeVolumes
from .shutdown import GracefulShutdown

log = logging.getLogger(__name__)


class Sidecar:
    def __init__(self, config: SidecarConfig, admin, store, decider: Decider,
                 clock: Callable[[], datetime] = utcnow, replication: ReplicationRunner | None = None,
                 cordoner: Cordoner | None = None, znodes: ZnodeVolumes | None = None, pipeline=None,
                 cover: CoverWatch | None = None):
        self.config = config
        self.pipeline = pipeline  # asks the aggregator (None in tests that give the decider judges of their own)
        self.znodes = znodes  # the sidecars' volumes in ZooKeeper, when zookeeper.connect is set
        self.replication = replication  # when replication throttles are on
        self.cordoner = cordoner  # when this sidecar's broker is known
        self.admin = admin
        self.store = store
        self.decider = decider
        self.clock = clock
        self.counters = Counters()
        self.started_at = clock().timestamp()
        self.handed_back = False  # `quota-sidecar cleanup` ran since this process started: it writes nothing more
        self.quota_writer = QuotaWriter(config.quotas, admin, store, self.counters)
        self.poll_report = FailureReport("poll", "polls")
        self.replication_report = FailureReport("replication pass", "replication passes")
        self.wake = threading.Event()  # the local watch asks for a pass now
        self.watch = self._local_watch()
        self.guard = None if replication is None or self.watch is None else LocalGuard(
            replication, admin, store, config.storage_limit, config.cancel_moves_at_limit, self.counters, self.watch)
        self.cover = cover  # watches the brokers whose agent is down, when this agent covers them
        if cover is not None:
            cover.wake = self._woken
        self.verdict = None if self.watch is None and cover is None else LocalVerdict(
            self.watch, cover, self.quota_writer, decider.judged_locally, self.counters, clock)
        if cover is not None and self.verdict is not None:  # its heartbeats tell the others when the verdict holds
            cover.heartbeats.holding = lambda: bool(self.verdict.holds())
        self._near_the_limit = False
        self._held_since: float | None = None  # since when the next pass waits (_held)
        self._holding = False  # the next pass waits for the watch's next sample
        self._lock = threading.Lock()  # guards the published snapshot, swapped by the loop, read over HTTP
        self._published: Snapshot | None = None
        if pipeline is not None and self.verdict is not None:
            pipeline.while_waiting = self.verdict.while_deciding
        self.publish()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._published

    def publish(self) -> None:
        runner = self.replication
        view = None if runner is None else ReplicationView(
            runner.broker_id, runner.config.capacity(runner.broker_id), runner.last_observation, runner.last)
        watch = None if self.watch is None else LocalWatchView(
            tuple(self.watch.dirs), dict(self.watch.unreadable), tuple(self.watch.danger), self.watch.running)
        snapshot = Snapshot(self.config, self.decider.factor, self.decider.last, replace(self.counters),
                            {entity: dict(keys) for entity, keys in self.quota_writer.in_force.items()}, view,
                            watch, self.cordoner.view if self.cordoner else None, self.quota_writer.tenants,
                            tuple(self.guard.moves) if self.guard else (),
                            self.pipeline.last_decision if self.pipeline else None,
                            None if self.cover is None else CoverView(self.cover.heard(), tuple(self.cover.covered)),
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
            with deadline.within(self._deadline, "the poll"), self._under_way():
                decision = self._pass()
        finally:
            self.counters.last_poll_seconds = time.monotonic() - started
            self.publish()
        return decision

    def _under_way(self):
        return self.verdict.pass_under_way() if self.verdict is not None else nullcontext()

    def _pass(self) -> Decision:
        now = self.clock()
        try:
            if self.verdict is not None:
                self.verdict.write_ahead(now)
            all_records = self.read_records()
            if self._write_the_local_verdict(all_records, now):
                all_records = self.read_records()  # the pass plans its writes on the records as they are now
        except AdminError as error:  # nothing can be written without knowing what is ours; still decide
            all_records = None
            observation = Observation(at=now, error=f"reading the sidecars' records: {error}")
        else:
            observation = replace(self.observe(all_records, now), local_samples=self._local_samples(now),
                                  held_locally=self.verdict is not None and bool(self.verdict.holds()))
        with self.verdict.deciding(all_records) if self.verdict is not None else nullcontext():
            decision = self.decider.decide(observation)
        self.counters.polls += 1
        self.counters.poll_failures += decision.error is not None
        self.counters.fallback_applied += decision.entered_fallback
        self.counters.limit_violations += len(decision.violations)
        write_error = None
        if all_records is not None:  # after a failed poll too: a fallback factor must reach the cluster
            try:
                # A verdict that holds now (this agent's, or another's) judges denser samples than the aggregator:
                # nothing may lift it. A quota written from a later look than this decision's (by this sidecar or
                # another) is left as it is.
                undecided = (decision.error is not None and not decision.entered_fallback) or \
                    (self.verdict is not None and self.verdict.held_anywhere())
                self.quota_writer.apply(decision.written_quotas or decision.client_quotas, all_records,
                                        tighten_only=undecided, seen_at=decision.looked_at)
                if decision.error is None:
                    self._record_descent(decision.descent_rate, records.descent_rate(all_records))
                if self.replication is not None and decision.replication is not None:
                    self._apply_replication(decision.replication, observation.replication, all_records, decision.at)
                if self.cordoner is not None and decision.error is None:  # a failed poll changes no cordon
                    self.cordoner.apply(decision.violations, all_records)
            except AdminError as error:  # the cluster went away since the poll, or the deadline ran out
                self.counters.pass_failures += 1
                write_error = str(error)
        report_pass(decision, write_error, self.poll_report, self.replication_report)
        # What the broker says of its own dirs confirms the watch's, whatever the aggregator answered: the local
        # verdict must not wait for a decision.
        own = [v for v in observation.volumes if v.broker_id == self.config.broker_id]
        if self.verdict is not None and own:
            self.verdict.confirm(own)
        if self.cover is not None and decision.error is None:
            self.cover.brokers = observation.brokers
        return decision

    def _record_descent(self, rate: float | None, recorded: float | None) -> None:
        """The rate the descent began from, for every agent (records.DESCENT): written when it begins or grows by
        a tenth, deleted when it ends."""
        if rate is None and recorded is not None:
            self.store.delete(records.key(records.DESCENT))
        elif rate is not None and (recorded is None or rate > 1.1 * recorded):
            self.store.write_many({records.key(records.DESCENT): {"rate": rate}})

    def _write_the_local_verdict(self, all_records: records.Records, now: datetime) -> bool:
        """The local verdict's quotas first (local_verdict.py; renewed by every pass while a dir stays at the limit,
        so that failed polls never age them into the fallback), then the disk guard while a dir is at or near
        the limit (local_guard.py). Whether anything was written."""
        writes = self.counters.writes
        if self.verdict is not None:
            self.verdict.write(all_records, now, "before the pass reads the cluster")
        guarded = self.guard is not None and self.guard.keep(all_records, now)
        return guarded or self.counters.writes > writes

    def _guarded(self) -> bool:
        """Whether this broker's disk guard is on: a volume of it violated the limit at the last poll, or the
        watch sees a dir of it at or near the limit."""
        violated = {v["broker_id"] for v in self.decider.known_violations}
        return self.config.broker_id in violated or (self.guard is not None and bool(self.guard.at_risk()))

    def run_replication_pass(self) -> None:
        """Between storage polls: moves, network and rates only."""
        try:
            with deadline.within(self._deadline, "the replication pass"), self._under_way():
                all_records = self.read_records()
                observation = self.replication.observe(all_records, self._guarded())
                decision = self.decider.decide_replication(observation)
                self._apply_replication(decision, observation, all_records, self.clock())
            if decision.undecided is not None:  # the rule's own rates without figures were applied
                self.replication_report.failure(decision.undecided)
            else:
                self.replication_report.success()
        except (AdminError, DecisionFailed) as error:
            self.replication_report.failure(str(error))
        finally:
            self.publish()

    def _apply_replication(self, decision, observation, all_records, now: datetime) -> None:
        violated = {v["broker_id"] for v in self.decider.known_violations}
        self.replication.apply(decision, observation, all_records, violated, now)

    def look(self, timeout: float) -> Snapshot:
        """One pass that reads and decides (the aggregator asked) but writes nothing, for `status --direct`: on a
        cluster where no sidecar ran, not even the sidecars' state topic or the pipeline's is created. Each read of the cluster
        ends within `timeout` seconds; AdminError when the cluster could not be read."""
        with deadline.within(timeout, "status --direct"):
            all_records = records.parse(self.store.read_all(create=False))
            observation = self.observe(all_records, self.clock(), publish_own=False)
        if observation.error is not None:
            raise RetryableAdminError(observation.error)
        decision = self.decider.decide(observation)  # the aggregator's answer: within poll.timeout, not `timeout`
        if self.replication is not None:  # what a pass would write, shown rather than written
            self.replication.last = decision.replication
        with deadline.within(timeout, "status --direct"):
            self.quota_writer.look(decision.client_quotas, all_records)
            if self.cordoner is not None:
                self.cordoner.read()
        self.publish()
        return self.snapshot()

    def observe(self, all_records: records.Records, now: datetime, publish_own: bool = True) -> Observation:
        """Storage first, then replication while the deadline lasts (the moves' lists are kept up to date
        even when a broker's volumes cannot be read). When both fail, the poll's WARNING is the one line.
        With znode volumes the pass first makes sure its broker's znode holds its newest volumes."""
        brokers, volumes, published, tenants, producer_rates, descent_rate, error = (), (), {}, None, None, None, None
        try:
            brokers = tuple(self.admin.live_broker_ids())
            if self.config.storage_check_enabled:
                volumes = tuple(self.admin.describe_volumes(brokers, now))
                if self.znodes is not None:  # a lost ZooKeeper session fails the poll like a lost broker
                    if publish_own:
                        self.znodes.publish(self._own_volumes(now))
                    published = self.znodes.read(now)
                    brokers, volumes = with_published(brokers, volumes, published)
            # Last: a ZooKeeper-mode broker answers DescribeClientQuotas from ZooKeeper, so without it this waits
            # out the deadline; the poll's error then names what failed first.
            in_force, owned = self.admin.describe_user_quotas(), records.owned(all_records, records.QUOTA)
            tenants = quotas.tenant_rates(in_force, owned, self.config.quotas)
            producer_rates = descent.in_force(in_force, owned)
            descent_rate = records.descent_rate(all_records)
        except AdminError as failure:
            error = str(failure)
        replication = None
        if self.replication is not None and not deadline.expired():
            try:
                replication = self.replication.observe(all_records, self._guarded())
            except AdminError as failure:  # replication waits for the next pass; disk protection goes on
                if error is None:
                    self.replication_report.failure(str(failure))
        if error is not None:
            return Observation(at=now, error=error, replication=replication, tenant_rates=tenants,
                               producer_rates=producer_rates, descent_rate=descent_rate)
        return Observation(at=now, brokers=brokers, volumes=volumes, replication=replication, tenant_rates=tenants,
                           producer_rates=producer_rates, descent_rate=descent_rate,
                           published_volumes=tuple(v for vs in published.values() for v in vs))

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
        if self.replication is not None:
            self.replication.cleanup(all_records)
        if self.cordoner is not None:
            self.cordoner.cleanup(all_records)
        if self.guard is not None:
            self.guard.cleanup(all_records)

    def warm_up(self) -> None:
        """Connect the records' writer and the pipeline (creating its topics when they are missing) now, not
        in the first pass: seconds that would otherwise delay it, and with it a move's first throttle."""
        try:
            self.store.connect()
        except AdminError as failure:  # the first write connects, and says so when it cannot
            log.debug("connecting the records' writer failed: %s", failure)
        try:
            if self.pipeline is not None:
                self.pipeline.connect()
        except Exception as failure:  # the first pass tries again, and says so as a failed poll
            log.info("the pipeline is not connected yet: %s", failure)

    def close(self) -> None:
        for watch in (self.watch, self.cover):
            if watch is not None:
                watch.stop()
        if self.replication is not None:
            self.replication.close()
        self.admin.close()
        self.store.close()
        if self.pipeline is not None:
            self.pipeline.close()
        if self.znodes is not None:
            self.znodes.close()

    # -------------------------------------------------------------- the loop

    def run(self, shutdown: GracefulShutdown) -> None:
        # PT0S disables the storage check, not the loop: other duties still run once a minute.
        full_every = self.config.check_interval.total_seconds() or 60.0
        every = full_every
        if self.replication is not None:  # replication passes in between, when they are more frequent
            every = min(full_every, self.config.replication.check_interval.total_seconds())
        shutdown.also_wakes(self.wake)
        for watch in (self.watch, self.cover):
            if watch is not None:
                watch.start()
        self.publish()  # the watch runs: ready (/readyz) before the first pass, which may wait for the aggregator
        next_full = next_any = time.monotonic()
        while not shutdown.event.is_set():
            if self.handed_back:  # serves status and metrics until stopped
                shutdown.event.wait(full_every)
                continue
            started = time.monotonic()
            now = self._pass_now()
            if self.guard is not None and not now:  # between passes (or a pass held for the crossing) as well
                try:
                    self.guard.keep_between_passes(self.read_records, self.clock, self._deadline)
                except HandedBack:
                    continue
            # A pass on time waits as the watch's does, and so does a replication pass: it would delay the full one.
            full = now or (started >= next_full and not self._holding)
            if full or (self.replication is not None and started >= next_any and not self._holding):
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

    def _local_watch(self) -> LocalWatch | None:
        settings, limit = self.config.local_watch, self.config.storage_limit
        if not settings.enabled or limit is None or not self.config.storage_check_enabled:
            return None
        offer = None if self.znodes is None or self.config.broker_id is None else (
            lambda samples: self.znodes.offer(as_volumes(self.config.broker_id, samples, self.clock())))
        return LocalWatch(settings, limit, self._woken, self._horizon, on_sample=offer,
                          fill_window=self.config.fill_window.total_seconds())

    def _woken(self) -> None:
        """The watch (or the cover's) asks for a pass now; the verdict is written at once if a pass is under way."""
        self.wake.set()
        if self.verdict is not None:
            self.verdict.ahead_of_the_pass()

    def _horizon(self) -> float:
        """How far ahead of the limit a local volume asks for a pass: the configured horizon or a few passes,
        plus the lead time of predicted violations, so that the pass that predicts one runs in time."""
        settings = self.config.local_watch
        horizon = (settings.horizon.total_seconds() if settings.horizon is not None else
                   default_horizon(self.counters.last_poll_seconds, settings.interval.total_seconds()))
        return horizon + self.config.storage_limit.lead_time.total_seconds()

    def _pass_now(self) -> bool:
        """Whether the local watch (or the cover's) asked for a pass now; one line when a dir comes near the
        limit, one when none is any more."""
        asked = self.wake.is_set()
        self.wake.clear()
        near = list(self.watch.danger) if self.watch is not None else []
        if near and not self._near_the_limit:
            log.info("pass now: local dir %s at or near the limit (within %.1fs at its fill rate); passes follow "
                     "at the watch's pace while it stays there", ", ".join(near), self._horizon())
        recovered = self._near_the_limit and not near  # a pass now lifts what the dirs no longer need
        if recovered:
            log.info("local dirs away from the limit again: a pass now, then every %gs",
                     self.config.check_interval.total_seconds())
        self._near_the_limit = bool(near)
        self._holding = bool(near) and self._held()
        # A covered broker's volume judged violated: the pass writes its verdict first (the cover says so).
        now = asked and (bool(near) and not self._holding or recovered or bool(self.cover and self.cover.judged))
        self.counters.watch_passes += now
        return now

    def _held(self) -> bool:
        """volumes.hold_the_pass, with how long this pass has waited already."""
        held_since = self._held_since or time.monotonic()
        held = hold_the_pass(self.watch.until_judged, self.counters.last_poll_seconds, time.monotonic() - held_since)
        self._held_since = held_since if held else None
        return held

    def _local_samples(self, now: datetime) -> tuple[Volume, ...]:
        """This broker's local samples as volume measurements for the fill history (its broker id known)."""
        if self.watch is None or self.config.broker_id is None:
            return ()
        return as_volumes(self.config.broker_id, [s for samples in self.watch.history().values() for s in samples], now)

    def _own_volumes(self, now: datetime) -> tuple[Volume, ...]:
        """This broker's volumes for its znode: the running watch's newest samples, else read now."""
        if self.watch is not None and self.watch.running and (latest := self.watch.latest()):
            return as_volumes(self.config.broker_id, latest, now)
        return tuple(own_volumes(self.config.broker_id, self.config.local_watch.log_dirs, now))
