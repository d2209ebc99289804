"""The client quotas wanted for a throttle factor (ownership.py plans the writes that get the cluster there).

Kafka's dynamic quotas give each principal its own budget: the default-user entity's producer_byte_rate
is a per-principal limit, not one budget shared by all clients of a broker as with a broker plugin.

Kafka applies, per key, the most specific entity that sets it: user + client id, user + default client id,
user, default user + client id, default user + default client id, then the default user. A tenant (any
entity above the default user with a producer rate of its own, as Strimzi's User Operator writes a
KafkaUser's quotas) would never feel the default user's throttle, so a throttle scales each tenant's own
rate by the factor too; the rate it had goes back when the throttle lifts (ownership.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from ..common.observation import UNLIMITED as LONG_MAX, Entity
from ..common.records import Owned
from ..configuration.settings import QuotaConfig
from ..configuration.properties import SIDECAR_CLIENT_ID

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)
# Kafka's "no limit", as a quota (a double) reads back: excluded principals get it, so the default never
# reaches them.
UNLIMITED = float(LONG_MAX)

Quotas = Mapping[str, float]


@dataclass(frozen=True)
class ClientQuotas:
    """What the sidecar wants in force. A key mapped to None means "no quota from the sidecar"."""
    default_user: Mapping[str, float | None]
    excluded_users: tuple[str, ...]
    excluded_keys: tuple[str, ...] = (PRODUCE,)  # the keys that could ever limit the default user
    sidecar: Entity = (None, SIDECAR_CLIENT_ID)  # the sidecar's own clients (QuotaConfig.sidecar_entity)
    sidecar_produce: float = UNLIMITED  # their producer rate: unlimited only under a principal of their own
    tenants: Mapping[Entity, float | None] = field(default_factory=dict)  # producer rate wanted of each tenant

    def entities(self) -> dict[Entity, dict[str, float | None]]:
        """In write order: the sidecar's own clients are exempt before the default user is throttled."""
        excluded = {key: UNLIMITED for key in self.excluded_keys}
        return {self.sidecar: {**excluded, PRODUCE: self.sidecar_produce}, None: dict(self.default_user),
                **{tenant: {PRODUCE: rate} for tenant, rate in self.tenants.items()},
                **{user: dict(excluded) for user in self.excluded_users}}

    def to_json(self) -> dict:
        return {"default_user": {key: _json_rate(value) for key, value in self.default_user.items()},
                "excluded_users": list(self.excluded_users)}


def wanted(config: QuotaConfig, factor: float, tenant_rates: Mapping[Entity, float | None] = {}) -> ClientQuotas:
    """producer = max(1, floor(produce x factor)); without `produce`, unlimited above 0 and 1 at factor 0.
    Below factor 1 each tenant gets max(1, floor(its own rate x factor)); at 1, nothing from the sidecar."""
    if config.produce is not None:
        producer = float(max(1, math.floor(config.produce * factor)))
    else:
        producer = None if factor > 0 else 1.0
    return ClientQuotas(
        default_user={PRODUCE: producer, FETCH: config.fetch, REQUEST: config.request},
        excluded_users=config.excluded_principals,
        excluded_keys=(PRODUCE,) + ((FETCH,) if config.fetch else ()) + ((REQUEST,) if config.request else ()),
        sidecar=config.sidecar_entity,
        # A client id anyone can take: held to what the sidecar writes, so that taking it cannot fill a disk.
        sidecar_produce=UNLIMITED if config.sidecar_principal else float(config.sidecar_produce),
        tenants={tenant: None if factor >= 1 or own is None else float(max(1, math.floor(own * factor)))
                 for tenant, own in tenant_rates.items()},
    )


def tenant_rates(in_force: Mapping[Entity, Quotas], owned: Mapping[tuple[Entity, str], Owned],
                 config: QuotaConfig) -> dict[Entity, float | None]:
    """The producer rate each tenant had before the sidecars throttled it: what is in force, or for an entity the
    sidecars wrote, the value they replaced (None: it had none). Excluded principals and the sidecar's own client
    id are not tenants; every tenant the sidecars wrote stays one until handed back."""
    def tenant(entity: Entity) -> bool:
        user, client_id = entity if isinstance(entity, tuple) else (entity, None)
        return (entity is not None and user not in config.excluded_principals
                and client_id != config.sidecar_client_id)

    rates = {entity: keys[PRODUCE] for entity, keys in in_force.items() if PRODUCE in keys and tenant(entity)}
    rates.update({entity: mine.replaced for (entity, key), mine in owned.items() if key == PRODUCE and tenant(entity)})
    return rates


class TenantCount(NamedTuple):
    with_a_rate_of_their_own: int
    throttled: int  # whose producer rate in force is the one the sidecar wants below factor 1


def tenant_count(wanted_quotas: ClientQuotas, in_force: Mapping[Entity, Quotas]) -> TenantCount:
    throttled = sum(rate is not None and in_force.get(tenant, {}).get(PRODUCE) == rate
                    for tenant, rate in wanted_quotas.tenants.items())
    return TenantCount(len(wanted_quotas.tenants), throttled)


def targets(wanted_quotas: ClientQuotas, in_force: Mapping[Entity, Quotas] = {},
            owned: Mapping[tuple[Entity, str], Owned] = {}) -> dict[tuple[Entity, str], float | None]:
    """(entity, key) -> wanted value, the form ownership.plan works on. An excluded principal with a value of its
    own for a key (one the sidecars did not write) needs no exemption there: the default user never reaches it,
    and its value stays as it is. What the sidecars wrote and no longer want (a principal taken off the excluded
    list, the exemption of a client id once the sidecar has a principal) is wanted as None: handed back; but not
    the exemption of another principal with the sidecars' client id, another agent's (agents may each have their
    own), which its agent keeps and --cleanup hands back."""
    wanted = {(entity, key): value for entity, keys in wanted_quotas.entities().items() for key, value in keys.items()
              if not (entity in wanted_quotas.excluded_users and key in in_force.get(entity, {})
                      and (entity, key) not in owned)}
    _, client_id = wanted_quotas.sidecar

    def another_agents(entity: Entity) -> bool:
        return isinstance(entity, tuple) and entity[0] is not None and entity[1] == client_id

    return {**wanted, **{target: None for target in owned if target not in wanted and not another_agents(target[0])}}


def flatten(in_force: Mapping[Entity, Quotas]) -> dict[tuple[Entity, str], float]:
    return {(entity, key): value for entity, keys in in_force.items() for key, value in keys.items()}


def entity_label(entity: Entity) -> str:
    user, client_id = entity if isinstance(entity, tuple) else (entity, ())
    if entity == (None, SIDECAR_CLIENT_ID):
        return f"client-id {client_id} (sidecar)"
    shown = "<default user>" if user is None else f"User:{user}"
    shown = shown if client_id == () else f"{shown} client-id " + ("<default>" if client_id is None else client_id)
    return shown + (" (sidecar)" if client_id == SIDECAR_CLIENT_ID else "")


def target_label(target: tuple[Entity, str]) -> str:
    entity, key = target
    return f"quota {entity_label(entity)} {key}"


def rate_text(value: float | None) -> str:
    if value is None:
        return "none"
    return "unlimited" if value >= UNLIMITED else f"{value:.0f}"


def after(in_force: Mapping[Entity, Quotas], writes) -> dict[Entity, dict[str, float]]:
    """The quotas in force once `writes` (ownership.Write of (entity, key) targets) are carried out."""
    result = {entity: dict(keys) for entity, keys in in_force.items()}
    for write in writes:
        entity, key = write.target
        keys = result.setdefault(entity, {})
        if write.new is None:
            keys.pop(key, None)
        else:
            keys[key] = write.new
    return result


def _json_rate(value: float | None) -> int | float | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value
