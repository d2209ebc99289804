"""What a sidecar shows of itself: a frozen Snapshot published at the end of every pass.

The loop's thread builds it; status, metrics and the HTTP endpoint read only this.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping

from ..common.observation import Entity, ReplicationObservation
from ..common.refusals import Refusal
from ..configuration.settings import SidecarConfig
from ..decide.decider import Decision
from ..decide.quotas import TenantCount
from ..decide.throttle_factor import FactorState
from ..decide.throttles import ReplicationDecision
from ..observe.cover_watch import CoverView
from .cordoning import CordonView
from .last_resort import LastResort


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
    watch_passes: int = 0       # passes the local watch started before their time
    moves_cancelled: int = 0    # moves onto a dir of this broker the disk guard could not hold (local_guard.py)
    last_resort_episodes: int = 0  # times the hard limit's 1 B/s producer quota went in force (last_resort.py)


@dataclass(frozen=True)
class ReplicationView:
    """The replication side of a snapshot: this sidecar's broker, what its last pass read and decided."""
    broker_id: int
    capacity: int | None
    observation: ReplicationObservation | None
    decision: ReplicationDecision | None


@dataclass(frozen=True)
class LocalWatchView:
    """The local watch in a snapshot: the dirs it samples, those it cannot, those near the limit now, and whether
    its thread runs (the local verdict needs it: /readyz)."""
    watched: tuple[str, ...]
    not_watched: Mapping[str, str]  # dir -> why
    near_the_limit: tuple[str, ...]
    running: bool = False


@dataclass(frozen=True)
class Snapshot:
    """The sidecar's state at the end of a pass: what status, metrics and /healthz show."""
    config: SidecarConfig
    factor: FactorState
    decision: Decision | None
    counters: Counters
    quotas_in_force: Mapping[Entity, Mapping[str, float]]
    replication: ReplicationView | None = None
    local_watch: LocalWatchView | None = None
    cordons: CordonView | None = None  # with this sidecar's broker known
    tenants: TenantCount = TenantCount(0, 0)  # entities with a producer rate of their own, throttled
    cancelled_moves: tuple[Mapping, ...] = ()  # the moves onto this broker its sidecar cancelled (records.py)
    last_aggregation: Mapping | None = None  # the aggregator's last decision for this agent (pipeline/messages.py)
    cover: CoverView | None = None  # when this agent beats (cover.after)
    refused: tuple[Refusal, ...] = ()  # the permissions Kafka's authorizer refused lately (refusals.py)
    last_resort: LastResort | None = None  # the hard limit's 1 B/s producer quota, while in force
