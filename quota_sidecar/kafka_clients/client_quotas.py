"""The admin calls on client quotas (DescribeClientQuotas, AlterClientQuotas): the quotas set on users and their
client ids, read all at once, and set or removed in requests of a bounded size."""

from __future__ import annotations

from typing import Iterable, Mapping

from ..common.observation import Entity
from . import admin_requests as requests
from .admin_connection import AdminConnection
from .kafka_client import error_for_code, raise_any

# Each entity is a record the controller appends to the metadata log; thousands of tenants throttled at once go
# in requests of a bounded size, each answered within the request timeout.
QUOTA_ENTITIES_PER_REQUEST = 1000


class ClientQuotas(AdminConnection):
    def describe_user_quotas(self, entities: Iterable[Entity] | None = None) -> dict[Entity, dict[str, float]]:
        """The quotas set on each entity ({} where none are set); None: every entity with a user in it.

        An entity is a user name, None for the default user, or (user, client id) with None for either's
        default (observation.Entity). One DescribeClientQuotas of every entity, however many are asked for.
        """
        found = self._call("DescribeClientQuotas", self._describe_all_quotas)
        return found if entities is None else {entity: found.get(entity, {}) for entity in entities}

    async def _describe_all_quotas(self) -> dict[Entity, dict[str, float]]:
        response = await self._send(requests.describe_all_quotas_request(), "DescribeClientQuotas")
        raise_any([error_for_code(response.error_code, response.error_message, "DescribeClientQuotas")])
        quotas = {}
        for entry in response.entries or ():
            if requests.has_user(entry.entity):
                quotas[requests.user_entity(entry.entity)] = {value.key: value.value for value in entry.values}
        return quotas

    def alter_user_quotas(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """Set (a number) or remove (None) quota keys on entities (see describe_user_quotas), in the order given:
        up to QUOTA_ENTITIES_PER_REQUEST entities a request."""
        entries = [(user, dict(keys)) for user, keys in changes.items() if keys]
        if entries:
            self._call("AlterClientQuotas", self._alter_user_quotas, entries)

    async def _alter_user_quotas(self, entries: list[tuple[Entity, dict[str, float | None]]]) -> None:
        for start in range(0, len(entries), QUOTA_ENTITIES_PER_REQUEST):
            chunk = dict(entries[start:start + QUOTA_ENTITIES_PER_REQUEST])
            response = await self._send(requests.alter_quotas_request(chunk), "AlterClientQuotas")
            raise_any(error_for_code(result.error_code, result.error_message,
                                     "AlterClientQuotas for " + ", ".join(f"{e.entity_type} {e.entity_name!r}"
                                                                          for e in result.entity))
                      for result in response.entries)
