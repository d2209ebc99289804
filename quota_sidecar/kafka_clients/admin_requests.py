"""The protocol requests ClusterAdmin sends, built from the sidecar's own types, and what it reads of answers.

Pure functions, no I/O: the admin calls (log_dirs.py, client_quotas.py, configs.py, topics.py) send these through
kafka-python's connection manager (admin_connection.py), because its high-level methods leave out what we need
(user-only quota entities, DescribeLogDirs with an empty topic list) or hide per-entry error codes.
"""

from __future__ import annotations

import kafka.errors as Errors
from kafka.admin import AlterConfigOp, ConfigResourceType, ConfigSourceType
from kafka.protocol.admin import (
    CreateTopicsRequest,
    AlterClientQuotasRequest,
    DeleteTopicsRequest,
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)

from ..common.observation import Entity

_RESOURCE_TYPES = {"topic": ConfigResourceType.TOPIC.value, "broker": ConfigResourceType.BROKER.value}
# The source of a value set on the resource itself (for broker "": the dynamic default of all brokers).
_OWN_SOURCES = {
    ("topic", False): ConfigSourceType.DYNAMIC_TOPIC_CONFIG,
    ("broker", False): ConfigSourceType.DYNAMIC_BROKER_CONFIG,
    ("broker", True): ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG,
}


def not_controller(response) -> bool:
    """The answer of a ZooKeeper-mode broker that is not the controller."""
    codes = [getattr(response, "error_code", 0)] + [topic.error_code for topic in getattr(response, "topics", ())
                                                    if hasattr(topic, "error_code")]
    return Errors.NotControllerError.errno in codes


# -------------------------------------------------------------- client quotas

def _components(entity: Entity) -> list[tuple[str, str | None]]:
    """(entity type, name) pairs; name None is the type's default entity."""
    if isinstance(entity, tuple):
        user, client_id = entity
        return [("user", user), ("client-id", client_id)]
    return [("user", entity)]


def describe_all_quotas_request() -> DescribeClientQuotasRequest:
    """Every entity with a quota: no component to match, not strict. One round trip however many tenants."""
    return DescribeClientQuotasRequest(components=[], strict=False)


def user_entity(components) -> Entity:
    """The Entity of a DescribeClientQuotas entry with a user in it (see has_user)."""
    named = {component.entity_type: component.entity_name for component in components}
    return named["user"] if set(named) == {"user"} else (named["user"], named["client-id"])


def has_user(components) -> bool:
    """A user, or a user and a client id. Not a client id alone, nor an IP: while a user entity holds a key,
    those never apply to a user's client for that key."""
    return {component.entity_type for component in components} in ({"user"}, {"user", "client-id"})


def alter_quotas_request(changes: dict[Entity, dict[str, float | None]]) -> AlterClientQuotasRequest:
    """Set (a number) or remove (None) quota keys; one entry per entity: the broker refuses a request that
    names an entity twice."""
    entry = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest(entries=[
        entry(entity=[entry.EntityData(entity_type=kind, entity_name=name) for kind, name in _components(user)],
              ops=[entry.OpData(key=key, value=0.0 if value is None else value, remove=value is None)
                   for key, value in keys.items()])
        for user, keys in changes.items()])


# -------------------------------------------------------------- configs

def check_resource_type(resource_type: str) -> None:
    if resource_type not in _RESOURCE_TYPES:
        raise ValueError(f"resource_type {resource_type!r}: expected 'topic' or 'broker'")


def is_own_source(entry, resource_type: str, name: str) -> bool:
    """Whether a DescribeConfigs entry was set on the resource itself (not a default, not static)."""
    return entry.config_source == _OWN_SOURCES[(resource_type, name == "")]


def describe_configs_request(resource_type: str, name: str, keys: list[str] | None,
                             synonyms: bool) -> DescribeConfigsRequest:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(include_synonyms=synonyms, resources=[resource(
        resource_type=_RESOURCE_TYPES[resource_type], resource_name=name, configuration_keys=keys)])


def alterable_config(key: str, op: str, value: str | None):
    op_code = AlterConfigOp.value_for(op)  # ValueError for an unknown op
    return IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
        name=key, config_operation=op_code, value=None if op_code == AlterConfigOp.DELETE else value)


def incremental_alter_configs_request(resource_type: str, name: str, configs: list) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=_RESOURCE_TYPES[resource_type], resource_name=name, configs=configs)])


def config_node(resource_type: str, name: str) -> int | None:
    """Broker configs go to that broker (as the Java client does); the rest to any broker."""
    return int(name) if resource_type == "broker" and name != "" else None


# -------------------------------------------------------------- replicas in log dirs

def describe_replicas_request(partitions: dict[str, list[int]] | None) -> DescribeLogDirsRequest:
    """DescribeLogDirs of the given partitions ({topic: [partition]}), or of every partition of the broker (None)."""
    topic = DescribeLogDirsRequest.DescribableLogDirTopic
    return DescribeLogDirsRequest(topics=None if partitions is None else
                                  [topic(topic=name, partitions=indexes) for name, indexes in partitions.items()])


def replicas_in(response) -> list[tuple[str, int, str, int, bool]]:
    """(topic, partition, log dir, bytes, whether it is the future copy of a move between the broker's dirs)."""
    return [(topic.name, partition.partition_index, result.log_dir, partition.partition_size, partition.is_future_key)
            for result in response.results for topic in result.topics for partition in topic.partitions]


def alter_replica_log_dirs_request(dirs: dict[tuple[str, int], str]) -> AlterReplicaLogDirsRequest:
    """Each (topic, partition) replica of the broker into the given log dir of it."""
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), log_dir in dirs.items():
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(partition)
    entry = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    return AlterReplicaLogDirsRequest(dirs=[
        entry(path=path, topics=[entry.AlterReplicaLogDirTopic(name=name, partitions=indexes)
                                 for name, indexes in topics.items()]) for path, topics in by_dir.items()])


# -------------------------------------------------------------- topics and reassignments

def create_topic_request(name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                         timeout_ms: int) -> CreateTopicsRequest:
    topic = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=False, topics=[topic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=[topic.CreatableTopicConfig(name=key, value=value) for key, value in configs.items()])])


def delete_topic_request(name: str, timeout_ms: int) -> DeleteTopicsRequest:
    """Delete one topic by name (named in both of the request's shapes: before and after topic ids, version 6)."""
    return DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], topic_names=[name],
                               timeout_ms=timeout_ms)


def alter_reassignments_request(targets: dict[tuple[str, int], list[int] | None],
                                timeout_ms: int) -> AlterPartitionReassignmentsRequest:
    """Move each (topic, partition) to the given replicas, or cancel its move (None)."""
    topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list] = {}
    for (name, partition), replicas in targets.items():
        by_topic.setdefault(name, []).append(topic.ReassignablePartition(partition_index=partition, replicas=replicas))
    return AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms, topics=[topic(name=name, partitions=parts) for name, parts in by_topic.items()])
