"""One poll's decision: observations in, a Decision out. The same code serves `run` and `evaluate`.

Nothing here does I/O; the rules (the aggregator's, or evaluate's Spark) are passed in as plain callables so that the loop, the
replay command and the tests all drive the very same path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Mapping

from ..common.errors import SparkUnavailable
from ..common.observation import Observation, ReplicationObservation, Volume
from ..configuration.settings import SidecarConfig
from ..observe.volumes import History, by_broker, recorded, remember, with_history
from . import descent, quotas
from .throttle_factor import FALLBACK, LAST_VALID, FactorState, after_failure, after_incomplete, after_success
from .throttles import ReplicationDecider, ReplicationDecision

log = logging.getLogger(__name__)

# (measurements of the usable volumes, limit params) -> (throttle factor, one row per volume with its
# available_ratio, fill_bytes_per_sec, seconds_to_limit, violated, predicted and throttle_factor)
VolumeJudge = Callable[[list[dict], dict], tuple[float, list[dict]]]


@dataclass(frozen=True)
class Decision:
    at: datetime
    throttle_factor: float
    source: str
    valid_from: datetime | None
    client_quotas: quotas.ClientQuotas  # proposal 047's, for the factor
    volumes: tuple[Volume, ...] = ()       # every volume considered, offline ones included
    violations: tuple[dict, ...] = ()
    judged: tuple[dict, ...] = ()          # every usable volume as judged: fill rate, time to the limit, verdict
    error: str | None = None
    entered_fallback: bool = False
    replication: ReplicationDecision | None = None  # when replication throttles are on
    replication_error: str | None = None  # why the replication throttles could not be decided
    published_volumes: tuple[Volume, ...] = ()  # the sidecars' znode volumes (zookeeper.connect), for status
    written_quotas: quotas.ClientQuotas | None = None  # what is written on the way to client_quotas (descent.py)
    descending: bool = False  # a volume fills within the descent's start or horizon
    descent_rate: float | None = None  # the fastest fill since the descent began (None: none under way)
    # Each producer quota the descent stepped from, as this decision last knew it (None: no quota): a write that
    # finds another value in force was decided without it (writes.QuotaWriter.apply).
    stepped_from: Mapping = field(default_factory=dict)

    @property
    def looked_at(self) -> datetime:
        """When the cluster was looked at for the factor in force: this poll for a computed or fallback factor
        (the fallback is a rule about no look, applied now), the last success's poll for one kept after it."""
        if self.source == LAST_VALID and self.valid_from is not None:
            return self.valid_from
        return self.at

    @property
    def active_brokers(self) -> int:
        return len({volume.broker_id for volume in self.volumes})

    @property
    def active_log_dirs(self) -> int:
        return sum(1 for volume in self.volumes if volume.usable)

    def to_json(self) -> dict:
        result = {
            "at": iso(self.at),
            "throttle_factor": self.throttle_factor,
            "source": self.source,
            "valid_from": iso(self.valid_from),
            "error": self.error,
            "violations": list(self.violations),
            "volumes": list(self.judged),
            "client_quotas": self.client_quotas.to_json(),
            "written_quotas": (self.written_quotas or self.client_quotas).to_json(),
            "descending": self.descending,
            "active_brokers": self.active_brokers,
            "active_log_dirs": self.active_log_dirs,
        }
        if self.replication is not None:
            result["replication"] = self.replication.to_json()
        return result


class Decider:
    """Carries the state between polls: the factor's timeline and the last volumes of every broker."""

    def __init__(self, config: SidecarConfig, judge_volumes: VolumeJudge,
                 replication: ReplicationDecider | None = None,
                 ask_rates_ahead: Callable[[list[dict]], None] | None = None):
        self.config = config
        self.judge_volumes = judge_volumes
        # Asks the rate rule now what the replication decision will most likely ask it after the volumes
        # (the aggregator answers both in one round trip); the rate judge takes that answer for the same rows.
        self.ask_rates_ahead = ask_rates_ahead
        self.replication = replication  # when replication throttles are on
        self.factor = FactorState()
        self.remembered: dict[int, tuple[Volume, ...]] = {}
        self.history: History = {}  # each volume's measurements within the fill window
        self.known_violations: tuple[dict, ...] = ()  # from the last successful poll
        self.missing: set[int] = set()  # brokers seen before, absent for longer than the validity
        self.tenant_rates: dict = {}  # from the last poll that read them, for the local verdict and failed polls
        self.descending = False  # a volume fills within the descent's start or horizon (at the last success)
        self.fill: float | None = None  # the fastest broker's fill then (descent.fill_bound), bytes/s
        self.descent_rate: float | None = None  # the fastest fill since the descent began (None: none under way)
        self.in_force: dict = {}  # the producer quotas in force (descent.Written), as last read or written
        self.last: Decision | None = None

    def decide(self, observation: Observation) -> Decision:
        previous = self.factor
        if observation.tenant_rates is not None:
            self.tenant_rates = dict(observation.tenant_rates)
        if observation.producer_rates is not None:  # the records read: the agents' shared rate is the one
            self.descent_rate = observation.descent_rate
        error = observation.error
        violations: tuple[dict, ...] = ()
        judged: tuple[dict, ...] = ()
        volumes = tuple(v for vs in self.remembered.values() for v in vs)
        if error is None and self.config.storage_limit is not None:
            self._ask_rates_ahead(observation)
            try:
                volumes, judged, factor = self._judge(observation)
            except SparkUnavailable:  # evaluate's Spark, started at first use, cannot start
                raise
            except Exception as failure:  # no decision counts as a failed poll, which the loop reports
                log.debug("volume decision failed: %s", failure, exc_info=True)
                error = f"decision failed: {failure}"
            else:
                violations = tuple(_violation(row) for row in judged if row["violated"])
                self.known_violations = violations
                self.descending = any(row["descending"] for row in judged)
                self.fill = descent.fill_bound(judged, self.history)
                self.descent_rate = max(self.descent_rate or 0.0, self.fill or 0.0) if self.descending else None
                if self.missing:
                    self.factor = after_incomplete(self.factor, observation.at, self.config.fallback_factor)
                    error = (f"broker(s) {sorted(self.missing)} absent for longer than the validity duration: "
                             "their volumes are unknown")
                else:
                    self.factor = after_success(self.factor, 0.0 if observation.held_locally else factor,
                                                observation.at)
                return self._decision(observation, previous, volumes, violations, error, judged)
        if error is not None:
            self.factor = after_failure(self.factor, observation.at, self.config.validity,
                                        self.config.fallback_factor)
        return self._decision(observation, previous, volumes, violations, error)

    def _decision(self, observation: Observation, previous: FactorState, volumes, violations, error,
                  judged: tuple[dict, ...] = ()) -> Decision:
        replication, replication_error = None, None
        if self.replication is not None and observation.replication is not None:
            try:
                replication = self.decide_replication(observation.replication)
                replication_error = replication.undecided  # its rates then the rule's own without figures
            except SparkUnavailable:
                raise
            except Exception as failure:  # no decision: the throttles wait for the next pass
                log.debug("replication decision failed: %s", failure, exc_info=True)
                replication_error = f"decision failed: {failure}"
        goal = quotas.wanted(self.config.quotas, self.factor.factor, self.tenant_rates)
        written, stepped_from = self._written(goal, observation)
        decision = Decision(
            at=observation.at,
            throttle_factor=self.factor.factor,
            source=self.factor.source,
            valid_from=self.factor.valid_from,
            client_quotas=goal,
            written_quotas=written,
            stepped_from=stepped_from,
            descending=self.descending,
            descent_rate=self.descent_rate,
            volumes=volumes,
            violations=violations,
            judged=judged,
            error=error,
            entered_fallback=self.factor.fallback_switches > previous.fallback_switches,
            replication=replication,
            replication_error=replication_error,
            published_volumes=observation.published_volumes,
        )
        self.last = decision
        return decision

    def _written(self, goal: quotas.ClientQuotas, observation: Observation) -> tuple[quotas.ClientQuotas, dict]:
        """The goal as the descent writes it, stepped from the producer quotas in force: as the poll read them, or
        (`evaluate`) as this decider last wrote them. A step is dated by the later of its record's look and when
        this decider first saw it (a record's look is the last success's while polls fail). A poll that could not
        decide takes no step while it keeps the last valid factor, which may be stale (room back); the fallback,
        proposal 047's answer once that factor is too old, comes in steps."""
        now = observation.at.timestamp()
        if observation.producer_rates is not None:
            self.in_force = {entity: self._dated(entity, seen, now) for entity, seen in observation.producer_rates.items()}
        own = {None: self.config.quotas.produce, **self.tenant_rates}
        stepped_from = {} if observation.producer_rates is None else {  # only a look's values say what is in force
            entity: self.in_force.get(entity, descent.Written(own.get(entity))).rate for entity in [None, *goal.tenants]}
        written = descent.descend(goal, self.factor.factor, self.descending, self.fill, self.in_force, own,
                                  now, self.config.quotas,
                                  hold=observation.error is not None and self.factor.source != FALLBACK)
        for entity, rate in [(None, written.default_user.get(quotas.PRODUCE)), *written.tenants.items()]:
            rate = own.get(entity) if rate is None and entity is not None else rate
            before = self.in_force.get(entity, descent.Written(own.get(entity))).rate
            if before != rate:
                self.in_force[entity] = descent.Written(rate, now if descent.lower(rate, before) else None)
        return written, stepped_from

    def _dated(self, entity, seen: descent.Written, now: float) -> descent.Written:
        known = self.in_force.get(entity)
        if seen.at is None:  # not lowered by the sidecars, or raised
            return seen
        if known is not None and known.rate == seen.rate and known.at is not None:
            return descent.Written(seen.rate, max(known.at, seen.at))
        return descent.Written(seen.rate, max(now, seen.at))  # first seen now

    def _ask_rates_ahead(self, observation: Observation) -> None:
        """The replication question with the last poll's violations: the same rows as after this poll's
        volumes unless a broker catching up outside a move is newly guarded, when the rate judge asks again."""
        if self.ask_rates_ahead is None or self.replication is None or observation.replication is None:
            return
        rows = self.replication.question(observation.replication, self.known_violations)
        if rows:
            self.ask_rates_ahead(rows)

    def judged_locally(self, at: datetime) -> quotas.ClientQuotas:
        """The quotas of a volume of this broker that its statvfs sample shows at the hard limit: the factor is
        0 whatever the other volumes hold (it is the smallest of theirs), so no cluster view is needed, and the
        tenants are those the last poll read. A poll that fails after it keeps that factor for the validity
        duration, as after any violation."""
        self.factor = after_success(self.factor, 0.0, at)
        return quotas.wanted(self.config.quotas, 0.0, self.tenant_rates)

    def decide_replication(self, observation: ReplicationObservation) -> ReplicationDecision:
        """The replication throttles alone, with the violations of the last successful storage poll for
        the disk guard (a failed poll, or a pass between storage polls, keeps the last known ones)."""
        return self.replication.decide(observation, self.known_violations)

    def _judge(self, observation: Observation) -> tuple[tuple[Volume, ...], tuple[dict, ...], float]:
        answered = by_broker(observation.brokers, observation.volumes)
        considered = remember(self.remembered, answered, observation.at, self.config.validity)
        volumes = tuple(sorted((v for vs in considered.values() for v in vs),
                               key=lambda v: (v.broker_id, v.log_dir)))
        usable = [volume for volume in volumes if volume.usable]
        # What was seen is history even should the decision fail now.
        self.history = recorded(self.history, [*observation.local_samples, *usable], observation.at,
                                self.config.fill_window)
        factor, judged = self.judge_volumes(with_history(self.history, usable, observation.at),
                                            {**self.config.storage_limit.as_params(),
                                             "descent_rate_bytes_per_sec": self.descent_rate})
        self.missing = (self.missing | (set(self.remembered) - set(considered))) - set(answered)
        self.remembered = considered
        return volumes, tuple(_judged(row) for row in judged), factor


_JUDGED = ("broker_id", "log_dir", "total_bytes", "available_bytes", "available_ratio", "fill_bytes_per_sec",
           "seconds_to_limit", "violated", "predicted", "throttle_factor", "descending")


def _judged(row: Mapping) -> dict:
    """An aggregator older than the descent judges no volume descending."""
    return {key: row.get(key, False) if key == "descending" else row[key] for key in _JUDGED}


def _violation(row: Mapping) -> dict:
    return {key: row[key] for key in ("broker_id", "log_dir", "total_bytes", "available_bytes", "available_ratio",
                                      "seconds_to_limit", "predicted")}


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")
