"""Which permission a refusal of Kafka's authorizer means, and what stops without it. No I/O.

A refused request (errors.AuthorizationRefused) names the Kafka APIs it sent and the kind of resource refused
(CLUSTER, or TOPIC with its topics when the client says them). The Needs of acls.py for the process say which
operation on which resource the authorizer checks for those APIs, and every feature that needs the same
permission: one line says all of it, e.g. "ALTER_CONFIGS on CLUSTER refused for User:quota-sidecar
(AlterClientQuotas for user <default>): disk protection: no quota is written: disk protection cannot throttle
producers; ...". A permission the table grants through another that implies it (DESCRIBE_CONFIGS through
ALTER_CONFIGS) names that one: the operator grants what the table says.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..common.errors import AuthorizationRefused
from ..configuration.config import SidecarConfig
from . import acls

# The Kafka APIs the agent's clients send that Kafka's authorizer checks, as acls.Need.api names them.
KAFKA_APIS = ("DescribeLogDirs", "DescribeClientQuotas", "AlterClientQuotas", "DescribeConfigs",
              "IncrementalAlterConfigs", "CreateTopics", "Metadata", "ListOffsets", "Produce", "Fetch",
              "ListPartitionReassignments", "AlterPartitionReassignments", "AlterReplicaLogDirs", "DeleteTopics")


def apis_of(need: acls.Need) -> tuple[str, ...]:
    return tuple(api for api in KAFKA_APIS if re.search(rf"\b{api}\b", need.api))


class RefusalLines:
    """Explains the refusals of a process that runs `processes` (acls.PROCESSES) with `config`."""

    def __init__(self, config: SidecarConfig, processes: Iterable[str]):
        self.needs = acls.needed(config, processes)
        self.table = acls.acls(self.needs)
        name = config.quotas.sidecar_principal
        self.principal = f"User:{name}" if name else "this process's principal"

    def explain(self, refused: AuthorizationRefused) -> tuple[str, str]:
        """(the permission, as `quota-sidecar acls` grants it; the one line)."""
        checked = [need for need in self.needs if set(apis_of(need)) & set(refused.apis)
                   and need.resource.kind == refused.resource_kind
                   and (not refused.topics or any(need.resource.covers(acls.Resource(acls.TOPIC, topic))
                                                  for topic in refused.topics))]
        named = [need for need in checked if need.resource.name in refused.topics]
        checked = named or checked  # a request on a topic of the sidecars' own is not one on every topic's
        if not checked:  # a request acls.py does not list: its table is wrong, and says so
            permission = f"{refused.resource_kind} {', '.join(sorted(refused.topics))}".strip()
            return permission, (f"{permission} refused for {self.principal} ({refused}): a request `quota-sidecar "
                                f"acls` does not list: please report it")
        operations = tuple(dict.fromkeys(need.operation for need in checked))
        resources = tuple(dict.fromkeys(need.resource for need in checked))
        permission = f"{' or '.join(operations)} on {' or '.join(map(str, resources))}"
        # The table's ACLs that grant it are not granted (an ACL implying it would allow it): all they serve stops.
        granting = [acl for acl in self.table if any(need in acl.needs for need in checked)]
        granted_with = (f", which `quota-sidecar acls` grants with {granting[0].operation} on {granting[0].resource}"
                        if len(granting) == 1 and granting[0].operation not in operations else "")
        stops = dict.fromkeys(f"{need.feature}: {need.without}" for acl in granting for need in acl.needs)
        return permission, f"{permission} refused for {self.principal} ({refused}){granted_with}: {'; '.join(stops)}"
