"""The sidecar loop: poll the cluster, decide, write what changed; stop between passes on SIGTERM.

One thread runs the passes and owns all their state. At the end of every pass it publishes a frozen
Snapshot, the only thing the HTTP thread (status, metrics, health) reads.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Mapping

from . import ownership, quotas, records
from .config import SidecarConfig
from .cordoning import Cordoner, CordonView
from .decider import Decider, Decision
from .errors import AdminError
from .observation import Entity, Observation, ReplicationObservation
from .replication import ReplicationRunner
from .throttle_factor import FactorState
from .throttles import ReplicationDecision

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Counters:
    """Counts since start (Prometheus counters), and the last pass's duration (a gauge)."""
    polls: int = 0
    poll_failures: int = 0
    pass_failures: int = 0      # a pass that raised (logged with its traceback; the loop goes on)
    fallback_applied: int = 0
    limit_violations: int = 0   # violating volumes, summed over polls
    writes: int = 0             # client quota values written to the cluster
    last_poll_seconds: float = 0.0


@dataclass(frozen=True)
class ReplicationView:
    """The replication side of a snapshot: this sidecar's broker, what its last pass read and decided."""
    broker_id: int
    capacity: int | None
    observation: ReplicationObservation | None
    decision: ReplicationDecision | None


@dataclass(frozen=True)
class Snapshot:
    """The sidecar's state at the end of a pass: what status, metrics and /healthz show."""
    config: SidecarConfig
    factor: FactorState
    decision: Decision | None
    counters: Counters
    quotas_in_force: Mapping[Entity, Mapping[str, float]]
    replication: ReplicationView | None = None
    cordons: CordonView | None = None  # with this sidecar's broker known


class GracefulShutdown:
    """Set by SIGTERM/SIGINT; the loop finishes its pass and stops."""

    def __init__(self):
        self.event = threading.Event()

    def install(self) -> "GracefulShutdown":
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.event.set())
        return self

    def wait(self, seconds: float) -> bool:
        return self.event.wait(seconds)


class Sidecar:
    def __init__(self, config: SidecarConfig, admin, store, decider: Decider,
                 clock: Callable[[], datetime] = utcnow, replication: ReplicationRunner | None = None,
                 cordoner: Cordoner | None = None):
        self.config = config
        self.replication = replication  # when replication throttles are on
        self.cordoner = cordoner  # when this sidecar's broker is known
        self.admin = admin
        self.store = store
        self.decider = decider
        self.clock = clock
        self.counters = Counters()
        self.quotas_in_force: dict = {}
        self._lock = threading.Lock()  # guards the published snapshot, swapped by the loop, read over HTTP
        self._published: Snapshot | None = None
        self.publish()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._published

    def publish(self) -> None:
        runner = self.replication
        view = None if runner is None else ReplicationView(
            runner.broker_id, runner.config.capacity(runner.broker_id), runner.last_observation, runner.last)
        snapshot = Snapshot(self.config, self.decider.factor, self.decider.last, replace(self.counters),
                            {entity: dict(keys) for entity, keys in self.quotas_in_force.items()}, view,
                            self.cordoner.view if self.cordoner else None)
        with self._lock:
            self._published = snapshot

    # -------------------------------------------------------------- one pass

    def run_pass(self) -> Decision:
        started = time.monotonic()
        try:
            decision = self._pass()
        finally:
            self.counters.last_poll_seconds = time.monotonic() - started
            self.publish()
        return decision

    def _pass(self) -> Decision:
        try:
            all_records = self.read_records()
        except AdminError as error:  # nothing can be written without knowing what is ours; still decide
            log.warning("poll failed: reading the sidecars' records: %s", error)
            all_records = None
            observation = Observation(at=self.clock(), error=f"reading the sidecars' records: {error}")
        else:
            observation = self.observe(all_records)
        decision = self.decider.decide(observation)
        self.counters.polls += 1
        self.counters.poll_failures += decision.error is not None
        self.counters.fallback_applied += decision.entered_fallback
        self.counters.limit_violations += len(decision.violations)
        if decision.entered_fallback:
            log.warning("throttle factor fallback %.3f applied: no valid factor since %s (%s)",
                        decision.throttle_factor, decision.valid_from, decision.error)
        if all_records is None:
            return decision
        self.apply_quotas(decision.client_quotas, all_records)
        if self.replication is not None and decision.replication is not None:
            self._apply_replication(decision.replication, observation.replication, all_records, decision.at)
        if self.cordoner is not None and decision.error is None:  # a failed poll changes no cordon
            self.cordoner.apply(decision.violations, all_records)
        return decision

    def run_replication_pass(self) -> None:
        """Between storage polls: moves, network and rates only."""
        try:
            all_records = self.read_records()
            observation = self.replication.observe(all_records)
        except AdminError as error:
            log.warning("replication poll failed: %s", error)
            return
        try:
            self._apply_replication(self.decider.decide_replication(observation), observation, all_records,
                                    self.clock())
        finally:
            self.publish()

    def _apply_replication(self, decision, observation, all_records, now: datetime) -> None:
        violated = {v["broker_id"] for v in self.decider.known_violations}
        self.replication.apply(decision, observation, all_records, violated, now)

    def look(self) -> Snapshot:
        """One pass that reads and decides (Spark included) but writes nothing, for `status --direct`: on a
        cluster where no sidecar ran, not even the sidecars' state topic is created."""
        all_records = records.parse(self.store.read_all(create=False))
        decision = self.decider.decide(self.observe(all_records))
        self.quotas_in_force = self.read_quotas(decision.client_quotas, records.owned(all_records, records.QUOTA))
        if self.cordoner is not None:
            self.cordoner.read()
        self.publish()
        return self.snapshot()

    def observe(self, all_records: records.Records) -> Observation:
        now = self.clock()
        replication = None
        if self.replication is not None:
            try:
                replication = self.replication.observe(all_records)
            except AdminError as error:  # replication waits for the next pass; disk protection goes on
                log.warning("replication poll failed: %s", error)
        try:
            brokers = tuple(self.admin.live_broker_ids())
            volumes = tuple(self.admin.describe_volumes(brokers, now)) if self.config.storage_check_enabled else ()
        except AdminError as error:
            log.warning("poll failed: %s", error)
            return Observation(at=now, error=str(error), replication=replication)
        return Observation(at=now, brokers=brokers, volumes=volumes, replication=replication)

    def read_records(self) -> dict[tuple, dict]:
        """Everything the sidecars keep in the cluster, read once a pass: ownership records, overrides."""
        return records.parse(self.store.read_all())

    def apply_quotas(self, wanted: quotas.ClientQuotas, all_records: records.Records) -> None:
        def planned(all_records: records.Records) -> tuple[dict, list[ownership.Write]]:
            owned = records.owned(all_records, records.QUOTA)
            in_force = self.read_quotas(wanted, owned)
            return in_force, ownership.plan(quotas.targets(wanted), quotas.flatten(in_force), owned)

        in_force, writes = planned(all_records)
        if any(write.left_alone for write in writes):
            # Another sidecar may have written since this pass read the records, or the broker answering may
            # lag the last write: a second look before leaving a quota to someone else.
            time.sleep(ownership.SECOND_LOOK_SECONDS)
            in_force, writes = planned(self.read_records())
        self._write_quotas(writes)
        self.quotas_in_force = _after(in_force, writes)

    def read_quotas(self, wanted: quotas.ClientQuotas, owned) -> dict:
        """The quotas in force for every entity the sidecars want or once wrote."""
        entities = dict.fromkeys([*wanted.entities(), *(entity for entity, _ in owned)])
        return self.admin.describe_user_quotas(list(entities))

    def cleanup(self) -> None:
        """Hand back every quota the sidecars set: the value it replaced, unless someone changed it since."""
        def planned() -> tuple[records.Records, list[ownership.Write]]:
            all_records = self.read_records()
            # The sidecar's own exemption goes last: until then its record deletions must not be throttled.
            owned = dict(sorted(records.owned(all_records, records.QUOTA).items(),
                                key=lambda item: isinstance(item[0][0], tuple)))
            in_force = self.admin.describe_user_quotas(list(dict.fromkeys(entity for entity, _ in owned)))
            return all_records, ownership.restore(quotas.flatten(in_force), owned)

        all_records, writes = planned()
        if any(write.left_alone for write in writes):  # the last pass's write may not read back yet
            time.sleep(ownership.SECOND_LOOK_SECONDS)
            all_records, writes = planned()
        self._write_quotas(writes, force=True)
        if self.replication is not None:
            self.replication.cleanup(all_records)
        if self.cordoner is not None:
            self.cordoner.cleanup(all_records)

    def _write_quotas(self, writes: list[ownership.Write], force: bool = False) -> None:
        def changed(write: ownership.Write) -> None:
            if write.left_alone:
                log.info("%s: %s", _quota_label(write.target), ownership.left_alone_reason(write, _rate))
                return
            self.counters.writes += 1
            log.info("%s: %s -> %s", _quota_label(write.target), _rate(write.old), _rate(write.new))

        ownership.carry_out(writes, self.store, lambda target: records.key(records.QUOTA, *target), self._alter_quota,
                            changed, force)

    def _alter_quota(self, target, value) -> None:
        entity, key = target
        self.admin.alter_user_quotas({entity: {key: value}})

    def warm_up(self) -> None:
        """Run each Spark query once on no rows: its first run plans and compiles it, seconds that would
        otherwise delay the first pass, and with it a move's first throttle."""
        try:
            if self.config.storage_limit is not None:
                self.decider.judge_volumes([], self.config.storage_limit.as_params())
            if self.replication is not None:
                self.replication.decider.judge_rates([])
        except Exception as failure:  # the first pass will try again, and count a failure then
            log.warning("warming up the Spark queries failed: %s", failure)

    def close(self) -> None:
        if self.replication is not None:
            self.replication.close()
        self.admin.close()
        self.store.close()

    # -------------------------------------------------------------- the loop

    def run(self, shutdown: GracefulShutdown) -> None:
        # PT0S disables the storage check, not the loop: other duties still run once a minute.
        full_every = self.config.check_interval.total_seconds() or 60.0
        every = full_every
        if self.replication is not None:  # replication passes in between, when they are more frequent
            every = min(full_every, self.config.replication.check_interval.total_seconds())
        next_full = time.monotonic()
        while not shutdown.event.is_set():
            full = time.monotonic() >= next_full
            try:
                if full:
                    self.run_pass()
                else:
                    self.run_replication_pass()
            except Exception:  # one failed pass must not stop the protection
                self.counters.pass_failures += 1
                log.exception("sidecar pass failed; the next pass retries")
                self.publish()
            now = time.monotonic()
            if full:
                next_full = now + full_every
            if shutdown.wait(min(every, max(next_full - now, 0.0))):
                break


def _after(in_force: dict, writes: list[ownership.Write]) -> dict:
    result = {entity: dict(keys) for entity, keys in in_force.items()}
    for write in writes:
        entity, key = write.target
        keys = result.setdefault(entity, {})
        if write.new is None:
            keys.pop(key, None)
        else:
            keys[key] = write.new
    return result


def _quota_label(target) -> str:
    entity, key = target
    return f"quota {quotas.entity_label(entity)} {key}"


def _rate(value: float | None) -> str:
    if value is None:
        return "none"
    return "unlimited" if value >= quotas.UNLIMITED else f"{value:.0f}"
