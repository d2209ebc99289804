"""The client quotas wanted for a throttle factor, and the writes that get the cluster there.

Kafka's dynamic quotas give each principal its own budget: the default-user entity's producer_byte_rate
is a per-principal limit, not one budget shared by all clients of a broker as with a broker plugin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from .config import QuotaConfig

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)
# Kafka's own "no limit" (Long.MAX_VALUE): excluded principals get it so the default never reaches them.
UNLIMITED = float(2**63 - 1)

Entity = str | None  # a user name; None is the default-user entity
Quotas = Mapping[str, float]


@dataclass(frozen=True)
class ClientQuotas:
    """What the sidecar wants in force. A key mapped to None means "no quota from the sidecar"."""
    default_user: Mapping[str, float | None]
    excluded_users: tuple[str, ...]
    excluded_keys: tuple[str, ...] = (PRODUCE,)  # the keys that could ever limit the default user

    def entities(self) -> dict[Entity, dict[str, float | None]]:
        excluded = {key: UNLIMITED for key in self.excluded_keys}
        return {None: dict(self.default_user), **{user: dict(excluded) for user in self.excluded_users}}

    def to_json(self) -> dict:
        return {"default_user": {key: _json_rate(value) for key, value in self.default_user.items()},
                "excluded_users": list(self.excluded_users)}


def wanted(config: QuotaConfig, factor: float) -> ClientQuotas:
    """producer = max(1, floor(produce x factor)); without `produce`, unlimited above 0 and 1 at factor 0."""
    if config.produce is not None:
        producer = float(max(1, math.floor(config.produce * factor)))
    else:
        producer = None if factor > 0 else 1.0
    return ClientQuotas(
        default_user={PRODUCE: producer, FETCH: config.fetch, REQUEST: config.request},
        excluded_users=config.excluded_principals,
        excluded_keys=(PRODUCE,) + ((FETCH,) if config.fetch else ()) + ((REQUEST,) if config.request else ()),
    )


@dataclass(frozen=True)
class Write:
    entity: Entity
    key: str
    old: float | None
    new: float | None          # None removes the key
    replaced: float | None     # what was there before the sidecar first wrote this key
    forget: bool = False       # the key is back to what the sidecar found: drop the record


def plan(wanted_quotas: ClientQuotas, in_force: Mapping[Entity, Quotas],
         records: Mapping[tuple[Entity, str], float | None]) -> list[Write]:
    """The writes that turn `in_force` into `wanted_quotas`, and nothing else.

    `records` maps each (entity, key) the sidecars wrote to the value it replaced. A key the sidecar does
    not want (None) is only touched when a record says the sidecar set it: it goes back to what was there.
    """
    writes = []
    for entity, keys in wanted_quotas.entities().items():
        for key, new in keys.items():
            old = in_force.get(entity, {}).get(key)
            owned = (entity, key) in records
            if new is not None and not _same(old, new):
                writes.append(Write(entity, key, old, new, records.get((entity, key), old)))
            elif new is None and owned:
                original = records[(entity, key)]
                writes.append(Write(entity, key, old, original, original, forget=True))
    return writes


def restore(in_force: Mapping[Entity, Quotas], records: Mapping[tuple[Entity, str], float | None]) -> list[Write]:
    """Clean-up: every key the sidecars set goes back to the value it replaced."""
    return [Write(entity, key, in_force.get(entity, {}).get(key), original, original, forget=True)
            for (entity, key), original in sorted(records.items(), key=lambda item: (item[0][0] or "", item[0][1]))]


def entity_label(entity: Entity) -> str:
    return "<default user>" if entity is None else f"User:{entity}"


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)


def _json_rate(value: float | None) -> int | float | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value
