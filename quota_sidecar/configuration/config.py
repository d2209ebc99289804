"""Configuration: `client.quota.callback.static.*` properties, parsed and validated once into frozen dataclasses
(settings.py; the storage limit's keys in storage_limits.py).

The keys (keys.py) are the Strimzi quota plugin's where they overlap (proposal 047), so the sidecar can
read the broker's own server.properties. Every invalid value raises ConfigError with one line naming the
key, the value and what is allowed, before anything touches the cluster.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping, Sequence

from ..common.errors import ConfigError
from .admin_client import client_kwargs
from .history import CapacityConfig, HistoryConfig
from .keys import (BROKER_ID_KEYS, CAPACITY_KEY, DEFAULT_POLL_TIMEOUT, KEYS, KEYS_BY_NAME, LOG_DIR_KEYS,
                   PER_BROKER_CAPACITY, POLL_TIMEOUT_MARGIN)
from .properties import (ADMIN_PREFIX, PREFIX, SIDECAR_CLIENT_ID, non_negative_int, parse_value, path_list,
                         positive_int, read_properties)
from .settings import LocalWatchConfig, PipelineConfig, QuotaConfig, ReplicationConfig, SidecarConfig
from .storage_limits import hard_limit, with_descent, with_soft_zone


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`--set key=value` pairs; a key without the prefix gets it."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        result[key if key.startswith(PREFIX) or key in BROKER_ID_KEYS + LOG_DIR_KEYS else PREFIX + key] = value
    return result


def load(paths: str | Sequence[str] | None, overrides: list[str] | tuple[str, ...] = (),
         aggregator: bool = False) -> SidecarConfig:
    """The files in order (a later one's key wins: the broker's server.properties, then the sidecar's own,
    then a file of secrets), then the overrides. The aggregator watches no cluster: it needs the pipeline's
    (pipeline.bootstrap.servers, else kafka.admin.bootstrap.servers) and no storage limit (the agents send
    theirs)."""
    return from_properties(_read(paths, overrides), aggregator)


def _read(paths: str | Sequence[str] | None, overrides: list[str] | tuple[str, ...]) -> dict[str, str]:
    properties = {}
    for path in [paths] if isinstance(paths, str) else paths or ():
        properties.update(read_properties(path))
    properties.update(parse_overrides(overrides))
    return properties


def load_capacity(paths: Sequence[str], overrides: list[str] | tuple[str, ...] = ()) -> CapacityConfig:
    """The storage limit and the history's keys of the files and overrides, every other key checked as `load`
    checks it; no cluster needed."""
    ours = {key[len(PREFIX):]: str(value) for key, value in _read(paths, overrides).items() if key.startswith(PREFIX)}
    admin_keys = {key for key in ours if key.startswith(ADMIN_PREFIX)}
    values = _parse_known(ours, admin_keys | set(_per_broker_capacities(ours).keys_seen))
    return CapacityConfig(hard_limit(values, required=False), HistoryConfig.of(values), values["spark.url"])


def from_properties(properties: Mapping[str, str], aggregator: bool = False) -> SidecarConfig:
    ours = {key[len(PREFIX):]: str(value) for key, value in properties.items() if key.startswith(PREFIX)}
    admin = {key[len(ADMIN_PREFIX):]: value for key, value in ours.items() if key.startswith(ADMIN_PREFIX)}
    capacities = _per_broker_capacities(ours)
    values = _parse_known(ours, set(admin_key(k) for k in admin) | set(capacities.keys_seen))

    if aggregator and values["pipeline.bootstrap.servers"]:  # reached with the kafka.admin.* settings
        admin = {**admin, "bootstrap.servers": values["pipeline.bootstrap.servers"]}
    if aggregator and not admin.get("bootstrap.servers", "").strip():
        raise ConfigError(f"{PREFIX}pipeline.bootstrap.servers is required: the host:port list of the cluster "
                          "the agents publish their observations to")
    if not admin.get("bootstrap.servers", "").strip():
        raise ConfigError(f"{PREFIX}{ADMIN_PREFIX}bootstrap.servers is required: "
                          "the host:port list of the cluster the sidecar watches")
    check_interval = values["storage.check.interval"]
    required = check_interval > timedelta(0) and not aggregator
    storage_limit = with_descent(values, with_soft_zone(values, hard_limit(values, required=required)), check_interval)
    broker_id = values["broker.id"]
    if broker_id is None:
        broker_id = _broker_id_from_file(properties)

    if values["state.store"] == "zookeeper" and not values["zookeeper.connect"]:
        raise ConfigError(f"{PREFIX}state.store=zookeeper: needs {PREFIX}zookeeper.connect, the cluster's ZooKeeper")
    admin_client = client_kwargs(admin)  # checks the kafka.admin.* pass-through now, not at the first poll
    config = SidecarConfig(
        admin_properties=dict(admin),
        admin_client=admin_client,
        storage_limit=storage_limit,
        quotas=QuotaConfig(values["produce"], values["fetch"], values["request"],
                           values["excluded.principal.name.list"],
                           admin.get("client.id", "").strip() or SIDECAR_CLIENT_ID,
                           values["sidecar.principal"] or admin_client.get("sasl_plain_username"),
                           values["sidecar.produce"], values["produce.floor"], values["produce.descent.ratio"],
                           values["produce.descent.step"]),
        check_interval=check_interval,
        fill_window=values["storage.fill.window"],
        local_watch=LocalWatchConfig(values["storage.local.log.dirs"] or _log_dirs_from_file(properties),
                                     values["storage.local.watch.interval"], values["storage.local.trigger.horizon"],
                                     named=bool(values["storage.local.log.dirs"])),
        poll_timeout=values["poll.timeout"] if "poll.timeout" in ours else _default_poll_timeout(admin_client),
        cordon_log_dirs=values["storage.cordon.log.dirs"],
        cancel_moves_at_limit=values["storage.cancel.moves.at.limit"],
        cover_after=values["cover.after"],
        cover_interval=values["cover.interval"],
        fallback_factor=values["throttle.factor.fallback"],
        validity=values["throttle.factor.validity.duration"],
        spark_url=values["spark.url"],
        http_host=values["http.host"],
        http_port=values["http.port"],
        api_token=values["api.token"],
        http_tls=_http_tls(values),
        http_plain_port=values["http.plain.port"],
        http_plain_changes=values["http.plain.changes"],
        broker_id=broker_id,
        zookeeper_connect=values["zookeeper.connect"],
        zookeeper_session_timeout=values["zookeeper.session.timeout"],
        state_store=values["state.store"],
        pipeline=_pipeline(values, admin),
        history=HistoryConfig.of(values),
        replication=ReplicationConfig(
            capacity_default=values[CAPACITY_KEY],
            capacity_per_broker=capacities.values,
            max_tx_percent=values["replication.max.tx.percent"],
            max_rx_percent=values["replication.max.rx.percent"],
            min_rate=values["replication.min.rate.bytes.per.second"],
            change_threshold_percent=values["replication.change.threshold.percent"],
            failure_threshold=values["replication.failure.threshold"],
            disk_guard_rate=values["replication.disk.guard.rate.bytes.per.second"],
            network_interface=values["replication.network.interface"],
            network_window=values["replication.network.window"],
            check_interval=values["replication.check.interval"],
            cleanup_foreign_after=values["replication.cleanup.foreign.after"],
            stuck_after=values["replication.stuck.after"],
            keep_up_margin_percent=values["replication.keep.up.margin.percent"],
            throttle_catch_up=values["replication.throttle.catch.up"],
            remote_copy_rate=values["remote.copy.max.bytes.per.second"],
            remote_fetch_rate=values["remote.fetch.max.bytes.per.second"],
            remote_copy_lift_on_violation=values["remote.copy.lift.on.violation"],
        ),
    )
    return config


def _http_tls(values: Mapping[str, object]) -> tuple[str, str] | None:
    cert, key = values["http.tls.cert.file"], values["http.tls.key.file"]
    if bool(cert) != bool(key):
        given, missing = ("http.tls.cert.file", "http.tls.key.file") if cert else ("http.tls.key.file",
                                                                                   "http.tls.cert.file")
        raise ConfigError(f"{PREFIX}{given} needs {PREFIX}{missing} too: https takes a certificate and its key")
    if values["http.plain.port"] is not None and not cert:
        raise ConfigError(f"{PREFIX}http.plain.port={values['http.plain.port']}: only with TLS (http.tls.cert.file "
                          "and http.tls.key.file); without it the endpoint is plain already")
    return (cert, key) if cert else None


def _pipeline(values: Mapping[str, object], admin: Mapping[str, str]) -> PipelineConfig:
    """The pipeline cluster is reached as the watched one is (kafka.admin.*), at its own bootstrap servers
    when pipeline.bootstrap.servers names them."""
    servers = values["pipeline.bootstrap.servers"] or admin["bootstrap.servers"]
    java = {**admin, "bootstrap.servers": servers}
    if values["aggregator.metrics.port"] is not None and not values["history.location"]:
        raise ConfigError(f"{PREFIX}aggregator.metrics.port={values['aggregator.metrics.port']}: needs {PREFIX}"
                          "history.location too: the endpoint exports the forecast of the history")
    return PipelineConfig(servers, bool(values["pipeline.bootstrap.servers"]), values["pipeline.observations.topic"],
                          values["pipeline.decisions.topic"], values["pipeline.heartbeats.topic"],
                          values["aggregator.checkpoint.location"], values["aggregator.kafka.jars"],
                          values["aggregator.driver.memory"], values["aggregator.metrics.port"], client_kwargs(java),
                          java)


def _default_poll_timeout(admin_client: Mapping[str, object]) -> timedelta:
    request_timeout_ms = admin_client.get("request_timeout_ms")
    if request_timeout_ms is None:
        return DEFAULT_POLL_TIMEOUT
    return min(DEFAULT_POLL_TIMEOUT, timedelta(milliseconds=request_timeout_ms) + POLL_TIMEOUT_MARGIN)


def admin_key(key: str) -> str:
    return ADMIN_PREFIX + key


@dataclass
class _Capacities:
    values: dict[int, int]
    keys_seen: list[str]


def _per_broker_capacities(ours: Mapping[str, str]) -> _Capacities:
    values, seen = {}, []
    for key, raw in ours.items():
        match = PER_BROKER_CAPACITY.match(key)
        if match:
            values[int(match.group(1))] = parse_value(PREFIX + key, raw, positive_int)
            seen.append(key)
    return _Capacities(values, seen)


def _parse_known(ours: Mapping[str, str], handled_elsewhere: set[str]) -> dict[str, object]:
    for key in ours:
        if key not in KEYS_BY_NAME and key not in handled_elsewhere:
            raise ConfigError(_unknown_key_message(key))
    return {key.name: (parse_value(PREFIX + key.name, ours[key.name], key.parse) if key.name in ours else key.default)
            for key in KEYS}


def _unknown_key_message(key: str) -> str:
    candidates = [k.name for k in KEYS] + [CAPACITY_KEY + ".<broker id>", ADMIN_PREFIX + "bootstrap.servers"]
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    hint = f"; did you mean {PREFIX}{close[0]}?" if close else "; quota-sidecar keys lists them"
    return f"{PREFIX}{key} is not a known key{hint}"


def _log_dirs_from_file(properties: Mapping[str, str]) -> tuple[str, ...]:
    for key in LOG_DIR_KEYS:
        if key in properties:
            return parse_value(key, properties[key], path_list)
    return ()


def _broker_id_from_file(properties: Mapping[str, str]) -> int | None:
    for key in BROKER_ID_KEYS:
        if key in properties:
            return parse_value(key, properties[key], non_negative_int)
    return None
