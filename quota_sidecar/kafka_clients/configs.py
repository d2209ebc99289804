"""The admin calls on dynamic configs of topics and brokers (DescribeConfigs, IncrementalAlterConfigs): the values
set on a resource itself, a broker's layers of a key, and keys set, deleted or their list items changed."""

from __future__ import annotations

from typing import Iterable, Mapping

from kafka.admin import ConfigSourceType

from . import admin_requests as requests
from .admin_connection import AdminConnection
from .kafka_client import error_for_code, raise_any


class Configs(AdminConnection):
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
