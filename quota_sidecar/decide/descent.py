"""What is written on the way down: producer quotas lowered in steps that every client comes back from.

Kafka throttles a client that went over its bandwidth quota for (observed - quota) / quota x window, bounded by
nothing, and neither the broker's mute nor the Java client's wait is shortened when the quota is lifted
(docs/research/throttle-recovery.md). So a quota is never lowered more than `ratio` times below the rate its
clients can have now (the quota in force, or the fastest broker's fill when that is lower), nor sooner than
`step` after the sidecars last lowered it: each throttle stays under (ratio - 1) x the window. And while the disk
leaves time for it, the descent goes no lower than the floor, where one request of max.request.size waits at most
30 s.

At the hard limit (a factor of 0) the disk comes first: 1 B/s at once, as proposal 047 says, and clients whose
throttle then runs for days come back only when restarted (the last resort, said in a WARNING).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from ..common.observation import Entity, Volume
from ..configuration.settings import QuotaConfig
from .quotas import PRODUCE, ClientQuotas

LAST_RESORT = 1.0  # the hard limit's producer quota, bytes/s
# Kafka measures a client's rate over quota.window.num (11) samples of quota.window.size.seconds (1 s), as if over
# 10 s at least: a broker's growth over as long bounds what any client sent it in Kafka's eyes.
QUOTA_WINDOW_SECONDS = 10.0
_DEFAULT: Entity = None  # the default user


@dataclass(frozen=True)
class Written:
    """A producer quota in force, and when the sidecars lowered it to that (epoch seconds; None: they did not, or
    raised it: the next step need not wait)."""
    rate: float | None  # None: no quota
    at: float | None = None


def descend(goal: ClientQuotas, factor: float, descending: bool, fill: float | None,
            in_force: Mapping[Entity, Written], own: Mapping[Entity, float | None], now: float,
            config: QuotaConfig, hold: bool = False) -> ClientQuotas:
    """The quotas to write on the way to `goal` (proposal 047's): each producer rate of the default user and of
    the tenants stepped from what is in force. `descending`: a volume fills within the descent's start or
    horizon (the volume rule's verdict), so every producer quota heads for the floor (or the goal, when lower: the
    soft zone's `produce` x factor and the fallback go where proposal 047 says, in steps). `fill`: the fastest
    broker's fill in bytes/s (fill_bound), an upper bound of any client's rate on any broker. `own`: each entity's
    producer rate without a throttle (None: unlimited). `hold`: no step down now (a poll that could not decide)."""
    if factor <= 0.0:
        return goal

    def step(entity: Entity, wanted: float | None) -> float | None:
        floor = _lower(config.floor, own.get(entity))
        target = _lower(wanted, floor) if descending else wanted
        current = in_force.get(entity, Written(own.get(entity)))
        if _at_least(target, current.rate):
            return None if target is not None and target == own.get(entity) and entity != _DEFAULT else target
        if hold or (current.at is not None and now - current.at < config.descent_step.total_seconds()):
            return current.rate  # the last step's throttle and a window are not over yet
        bound = _lower(current.rate, fill if fill and fill > 0 else None)
        if bound is None:
            return target
        return max(target, float(math.ceil(bound / config.descent_ratio)))

    # A tenant the goal hands back (its own rate) is handed back, whatever is in force now.
    tenants = {tenant: None if wanted is None and not descending else
               step(tenant, wanted if wanted is not None else own.get(tenant))
               for tenant, wanted in goal.tenants.items()}
    default_user = {**goal.default_user, PRODUCE: step(_DEFAULT, goal.default_user.get(PRODUCE))}
    return replace(goal, default_user=default_user, tenants=tenants)


def in_force(quotas_in_force: Mapping[Entity, Mapping[str, float]], owned: Mapping) -> dict[Entity, Written]:
    """Every entity's producer quota in force (the default user's too: None when it has none), with when the sidecars
    lowered it to that, if it is still their value (`owned`: records.owned of the quotas)."""
    result = {}
    for entity, keys in {_DEFAULT: {}, **quotas_in_force}.items():
        rate = keys.get(PRODUCE)
        mine = owned.get((entity, PRODUCE))
        lowered = mine is not None and mine.written_known and mine.written == rate and mine.before_known \
            and lower(rate, mine.before)
        result[entity] = Written(rate, mine.seen_at if lowered else None)
    return result


def under_way(written: ClientQuotas, goal: ClientQuotas) -> bool:
    """Whether a producer quota written is not yet the goal's: the next step comes after `descent_step`."""
    return written.default_user.get(PRODUCE) != goal.default_user.get(PRODUCE) or written.tenants != goal.tenants


def fastest_fill(judged: list[Mapping]) -> float | None:
    """The fastest broker's fill rate (its filling volumes together), bytes/s; None when none fills."""
    per_broker: dict[int, float] = {}
    for row in judged:
        rate = row.get("fill_bytes_per_sec")
        if rate is not None and rate > 0:
            per_broker[row["broker_id"]] = per_broker.get(row["broker_id"], 0.0) + rate
    return max(per_broker.values(), default=None)


def fastest_growth(history: Mapping[tuple[int, str], tuple[Volume, ...]]) -> float | None:
    """The fastest broker's growth (its volumes together) from each volume's newest measurement at least
    QUOTA_WINDOW_SECONDS before its newest to the newest, bytes/s; None when none grew."""
    per_broker: dict[int, float] = {}
    for (broker, _), volumes in history.items():
        newest = volumes[-1]
        older = [volume for volume in volumes
                 if (newest.observed_at - volume.observed_at).total_seconds() >= QUOTA_WINDOW_SECONDS]
        if older:
            grown = older[-1].available_bytes - newest.available_bytes
            seconds = (newest.observed_at - older[-1].observed_at).total_seconds()
            per_broker[broker] = per_broker.get(broker, 0.0) + max(0.0, grown / seconds)
    return max((rate for rate in per_broker.values() if rate > 0), default=None)


def fill_bound(judged: list[Mapping], history: Mapping[tuple[int, str], tuple[Volume, ...]]) -> float | None:
    """The faster of the fastest broker's fill rate and its growth over Kafka's quota window: the fill rate is a
    slope over storage.fill.window, which shows a flood that began seconds ago as a part of its rate, and a step
    from that would throttle its clients for minutes."""
    return max((rate for rate in (fastest_fill(judged), fastest_growth(history)) if rate is not None), default=None)


def lower(a: float | None, b: float | None) -> bool:
    """a < b, None being unlimited."""
    return a is not None and (b is None or a < b)


def _lower(a: float | None, b: float | None) -> float | None:
    """The lower of two rates, None being unlimited."""
    return b if a is None else a if b is None else min(a, b)


def _at_least(a: float | None, b: float | None) -> bool:
    """a >= b, None being unlimited."""
    return a is None or (b is not None and a >= b)
