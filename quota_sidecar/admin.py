"""The one place that talks to Kafka: live brokers, log-dir sizes, client quotas, configs, reassignments.

Built on kafka-python's admin client, but most calls send the protocol requests themselves through its
connection manager, because its high-level methods either leave out what we need (DescribeLogDirs
with an empty topic list, user-only quota entities) or hide per-entry error codes.

Every failure leaves as a RetryableAdminError (it may pass: timeouts, brokers down, leaders moving) or
a PermanentAdminError (retrying will not help: authorization, unsupported versions, bad requests).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Mapping

import kafka.errors as Errors
import tenacity
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResourceType, ConfigSourceType
from kafka.net.compat import KafkaNetClient
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from .config import ADMIN_PREFIX, PREFIX, non_negative_int, positive_int, shown
from .errors import AdminError, ConfigError, PermanentAdminError, RetryableAdminError, UnknownTopicError
from .quotas import SIDECAR_CLIENT_ID, Entity
from .throttles import Partition, Reassignment
from .volumes import Volume

# kafka-python's DEBUG records dump client configurations and whole requests, SASL passwords included
# (SaslAuthenticateRequest). Unless someone chose a level for them, its loggers stay at INFO.
if logging.getLogger("kafka").level == logging.NOTSET:
    logging.getLogger("kafka").setLevel(logging.INFO)

# ---------------------------------------------------------------- Java admin properties -> kafka-python


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError
    return raw.strip()


_text.allowed = "a non-empty value"


def _socket_buffer(raw: str) -> int | None:
    value = int(raw)
    if value == -1:
        return None  # as in Java: the operating system's default
    if value <= 0:
        raise ValueError
    return value


_socket_buffer.allowed = "a whole number > 0, or -1 for the operating system's default"


def _hostname_check(raw: str) -> bool:
    if raw.strip().lower() not in ("https", ""):
        raise ValueError
    return raw.strip() != ""


_hostname_check.allowed = "https (check the broker's host name) or empty (do not)"

# Java key -> (kafka-python keyword, parser with an `allowed` text)
_RENAMED_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "client.id": ("client_id", _text),
    "request.timeout.ms": ("request_timeout_ms", positive_int),
    "retry.backoff.ms": ("retry_backoff_ms", non_negative_int),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", non_negative_int),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", non_negative_int),
    "metadata.max.age.ms": ("metadata_max_age_ms", positive_int),
    "connections.max.idle.ms": ("connections_max_idle_ms", positive_int),
    "receive.buffer.bytes": ("receive_buffer_bytes", _socket_buffer),
    "send.buffer.bytes": ("send_buffer_bytes", _socket_buffer),
    "ssl.key.password": ("ssl_password", _text),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", _hostname_check),
    # kafka-python's own PEM settings, for what the Java keys cannot say (a separate key file, a CRL)
    "ssl.cafile": ("ssl_cafile", _text),
    "ssl.certfile": ("ssl_certfile", _text),
    "ssl.keyfile": ("ssl_keyfile", _text),
    "ssl.crlfile": ("ssl_crlfile", _text),
}
# Keys read together with others below.
_GROUPED_KEYS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
                 "ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# `<LoginModule> <flag> name="value" name=value ... ;` as Java's JAAS parser reads it.
_JAAS_VALUE = r'"(?:[^"\\]|\\.)*"|[^\s";]+'
_JAAS_OPTION = re.compile(rf'([\w.-]+)\s*=\s*({_JAAS_VALUE})')
_JAAS = re.compile(rf'\s*(\S+)\s+(?:required|requisite|sufficient|optional)'
                   rf'((?:\s+[\w.-]+\s*=\s*(?:{_JAAS_VALUE}))*)\s*;\s*')


def client_kwargs(java_props: Mapping[str, str]) -> dict:
    """kafka-python client keyword arguments for the Java admin client properties an operator wrote.

    Raises ConfigError naming the full key of the first property that kafka-python cannot honour.
    """
    props = dict(java_props)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _SECURITY_PROTOCOLS:
        raise _config_error("security.protocol", props["security.protocol"], " or ".join(_SECURITY_PROTOCOLS))
    kwargs = {"bootstrap_servers": _bootstrap_servers(props.get("bootstrap.servers")),
              "security_protocol": protocol, "client_id": SIDECAR_CLIENT_ID}
    for key, raw in props.items():
        _check_protocol_uses(key, raw, protocol)
        if key in _RENAMED_KEYS:
            name, parse = _RENAMED_KEYS[key]
            kwargs[name] = _parse(key, raw, parse)
        elif key not in _GROUPED_KEYS:
            raise _config_error(key, raw, "one of the keys kafka-python's admin client honours: "
                                + ", ".join(sorted([*_GROUPED_KEYS, *_RENAMED_KEYS])))
    kwargs.update(_sasl_kwargs(props, protocol))
    kwargs.update(_pem_store_kwargs(props, "truststore", "ssl.cafile"))
    kwargs.update(_pem_store_kwargs(props, "keystore", "ssl.certfile"))
    return kwargs


def _config_error(key: str, raw: str | None, allowed: str) -> ConfigError:
    full_key = PREFIX + ADMIN_PREFIX + key
    given = " is missing" if raw is None else f"={shown(full_key, raw)}"
    return ConfigError(f"{full_key}{given}: expected {allowed}")


def _parse(key: str, raw: str, parse: Callable[[str], object]) -> object:
    try:
        return parse(raw)
    except ValueError:
        raise _config_error(key, raw, parse.allowed) from None


def _bootstrap_servers(raw: str | None) -> list[str]:
    servers = [server.strip() for server in (raw or "").split(",") if server.strip()]
    if not servers:
        raise _config_error("bootstrap.servers", raw, "a comma-separated list of host:port")
    return servers


def _check_protocol_uses(key: str, raw: str, protocol: str) -> None:
    """An ssl.* or sasl.* key the chosen protocol would ignore is a mistake worth stopping for."""
    if key.startswith("ssl.") and protocol not in ("SSL", "SASL_SSL"):
        raise _config_error(key, raw, f"no ssl.* keys with security.protocol={protocol} (only with SSL or SASL_SSL)")
    if key.startswith("sasl.") and not protocol.startswith("SASL_"):
        raise _config_error(key, raw, f"no sasl.* keys with security.protocol={protocol} "
                                      "(only with SASL_PLAINTEXT or SASL_SSL)")


def _sasl_kwargs(props: Mapping[str, str], protocol: str) -> dict:
    if not protocol.startswith("SASL_"):
        return {}
    mechanism = props.get("sasl.mechanism")
    if mechanism not in _LOGIN_MODULES:
        raise _config_error("sasl.mechanism", mechanism, " or ".join(_LOGIN_MODULES) + f" with {protocol}")
    username, password = _jaas_credentials(props.get("sasl.jaas.config"), mechanism)
    return {"sasl_mechanism": mechanism, "sasl_plain_username": username, "sasl_plain_password": password}


def _jaas_credentials(raw: str | None, mechanism: str) -> tuple[str, str]:
    module = _LOGIN_MODULES[mechanism]
    allowed = f'{module} required username="..." password="..."; (sasl.mechanism={mechanism}; no other options)'
    match = _JAAS.fullmatch(raw or "")
    if not match or match.group(1) != module:
        raise _config_error("sasl.jaas.config", raw, allowed)
    options = {name: _unquote(value) for name, value in _JAAS_OPTION.findall(match.group(2))}
    if set(options) != {"username", "password"}:
        raise _config_error("sasl.jaas.config", raw, allowed)
    return options["username"], options["password"]


def _unquote(value: str) -> str:
    if value.startswith('"'):
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _pem_store_kwargs(props: Mapping[str, str], store: str, native_key: str) -> dict:
    """ssl.<store>.location, accepted only for PEM stores: kafka-python cannot read JKS or PKCS12."""
    location_key, type_key = f"ssl.{store}.location", f"ssl.{store}.type"
    store_type = props.get(type_key)
    if store_type is not None and store_type.strip().upper() != "PEM":
        raise _config_error(type_key, store_type, "PEM (kafka-python reads PEM files only; convert the store)")
    if location_key not in props:
        return {}
    if store_type is None:
        raise _config_error(location_key, props[location_key],
                            f"a PEM file, with {type_key}=PEM (the Java default is JKS)")
    if native_key in props:
        raise _config_error(location_key, props[location_key], f"either {location_key} or {native_key}, not both")
    return {_RENAMED_KEYS[native_key][0]: _parse(location_key, props[location_key], _text)}


# ---------------------------------------------------------------- errors


# kafka-python marks these as not retriable, yet they pass: a broker that is restarting or not yet known.
_ALSO_RETRYABLE = (Errors.BrokerNotAvailableError, Errors.UnknownBrokerIdError, OSError)


def admin_error(error: Exception, what: str) -> AdminError:
    """The typed error for a kafka-python (or socket) failure while doing `what`."""
    if isinstance(error, AdminError):
        return error
    if isinstance(error, Errors.UnknownTopicOrPartitionError):  # retriable for kafka-python; final for a deleted topic
        return UnknownTopicError(f"{what} failed: {error}")
    retryable = getattr(error, "retriable", False) or isinstance(error, _ALSO_RETRYABLE)
    return (RetryableAdminError if retryable else PermanentAdminError)(f"{what} failed: {error}")


def _error_for_code(code: int, message: str | None, what: str) -> AdminError | None:
    error_class = Errors.for_code(code)
    if error_class is Errors.NoError:
        return None
    return admin_error(error_class(message or error_class.description), what)


def _raise_any(errors: Iterable[AdminError | None]) -> None:
    """Raise the errors of one or several entries as one; permanent if any is permanent."""
    errors = [error for error in errors if error is not None]
    if not errors:
        return
    if len(errors) == 1:
        raise errors[0]  # keeps its type (UnknownTopicError, ...)
    kind = PermanentAdminError if any(isinstance(e, PermanentAdminError) for e in errors) else RetryableAdminError
    raise kind("; ".join(str(error) for error in errors))


def _error_name(code: int) -> str | None:
    error_class = Errors.for_code(code)
    if error_class is Errors.NoError:
        return None
    return error_class.message if error_class.errno == code else f"UNKNOWN_ERROR_CODE_{code}"


# ---------------------------------------------------------------- the admin


_RESOURCE_TYPES = {"topic": ConfigResourceType.TOPIC.value, "broker": ConfigResourceType.BROKER.value}
# The source of a value set on the resource itself (for broker "": the dynamic default of all brokers).
_OWN_SOURCES = {
    ("topic", False): ConfigSourceType.DYNAMIC_TOPIC_CONFIG,
    ("broker", False): ConfigSourceType.DYNAMIC_BROKER_CONFIG,
    ("broker", True): ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG,
}
_MATCH_EXACT, _MATCH_DEFAULT = 0, 1


class ClusterAdmin:
    """Talks to one Kafka cluster. Connects on first use, so a sidecar starts while Kafka is down.

    Each call retries retryable failures for up to `retry_deadline` seconds (backoff with jitter), then
    raises; the sidecar loop treats a failed call as a failed poll.
    """

    def __init__(self, client_config: Mapping[str, object], retry_deadline: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep):
        self._client_config = dict(client_config)
        self._client: KafkaAdminClient | None = None
        self._connecting = threading.Lock()  # the loop and the HTTP thread may both make the first call
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_delay(retry_deadline),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=1.0),  # backoff with full jitter
            retry=tenacity.retry_if_exception_type(RetryableAdminError),
            sleep=sleep,
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

    async def _live_broker_ids(self) -> list[int]:
        response = await self._send(DescribeClusterRequest(include_fenced_brokers=False), "DescribeCluster")
        _raise_any([_error_for_code(response.error_code, response.error_message, "DescribeCluster")])
        return sorted(broker.broker_id for broker in response.brokers if not broker.is_fenced)

    def describe_volumes(self, broker_ids: Iterable[int], now: datetime) -> list[Volume]:
        """Every log dir of every given broker with its sizes (KIP-827), observed at `now`.

        An offline dir comes back with its error name, a dir without sizes with -1. Raises
        RetryableAdminError unless every broker answered: a poll only counts when all were seen.
        """
        return self._call("DescribeLogDirs", self._describe_volumes, list(broker_ids), now)

    async def _describe_volumes(self, broker_ids: list[int], now: datetime) -> list[Volume]:
        # Sent to all brokers at once, so brokers that hang cost one request timeout, not one each.
        # topics=[] (not null): only the dirs and their sizes, no partitions. Sizes need v4+.
        calls = {broker: self._manager.call_soon(self._send(DescribeLogDirsRequest(topics=[], min_version=4),
                                                    f"DescribeLogDirs to broker {broker}", node_id=broker))
                 for broker in broker_ids}
        volumes, errors = [], []
        for broker, call in calls.items():
            what = f"DescribeLogDirs to broker {broker}"
            try:
                response = await call
            except AdminError as error:  # every broker is awaited: the message names all that failed
                errors.append(error)
                continue
            errors.append(_error_for_code(response.error_code, None, what))
            volumes += [Volume(broker, result.log_dir, result.total_bytes, result.usable_bytes, now,
                               _error_name(result.error_code)) for result in response.results]
        _raise_any(errors)
        return volumes

    def describe_replica_sizes(self, broker_id: int,
                               partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], int]:
        """Bytes of the given partitions' replicas on one broker; a partition it does not hold is absent.

        A replica being moved between the broker's own dirs counts once (its current copy).
        """
        return self._call(f"DescribeLogDirs to broker {broker_id}", self._describe_replica_sizes, broker_id,
                          {topic: list(indexes) for topic, indexes in partitions.items()})

    async def _describe_replica_sizes(self, broker_id: int, partitions: dict[str, list[int]]) -> dict:
        what = f"DescribeLogDirs to broker {broker_id}"
        topic = DescribeLogDirsRequest.DescribableLogDirTopic
        request = DescribeLogDirsRequest(topics=[topic(topic=name, partitions=indexes)
                                                 for name, indexes in partitions.items()])
        response = await self._send(request, what, node_id=broker_id)
        _raise_any([_error_for_code(response.error_code, None, what)])
        sizes = {}
        for result in response.results:
            for topic_result in result.topics:
                for partition in topic_result.partitions:
                    if not partition.is_future_key:
                        sizes[(topic_result.name, partition.partition_index)] = partition.partition_size
        return sizes

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
            errors.append(_error_for_code(topic.error_code, None, f"Metadata of topic {topic.name!r}"))
            for p in topic.partitions:
                found[(topic.name, p.partition_index)] = Partition(p.leader_id, tuple(p.replica_nodes),
                                                                   tuple(p.isr_nodes))
        _raise_any(errors)
        return found

    # -------------------------------------------------------------- client quotas

    def describe_user_quotas(self, users: Iterable[Entity]) -> dict[Entity, dict[str, float]]:
        """The quotas set on each entity; {} where none are set.

        An entity is a user name, None for the default user, or (None, client id) for that client id of
        any user without a quota of its own (the sidecar's own clients, see quotas.sidecar_entity).
        """
        return self._call("DescribeClientQuotas", self._describe_user_quotas, list(users))

    async def _describe_user_quotas(self, users: list[Entity]) -> dict[Entity, dict[str, float]]:
        quotas = {}
        for user in users:
            what = f"DescribeClientQuotas for {_user_label(user)}"
            response = await self._send(_describe_user_request(user), what)
            _raise_any([_error_for_code(response.error_code, response.error_message, what)])
            quotas[user] = {value.key: value.value for entry in response.entries or () for value in entry.values}
        return quotas

    def alter_user_quotas(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """Set (a number) or remove (None) quota keys on entities (see describe_user_quotas)."""
        entries = {user: dict(keys) for user, keys in changes.items() if keys}
        if entries:
            self._call("AlterClientQuotas", self._alter_user_quotas, entries)

    async def _alter_user_quotas(self, changes: dict[Entity, dict[str, float | None]]) -> None:
        entry = AlterClientQuotasRequest.EntryData
        # One entry per entity: the broker refuses a request that names an entity twice.
        request = AlterClientQuotasRequest(entries=[
            entry(entity=[entry.EntityData(entity_type=kind, entity_name=name) for kind, name in _components(user)],
                  ops=[entry.OpData(key=key, value=0.0 if value is None else value, remove=value is None)
                       for key, value in keys.items()])
            for user, keys in changes.items()])
        response = await self._send(request, "AlterClientQuotas")
        _raise_any(_error_for_code(result.error_code, result.error_message,
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
        _check_resource_type(resource_type)
        return self._call(f"DescribeConfigs of {resource_type}s", self._describe_configs,
                          resource_type, [str(name) for name in names], None if keys is None else list(keys))

    async def _describe_configs(self, resource_type: str, names: list[str], keys: list[str] | None) -> dict:
        resource = DescribeConfigsRequest.DescribeConfigsResource
        configs = {}
        for name in names:
            what = f"DescribeConfigs of {resource_type} {name!r}"
            request = DescribeConfigsRequest(resources=[resource(
                resource_type=_RESOURCE_TYPES[resource_type], resource_name=name, configuration_keys=keys)])
            result = (await self._send(request, what, node_id=_config_node(resource_type, name))).results[0]
            _raise_any([_error_for_code(result.error_code, result.error_message, what)])
            own_source = _OWN_SOURCES[(resource_type, name == "")]
            configs[name] = {entry.name: entry.value for entry in result.configs if entry.config_source == own_source}
        return configs

    def incremental_alter_configs(self, resource_type: str, name: str | int,
                                  ops: Mapping[str, tuple[str, str | None]]) -> None:
        """Change keys of one resource: {key: (op, value)}, op one of SET, DELETE, APPEND, SUBTRACT.

        APPEND and SUBTRACT add or remove list items (such as "0:1" in leader.replication.throttled.replicas)
        and keep the items others put there; DELETE ignores the value. Raises ValueError for another
        resource type or op.
        """
        _check_resource_type(resource_type)
        configs = [_alterable_config(key, op, value) for key, (op, value) in ops.items()]
        if configs:
            self._call(f"IncrementalAlterConfigs of {resource_type} {str(name)!r}", self._incremental_alter_configs,
                       resource_type, str(name), configs)

    async def _incremental_alter_configs(self, resource_type: str, name: str, configs: list) -> None:
        what = f"IncrementalAlterConfigs of {resource_type} {name!r}"
        request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=_RESOURCE_TYPES[resource_type], resource_name=name, configs=configs)])
        response = await self._send(request, what, node_id=_config_node(resource_type, name))
        _raise_any(_error_for_code(result.error_code, result.error_message, what) for result in response.responses)

    # -------------------------------------------------------------- topics

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> bool:
        """Create a topic; False when it already exists (its settings are then left as they are)."""
        return self._call(f"CreateTopics of {name!r}", self._create_topic, name, partitions, replication_factor,
                          dict(configs or {}))

    async def _create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict) -> bool:
        topic = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(timeout_ms=self._timeout_ms, validate_only=False, topics=[topic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=[topic.CreatableTopicConfig(name=key, value=value) for key, value in configs.items()])])
        result = (await self._send(request, f"CreateTopics of {name!r}")).topics[0]
        if Errors.for_code(result.error_code) is Errors.TopicAlreadyExistsError:
            return False
        _raise_any([_error_for_code(result.error_code, result.error_message, f"CreateTopics of {name!r}")])
        return True

    # -------------------------------------------------------------- reassignments

    def list_reassignments(self) -> list[Reassignment]:
        """Every partition reassignment in progress, sorted by topic and partition."""
        return self._call("ListPartitionReassignments", self._list_reassignments)

    async def _list_reassignments(self) -> list[Reassignment]:
        request = ListPartitionReassignmentsRequest(topics=None, timeout_ms=self._timeout_ms)
        response = await self._send(request, "ListPartitionReassignments")
        _raise_any([_error_for_code(response.error_code, response.error_message, "ListPartitionReassignments")])
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
        topic = AlterPartitionReassignmentsRequest.ReassignableTopic
        by_topic: dict[str, list] = {}
        for (name, partition), replicas in targets.items():
            by_topic.setdefault(name, []).append(
                topic.ReassignablePartition(partition_index=partition, replicas=replicas))
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms, topics=[topic(name=name, partitions=parts) for name, parts in by_topic.items()])
        response = await self._send(request, "AlterPartitionReassignments")
        errors = [_error_for_code(response.error_code, response.error_message, "AlterPartitionReassignments")]
        for topic_result in response.responses:
            for result in topic_result.partitions:
                cancelled_already = (Errors.for_code(result.error_code) is Errors.NoReassignmentInProgressError
                                     and targets[(topic_result.name, result.partition_index)] is None)
                if not cancelled_already:
                    errors.append(_error_for_code(
                        result.error_code, result.error_message,
                        f"AlterPartitionReassignments of {topic_result.name}-{result.partition_index}"))
        _raise_any(errors)

    # -------------------------------------------------------------- plumbing

    @property
    def _manager(self):
        return self._client._manager

    @property
    def _timeout_ms(self) -> int:
        return self._client.config["request_timeout_ms"]

    def _call(self, what: str, coroutine, *args):
        """Run `coroutine` on the client's IO thread, retrying retryable failures until the deadline."""
        def attempt():
            try:
                return self._connected()._manager.run(coroutine, *args)
            except (Errors.KafkaError, OSError) as error:
                raise admin_error(error, what) from error
        return self._retrying(attempt)

    def _connected(self) -> KafkaAdminClient:
        with self._connecting:
            if self._client is None:
                self._client = open_client(KafkaAdminClient, self._client_config)
            return self._client

    async def _send(self, request, what: str, node_id: int | None = None):
        """Send one request (to node_id, else to the least loaded broker); failures name `what`."""
        try:
            if node_id is not None and self._manager.cluster.broker_metadata(node_id) is None:
                # A broker that just joined: the connection manager only reaches brokers its metadata knows.
                await self._manager.cluster.refresh_metadata()
            return await self._manager.send(request, node_id=node_id)
        except (Errors.KafkaError, OSError) as error:
            raise admin_error(error, what) from error


def open_client(client_class, client_config: Mapping[str, object]):
    """A bootstrapped kafka-python client (admin, producer or consumer); AdminError when that fails.

    kafka-python starts a client's IO thread before bootstrapping and leaves it running when bootstrap
    fails, so the net client is captured here and closed on failure.
    """
    created: list[KafkaNetClient] = []

    def net_client(**configs) -> KafkaNetClient:
        created.append(KafkaNetClient(**configs))
        return created[-1]

    try:
        return client_class(**client_config, kafka_client=net_client)
    except Exception as error:
        for client in created:
            client.close()
            client._net.stop()
        if isinstance(error, (Errors.KafkaError, OSError)):
            raise admin_error(error, f"connecting to {client_config.get('bootstrap_servers')}") from error
        raise


def _components(entity: Entity) -> list[tuple[str, str | None]]:
    """(entity type, name) pairs; name None is the type's default entity."""
    if isinstance(entity, tuple):
        user, client_id = entity
        return [("user", user), ("client-id", client_id)]
    return [("user", entity)]


def _describe_user_request(entity: Entity) -> DescribeClientQuotasRequest:
    component = DescribeClientQuotasRequest.ComponentData
    # match must be null for a default entity, not kafka-python's default ""
    matches = [component(entity_type=kind, match_type=_MATCH_DEFAULT, match=None) if name is None else
               component(entity_type=kind, match_type=_MATCH_EXACT, match=name)
               for kind, name in _components(entity)]
    return DescribeClientQuotasRequest(components=matches, strict=True)  # strict: exactly this entity


def _user_label(entity: Entity) -> str:
    labels = {"user": "the default user", "client-id": "the default client id"}
    return " and ".join(labels[kind] if name is None else f"{kind} {name!r}" for kind, name in _components(entity))


def _check_resource_type(resource_type: str) -> None:
    if resource_type not in _RESOURCE_TYPES:
        raise ValueError(f"resource_type {resource_type!r}: expected 'topic' or 'broker'")


def _alterable_config(key: str, op: str, value: str | None):
    op_code = AlterConfigOp.value_for(op)  # ValueError for an unknown op
    return IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
        name=key, config_operation=op_code, value=None if op_code == AlterConfigOp.DELETE else value)


def _config_node(resource_type: str, name: str) -> int | None:
    """Broker configs go to that broker (as the Java client does); the rest to any broker."""
    return int(name) if resource_type == "broker" and name != "" else None
