"""The sidecar loop: poll the cluster, decide, write what changed; stop between passes on SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from . import ownership, quotas
from .config import SidecarConfig
from .decider import Decider, Decision, Observation
from .errors import AdminError

log = logging.getLogger(__name__)
QUOTA_RECORD = "quota"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Counters:
    """Monotonic counts since start, exposed as Prometheus counters."""
    polls: int = 0
    poll_failures: int = 0
    pass_failures: int = 0      # a pass that raised (logged with its traceback; the loop goes on)
    fallback_applied: int = 0
    limit_violations: int = 0   # violating volumes, summed over polls
    writes: int = 0             # client quota values written to the cluster
    last_poll_seconds: float = 0.0


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
                 clock: Callable[[], datetime] = utcnow, replication=None):
        self.config = config
        self.replication = replication  # a replication.ReplicationRunner when replication throttles are on
        self.admin = admin
        self.store = store
        self.decider = decider
        self.clock = clock
        self.counters = Counters()
        self.quotas_in_force: dict = {}
        self.lock = threading.Lock()  # the HTTP thread reads what a pass writes

    # -------------------------------------------------------------- one pass

    def run_pass(self) -> Decision:
        started = time.monotonic()
        try:
            records = self.read_records()
        except AdminError as error:  # nothing can be written without knowing what is ours; still decide
            log.warning("poll failed: reading the sidecars' records: %s", error)
            records, observation = None, Observation(at=self.clock(), error=f"reading the sidecars' records: {error}")
        else:
            observation = self.observe(records)
        decision = self.decider.decide(observation)
        with self.lock:
            self.counters.polls += 1
            self.counters.poll_failures += decision.error is not None
            self.counters.fallback_applied += decision.entered_fallback
            self.counters.limit_violations += len(decision.violations)
        if decision.entered_fallback:
            log.warning("throttle factor fallback %.3f applied: no valid factor since %s (%s)",
                        decision.throttle_factor, decision.valid_from, decision.error)
        if records is None:
            self.counters.last_poll_seconds = time.monotonic() - started
            return decision
        self.apply_quotas(decision.client_quotas, records)
        if self.replication is not None and decision.replication is not None:
            self._apply_replication(decision.replication, observation.replication, records, decision.at)
        self.counters.last_poll_seconds = time.monotonic() - started
        return decision

    def run_replication_pass(self) -> None:
        """Between storage polls: moves, network and rates only."""
        try:
            records = self.read_records()
            observation = self.replication.observe(records)
        except AdminError as error:
            log.warning("replication poll failed: %s", error)
            return
        self._apply_replication(self.decider.decide_replication(observation), observation, records, self.clock())

    def _apply_replication(self, decision, observation, records, now: datetime) -> None:
        violated = {v["broker_id"] for v in self.decider.known_violations}
        self.replication.apply(decision, observation, records, violated, now)

    def observe(self, records: dict) -> Observation:
        now = self.clock()
        replication = None
        if self.replication is not None:
            try:
                replication = self.replication.observe(records)
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
        return {_hashable(json.loads(key)): value for key, value in self.store.read_all().items()}

    def apply_quotas(self, wanted: quotas.ClientQuotas, all_records: dict) -> None:
        records = of_kind(all_records, QUOTA_RECORD)
        in_force = self.read_quotas(wanted, records)
        writes = ownership.plan(quotas.targets(wanted), quotas.flatten(in_force), records)
        self.write_owned(QUOTA_RECORD, writes, self._alter_quota, _quota_label)
        self.quotas_in_force = _after(in_force, writes)

    def read_quotas(self, wanted: quotas.ClientQuotas, records) -> dict:
        """The quotas in force for every entity the sidecars want or once wrote."""
        entities = dict.fromkeys([*wanted.entities(), *(entity for entity, _ in records)])
        return self.admin.describe_user_quotas(list(entities))

    def cleanup(self) -> None:
        """Put back every quota the sidecars set, as it was before they first set it."""
        all_records = self.read_records()
        # The sidecar's own exemption goes last: until then its record deletions must not be throttled.
        records = dict(sorted(of_kind(all_records, QUOTA_RECORD).items(), key=lambda item: isinstance(item[0][0], tuple)))
        in_force = self.admin.describe_user_quotas(list(dict.fromkeys(entity for entity, _ in records)))
        self.write_owned(QUOTA_RECORD, ownership.restore(quotas.flatten(in_force), records),
                         self._alter_quota, _quota_label, force=True)
        if self.replication is not None:
            self.replication.cleanup(all_records)

    def write_owned(self, kind: str, writes: list[ownership.Write], apply_one, label, force: bool = False) -> None:
        def changed(write: ownership.Write) -> None:
            self.counters.writes += 1
            log.info("%s: %s -> %s", label(write.target), _rate(write.old), _rate(write.new))

        ownership.carry_out(writes, self.store, lambda target: json.dumps([kind, *target]), apply_one, changed, force)

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
        if self.replication is not None and self.replication.sampler is not None:
            self.replication.sampler.stop()
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
            now = time.monotonic()
            if full:
                next_full = now + full_every
            if shutdown.wait(min(every, max(next_full - now, 0.0))):
                break


def _hashable(value):
    return tuple(_hashable(item) for item in value) if isinstance(value, list) else value


def of_kind(records: dict[tuple, dict], kind: str) -> dict[tuple, float | None]:
    """target -> the value it replaced, for every target of this kind the sidecars wrote."""
    return {key[1:]: value["replaced"] for key, value in records.items() if key[0] == kind}


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
