"""The admin calls on topics and their partitions (Metadata, CreateTopics, DeleteTopics, the partition
reassignments): where each partition's replicas are, topics created and deleted, moves listed, started and
cancelled."""

from __future__ import annotations

from typing import Iterable, Mapping

import kafka.errors as Errors
from kafka.protocol.admin import ListPartitionReassignmentsRequest
from kafka.protocol.metadata import MetadataRequest

from ..common.observation import Partition, Reassignment
from . import admin_requests as requests
from .admin_connection import CONTROLLER, AdminConnection
from .kafka_client import error_for_code, raise_any


class Topics(AdminConnection):
    def describe_partitions(self, topics: Iterable[str] | None) -> dict[tuple[str, int], Partition]:
        """Leader, replicas and in-sync replicas of every partition of the topics (None: of every topic).

        A topic that does not exist is left out, as a partition of it would be gone by the time we act.
        """
        return self._call("Metadata", self._describe_partitions, None if topics is None else sorted(topics))

    async def _describe_partitions(self, topics: list[str] | None) -> dict[tuple[str, int], Partition]:
        if topics == []:
            return {}
        request = MetadataRequest(allow_auto_topic_creation=False, topics=None if topics is None else
                                  [MetadataRequest.MetadataRequestTopic(name=name) for name in topics])
        response = await self._send(request, "Metadata")
        errors, found = [], {}
        for topic in response.topics:
            if Errors.for_code(topic.error_code) is Errors.UnknownTopicOrPartitionError:
                continue
            errors.append(error_for_code(topic.error_code, None, f"Metadata of topic {topic.name!r}"))
            for p in topic.partitions:
                found[(topic.name, p.partition_index)] = Partition(p.leader_id, tuple(p.replica_nodes),
                                                                   tuple(p.isr_nodes))
        raise_any(errors)
        return found

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> bool:
        """Create a topic; False when it already exists (its settings are then left as they are)."""
        return self._call(f"CreateTopics of {name!r}", self._create_topic, name, partitions, replication_factor,
                          dict(configs or {}))

    async def _create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict) -> bool:
        request = requests.create_topic_request(name, partitions, replication_factor, configs, self._timeout_ms)
        result = (await self._send(request, f"CreateTopics of {name!r}", node_id=CONTROLLER)).topics[0]
        if Errors.for_code(result.error_code) is Errors.TopicAlreadyExistsError:
            return False
        raise_any([error_for_code(result.error_code, result.error_message, f"CreateTopics of {name!r}")])
        return True

    def delete_topic(self, name: str) -> bool:
        """Delete a topic; False when there is none of that name."""
        return self._call(f"DeleteTopics of {name!r}", self._delete_topic, name)

    async def _delete_topic(self, name: str) -> bool:
        what = f"DeleteTopics of {name!r}"
        result = (await self._send(requests.delete_topic_request(name, self._timeout_ms), what,
                                   node_id=CONTROLLER)).responses[0]
        if Errors.for_code(result.error_code) is Errors.UnknownTopicOrPartitionError:
            return False
        raise_any([error_for_code(result.error_code, getattr(result, "error_message", None), what)])
        return True

    def list_reassignments(self) -> list[Reassignment]:
        """Every partition reassignment in progress, sorted by topic and partition."""
        return self._call("ListPartitionReassignments", self._list_reassignments)

    async def _list_reassignments(self) -> list[Reassignment]:
        request = ListPartitionReassignmentsRequest(topics=None, timeout_ms=self._timeout_ms)
        response = await self._send(request, "ListPartitionReassignments", node_id=CONTROLLER)
        raise_any([error_for_code(response.error_code, response.error_message, "ListPartitionReassignments")])
        return sorted((Reassignment(topic.name, partition.partition_index, tuple(partition.replicas),
                                    tuple(partition.adding_replicas), tuple(partition.removing_replicas))
                       for topic in response.topics for partition in topic.partitions),
                      key=lambda reassignment: (reassignment.topic, reassignment.partition))

    def alter_reassignments(self, targets: Mapping[tuple[str, int], Iterable[int] | None]) -> None:
        """Start moving each (topic, partition) to the given replicas, or cancel its move (None)."""
        if targets:
            self._call("AlterPartitionReassignments", self._alter_reassignments,
                       {partition: None if replicas is None else list(replicas)
                        for partition, replicas in targets.items()})

    async def _alter_reassignments(self, targets: dict[tuple[str, int], list[int] | None]) -> None:
        request = requests.alter_reassignments_request(targets, self._timeout_ms)
        response = await self._send(request, "AlterPartitionReassignments", node_id=CONTROLLER)
        errors = [error_for_code(response.error_code, response.error_message, "AlterPartitionReassignments")]
        for topic_result in response.responses:
            for result in topic_result.partitions:
                cancelled_already = (Errors.for_code(result.error_code) is Errors.NoReassignmentInProgressError
                                     and targets[(topic_result.name, result.partition_index)] is None)
                if not cancelled_already:
                    errors.append(error_for_code(
                        result.error_code, result.error_message,
                        f"AlterPartitionReassignments of {topic_result.name}-{result.partition_index}"))
        raise_any(errors)
