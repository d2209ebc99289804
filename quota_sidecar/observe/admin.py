"""The cluster admin: live brokers, log-dir sizes, client quotas, configs, topics, reassignments.

With cluster_store.py and pipeline/transport.py (records, observations and decisions, through producers and
consumers) and kafka_client.py (how clients are opened and their errors typed), the agent's only Kafka I/O.
Every failure leaves as a typed AdminError (kafka_client.admin_error): retryable or permanent. Built on
kafka-python's admin client; most calls send the protocol requests (admin_requests.py) through its connection
manager.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Mapping

import kafka.errors as Errors
import tenacity
from kafka import KafkaAdminClient
from kafka.admin import ConfigSourceType
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest, ListPartitionReassignmentsRequest
from kafka.protocol.metadata import MetadataRequest

from ..common import deadline
from ..common.errors import AdminError, RetryableAdminError
from ..common.observation import Entity, Partition, Reassignment, Volume
from . import admin_requests as requests
from .kafka_client import admin_error, attempt, error_for_code, error_name, open_client, raise_any, wait_for, with_cause

log = logging.getLogger(__name__)

_CONTROLLER = object()  # _send's node_id for the controller
# Each entity is a record the controller appends to the metadata log; thousands of tenants throttled at once go
# in requests of a bounded size, each answered within the request timeout.
QUOTA_ENTITIES_PER_REQUEST = 1000
# Any broker answers well within this; one cut off would hold a quota write for the whole request timeout while a
# flood fills a disk.
ANY_BROKER_TIMEOUT_MS = 2000


class ClusterAdmin:
    """Talks to one Kafka cluster. Connects on first use, so a sidecar starts while Kafka is down.

    Each call retries retryable failures for up to `retry_deadline` seconds (backoff with jitter) and never
    past the pass's deadline (deadline.py), bootstrap included; then it raises the last failure (PassTimeout
    when a request had no answer yet). The sidecar loop treats a failed call as a failed poll.
    """

    def __init__(self, client_config: Mapping[str, object], retry_deadline: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep):
        self._client_config = dict(client_config)
        self._client: KafkaAdminClient | None = None
        self._connecting = threading.Lock()  # the loop and the HTTP thread may both make the first call
        self._controller_moved = False  # a broker answered NOT_CONTROLLER: ask the metadata again
        self._said_without_sizes: set[int] = set()  # brokers whose DescribeLogDirs has no sizes, logged once
        self._cluster_id: str | None = None
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_delay(retry_deadline) | (lambda _: deadline.expired()),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=1.0),  # backoff with full jitter
            retry=tenacity.retry_if_exception_type(RetryableAdminError),  # PassTimeout is not one
            sleep=lambda seconds: sleep(deadline.capped(seconds)),
            reraise=True,
        )

    def __repr__(self) -> str:  # never the whole configuration: it holds passwords
        return (f"ClusterAdmin(bootstrap_servers={self._client_config.get('bootstrap_servers')!r}, "
                f"security_protocol={self._client_config.get('security_protocol', 'PLAINTEXT')!r})")

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -------------------------------------------------------------- brokers and volumes

    def live_broker_ids(self) -> list[int]:
        """The brokers registered and not fenced, sorted."""
        return self._call("DescribeCluster", self._live_broker_ids)

    def cluster_id(self) -> str:
        """The cluster's id (KIP-78), as DescribeCluster names it; asked once."""
        if self._cluster_id is None:
            self.live_broker_ids()
        return self._cluster_id

    async def _live_broker_ids(self) -> list[int]:
        response = await self._send(DescribeClusterRequest(include_fenced_brokers=False), "DescribeCluster")
        raise_any([error_for_code(response.error_code, response.error_message, "DescribeCluster")])
        self._cluster_id = response.cluster_id
        return sorted(broker.broker_id for broker in response.brokers if not broker.is_fenced)

    def describe_volumes(self, broker_ids: Iterable[int], now: datetime) -> list[Volume]:
        """Every log dir of every given broker with its sizes (KIP-827), observed at `now`.

        An offline dir comes back with its error name, a dir without sizes with -1. Raises
        RetryableAdminError unless every broker answered: a poll only counts when all were seen.
        """
        return self._call("DescribeLogDirs", self._describe_volumes, list(broker_ids), now)

    async def _describe_volumes(self, broker_ids: list[int], now: datetime) -> list[Volume]:
        # Sent to all brokers at once, so brokers that hang cost one request timeout, not one each.
        calls = {broker: self._manager.call_soon(self._log_dirs(broker)) for broker in broker_ids}
        volumes, errors = [], []
        for broker, call in calls.items():
            what = f"DescribeLogDirs to broker {broker}"
            try:
                response = await call
            except AdminError as error:  # every broker is awaited: the message names all that failed
                errors.append(error)
                continue
            errors.append(error_for_code(response.error_code, None, what))
            volumes += [Volume(broker, result.log_dir, result.total_bytes, result.usable_bytes, now,
                               error_name(result.error_code)) for result in response.results]
        raise_any(errors)
        return volumes

    async def _log_dirs(self, broker: int):
        # topics=[] (not null): only the dirs and their sizes, no partitions. Sizes need v4+ (KIP-827, Kafka 3.3).
        what = f"DescribeLogDirs to broker {broker}"
        try:
            return await self._send(DescribeLogDirsRequest(topics=[], min_version=4), what, node_id=broker,
                                    passing=(Errors.IncompatibleBrokerVersion,))
        except Errors.IncompatibleBrokerVersion:  # the broker's ApiVersions stop below v4
            if broker not in self._said_without_sizes:
                self._said_without_sizes.add(broker)
                log.warning("Broker %d answers DescribeLogDirs below v4 (before KIP-827): its log dirs come without "
                            "sizes, so its volumes are judged from the sidecars' znodes when zookeeper.connect is "
                            "set, else shown as unusable and not judged", broker)
            return await self._send(DescribeLogDirsRequest(topics=[]), what, node_id=broker)

    def describe_replica_sizes(self, broker_id: int,
                               partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], int]:
        """Bytes of the given partitions' replicas on one broker; a partition it does not hold is absent.

        A replica being moved between the broker's own dirs counts once (its current copy).
        """
        return {partition: size for partition, (_, size) in self.describe_replicas(broker_id, partitions).items()}

    def describe_replicas(self, broker_id: int,
                          partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], tuple[str, int]]:
        """(log dir, bytes) of the given partitions' replicas on one broker (their current copy); a partition
        it does not hold is absent."""
        found = self._call(f"DescribeLogDirs to broker {broker_id}", self._replicas, broker_id,
                           {topic: list(indexes) for topic, indexes in partitions.items()})
        return {(topic, partition): (log_dir, size) for topic, partition, log_dir, size, future in found if not future}

    def describe_dir_moves(self, broker_id: int) -> dict[tuple[str, int], tuple[str, str]]:
        """The replicas of one broker being moved between its own log dirs (AlterReplicaLogDirs, JBOD): (topic,
        partition) -> (the dir it is copied into, the dir it is in). One DescribeLogDirs of all its partitions."""
        found = self._call(f"DescribeLogDirs to broker {broker_id}", self._replicas, broker_id, None)
        current = {(topic, partition): log_dir for topic, partition, log_dir, _, future in found if not future}
        return {(topic, partition): (log_dir, current[(topic, partition)])
                for topic, partition, log_dir, _, future in found if future and (topic, partition) in current}

    async def _replicas(self, broker_id: int, partitions: dict[str, list[int]] | None) -> list:
        what = f"DescribeLogDirs to broker {broker_id}"
        response = await self._send(requests.describe_replicas_request(partitions), what, node_id=broker_id)
        raise_any([error_for_code(response.error_code, None, what)])
        return requests.replicas_in(response)

    def alter_replica_log_dirs(self, broker_id: int, dirs: Mapping[tuple[str, int], str]) -> None:
        """Move each (topic, partition) replica of one broker into the given dir of it. Naming the dir a replica is
        in cancels its move between dirs (the broker drops the copy), as kafka-reassign-partitions --cancel does."""
        if dirs:
            self._call(f"AlterReplicaLogDirs to broker {broker_id}", self._alter_replica_log_dirs, broker_id,
                       dict(dirs))

    async def _alter_replica_log_dirs(self, broker_id: int, dirs: dict[tuple[str, int], str]) -> None:
        what = f"AlterReplicaLogDirs to broker {broker_id}"
        response = await self._send(requests.alter_replica_log_dirs_request(dirs), what, node_id=broker_id)
        raise_any(error_for_code(partition.error_code, None, f"{what} of {topic.topic_name}-{partition.partition_index}")
                  for topic in response.results for partition in topic.partitions)

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

    # -------------------------------------------------------------- client quotas

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

    # -------------------------------------------------------------- configs

    def describe_configs(self, resource_type: str, names: Iterable[str | int],
                         keys: Iterable[str] | None = None) -> dict[str, dict[str, str | None]]:
        """The values set dynamically on each resource itself (no defaults, no static broker config).

        resource_type is 'topic' or 'broker' (name: broker id, or "" for the default of all brokers).
        keys limits the answer to those keys; None means every key. Raises ValueError for another type.
        """
        requests.check_resource_type(resource_type)
        return self._call(f"DescribeConfigs of {resource_type}s", self._describe_configs,
                          resource_type, [str(name) for name in names], None if keys is None else list(keys))

    async def _describe_configs(self, resource_type: str, names: list[str], keys: list[str] | None) -> dict:
        return {name: {entry.name: entry.value for entry in await self._config_entries(resource_type, name, keys)
                       if requests.is_own_source(entry, resource_type, name)} for name in names}

    def describe_config_layers(self, broker_id: int, keys: Iterable[str]) -> dict[str, dict[str, str | None]]:
        """key -> {source: value} of one broker, each layer it reports (DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG,
        DEFAULT_CONFIG...); a key the broker does not know is absent."""
        return self._call(f"DescribeConfigs of broker {broker_id}", self._config_layers, str(broker_id), list(keys))

    async def _config_layers(self, name: str, keys: list[str]) -> dict[str, dict[str, str | None]]:
        return {entry.name: {ConfigSourceType(synonym.source).name: synonym.value for synonym in entry.synonyms}
                for entry in await self._config_entries("broker", name, keys, synonyms=True)}

    async def _config_entries(self, resource_type: str, name: str, keys: list[str] | None, synonyms: bool = False):
        what = f"DescribeConfigs of {resource_type} {name!r}"
        request = requests.describe_configs_request(resource_type, name, keys, synonyms)
        result = (await self._send(request, what, node_id=requests.config_node(resource_type, name))).results[0]
        raise_any([error_for_code(result.error_code, result.error_message, what)])
        return result.configs

    def incremental_alter_configs(self, resource_type: str, name: str | int,
                                  ops: Mapping[str, tuple[str, str | None]]) -> None:
        """Change keys of one resource: {key: (op, value)}, op one of SET, DELETE, APPEND, SUBTRACT.

        APPEND and SUBTRACT add or remove list items (such as "0:1" in leader.replication.throttled.replicas)
        and keep the items others put there; DELETE ignores the value. Raises ValueError for another
        resource type or op.
        """
        requests.check_resource_type(resource_type)
        configs = [requests.alterable_config(key, op, value) for key, (op, value) in ops.items()]
        if configs:
            self._call(f"IncrementalAlterConfigs of {resource_type} {str(name)!r}", self._incremental_alter_configs,
                       resource_type, str(name), configs)

    async def _incremental_alter_configs(self, resource_type: str, name: str, configs: list) -> None:
        what = f"IncrementalAlterConfigs of {resource_type} {name!r}"
        request = requests.incremental_alter_configs_request(resource_type, name, configs)
        response = await self._send(request, what, node_id=requests.config_node(resource_type, name))
        raise_any(error_for_code(result.error_code, result.error_message, what) for result in response.responses)

    # -------------------------------------------------------------- topics

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> bool:
        """Create a topic; False when it already exists (its settings are then left as they are)."""
        return self._call(f"CreateTopics of {name!r}", self._create_topic, name, partitions, replication_factor,
                          dict(configs or {}))

    async def _create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict) -> bool:
        request = requests.create_topic_request(name, partitions, replication_factor, configs, self._timeout_ms)
        result = (await self._send(request, f"CreateTopics of {name!r}", node_id=_CONTROLLER)).topics[0]
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
                                   node_id=_CONTROLLER)).responses[0]
        if Errors.for_code(result.error_code) is Errors.UnknownTopicOrPartitionError:
            return False
        raise_any([error_for_code(result.error_code, getattr(result, "error_message", None), what)])
        return True

    # -------------------------------------------------------------- reassignments

    def list_reassignments(self) -> list[Reassignment]:
        """Every partition reassignment in progress, sorted by topic and partition."""
        return self._call("ListPartitionReassignments", self._list_reassignments)

    async def _list_reassignments(self) -> list[Reassignment]:
        request = ListPartitionReassignmentsRequest(topics=None, timeout_ms=self._timeout_ms)
        response = await self._send(request, "ListPartitionReassignments", node_id=_CONTROLLER)
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
        response = await self._send(request, "AlterPartitionReassignments", node_id=_CONTROLLER)
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

    # -------------------------------------------------------------- plumbing

    async def _controller_id(self) -> int | None:
        if self._manager.cluster.controller is None or self._controller_moved:
            await self._manager.cluster.refresh_metadata()
            self._controller_moved = False
        controller = self._manager.cluster.controller
        return None if controller is None else controller.node_id

    @property
    def _manager(self):
        return self._client._manager

    @property
    def _timeout_ms(self) -> int:
        return self._client.config["request_timeout_ms"]

    def _call(self, what: str, coroutine, *args):
        """Run `coroutine` on the client's IO thread, retrying retryable failures until the deadline."""
        failures: list[AdminError] = []  # when the deadline runs out, the last of them is the reason given
        try:
            return self._retrying(attempt, lambda: wait_for(self._connected()._manager.call_soon(coroutine, *args),
                                                            what), what, failures)
        except AdminError as error:
            raise with_cause(error, self._client_config) from error

    def _connected(self) -> KafkaAdminClient:
        with self._connecting:
            if self._client is None:
                self._client = open_client(KafkaAdminClient, self._client_config,
                                           deadline.left(doing="connecting to the cluster"))
            return self._client

    async def _send(self, request, what: str, node_id: int | object | None = None, passing: tuple = ()):
        """Send one request (to node_id, else to the least loaded broker, within ANY_BROKER_TIMEOUT_MS); failures
        name `what`, but for the kafka-python errors `passing`, raised as they are.

        node_id _CONTROLLER: to the controller the metadata names, as Kafka's Java admin client sends topic and
        reassignment requests. A KRaft broker forwards them from anywhere; a ZooKeeper-mode broker that is
        not the controller answers NOT_CONTROLLER, and the retry goes where fresh metadata points.
        """
        try:
            to_controller = node_id is _CONTROLLER
            if to_controller:
                node_id = await self._controller_id()
            if node_id is not None and self._manager.cluster.broker_metadata(node_id) is None:
                # A broker that just joined: the connection manager only reaches brokers its metadata knows.
                await self._manager.cluster.refresh_metadata()
            timeout_ms = min(ANY_BROKER_TIMEOUT_MS, self._timeout_ms) if node_id is None else None  # then retried
            response = await self._manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)
            self._controller_moved |= to_controller and requests.not_controller(response)
            return response
        except passing:
            raise
        except (Errors.KafkaError, OSError) as error:
            raise admin_error(error, what) from error
