"""`quota-sidecar acls --apply`: the ACLs a principal needs (decide/acls.py), created with an admin's client
properties (kafka-acls' --command-config), each cluster in one CreateAcls of only those missing. Nothing is
removed: the principal's other ACLs are the operator's. kafka-python's admin client does the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import kafka.errors as Errors
from kafka import KafkaAdminClient
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
                         ResourcePatternFilter, ResourceType)

from ..kafka_clients.kafka_client import admin_error, open_client


@dataclass(frozen=True)
class Applied:
    acl: Mapping  # as acls_text.as_json prints it
    created: bool  # False: it was there already
    error: str | None = None  # why creating it failed


def apply(entries: list[Mapping], admin_kwargs: Mapping[str, object], timeout: float = 30.0) -> list[Applied]:
    """Create the ACLs of `entries` (acls_text.as_json) missing on their clusters; AdminError when a cluster cannot
    be read, before anything is created there."""
    applied = []
    for servers in dict.fromkeys(entry["bootstrap_servers"] for entry in entries):
        on_cluster = [entry for entry in entries if entry["bootstrap_servers"] == servers]
        admin = open_client(KafkaAdminClient, {**admin_kwargs, "bootstrap_servers": servers.split(",")}, timeout)
        try:
            applied += _apply(admin, on_cluster)
        except Errors.KafkaError as error:
            raise admin_error(error, f"the ACLs on {servers}") from error
        finally:
            admin.close()
    return applied


def _apply(admin: KafkaAdminClient, entries: list[Mapping]) -> list[Applied]:
    there = set()
    for principal in dict.fromkeys(entry["principal"] for entry in entries):
        found, _ = admin.describe_acls(ACLFilter(principal, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                                 ResourcePatternFilter(ResourceType.ANY, None,
                                                                       ACLResourcePatternType.ANY)))
        there |= {_key(acl) for acl in found}
    acls = [kafka_acl(entry) for entry in entries]
    keys = [_key(acl) for acl in acls]
    missing = list({key: acl for key, acl in zip(keys, acls) if key not in there}.values())
    result = admin.create_acls(missing) if missing else {"succeeded": [], "failed": []}
    created = {_key(acl) for acl in result["succeeded"]}
    # kafka-python gives the failures' errors alone, in the order of the ACLs that failed.
    failed = dict(zip([_key(acl) for acl in missing if _key(acl) not in created], result["failed"]))
    return [Applied(entry, key in created, failed[key].__name__ if key in failed else None)
            for entry, key in zip(entries, keys)]


def kafka_acl(entry: Mapping) -> ACL:
    """An ACL as `quota-sidecar acls --json` prints it, as kafka-python's admin client takes it."""
    return ACL(entry["principal"], entry["host"], ACLOperation[entry["operation"]],
               ACLPermissionType[entry["permission"]],
               ResourcePattern(ResourceType[entry["resource_type"]], entry["resource_name"],
                               ACLResourcePatternType[entry["pattern_type"]]))


def _key(acl: ACL) -> tuple:
    pattern = acl.resource_pattern
    return (acl.principal, acl.host, acl.operation, acl.permission_type, pattern.resource_type,
            pattern.resource_name, pattern.pattern_type)
