"""Configuration: `client.quota.callback.static.*` properties, parsed and validated once into frozen dataclasses.

The keys (keys.py) are the Strimzi quota plugin's where they overlap (proposal 047), so the sidecar can
read the broker's own server.properties. Every invalid value raises ConfigError with one line naming the
key, the value and what is allowed, before anything touches the cluster.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Mapping, Sequence

import isodate

from ..common.errors import ConfigError
from ..common.vocabulary import StorageLimit
from .admin_client import client_kwargs
from .history import CapacityConfig, HistoryConfig
from .keys import (BROKER_ID_KEYS, CAPACITY_KEY, DECISIONS_TOPIC, DEFAULT_POLL_TIMEOUT, HARD_KEYS, HEARTBEATS_TOPIC,
                   KEYS, KEYS_BY_NAME, LOG_DIR_KEYS, OBSERVATIONS_TOPIC, PER_BROKER_CAPACITY, POLL_TIMEOUT_MARGIN,
                   SOFT_KEYS, DESCENT_KEYS)
from .properties import (ADMIN_PREFIX, MASK, PREFIX, SIDECAR_CLIENT_ID, is_secret, non_negative_int,
                         parse_value, path_list, positive_int, read_properties)


# ---------------------------------------------------------------- the configuration

@dataclass(frozen=True)
class LocalWatchConfig:
    """This broker's log dirs, sampled locally between passes (off without dirs or with a zero interval)."""
    log_dirs: tuple[str, ...] = ()
    interval: timedelta = timedelta(milliseconds=100)
    horizon: timedelta | None = None  # None: a few times the last pass's duration
    named: bool = False  # by storage.local.log.dirs (they must exist), not read from the broker's file

    @property
    def enabled(self) -> bool:
        return bool(self.log_dirs) and self.interval > timedelta(0)


@dataclass(frozen=True)
class QuotaConfig:
    produce: float | None = None
    fetch: float | None = None
    request: float | None = None
    excluded_principals: tuple[str, ...] = ()
    sidecar_client_id: str = SIDECAR_CLIENT_ID  # kafka.admin.client.id: the sidecar's own clients
    sidecar_principal: str | None = None  # the user they authenticate as; None: the client id alone names them
    sidecar_produce: float = 1_000_000    # their producer quota while the client id alone names them
    floor: float = 26_214                 # the lowest producer quota before the hard limit (decide/descent.py)
    descent_ratio: float = 3.0            # each step down at most this many times lower
    descent_step: timedelta = timedelta(seconds=36)  # the time between two steps down

    @property
    def sidecar_entity(self) -> tuple[str | None, str]:
        """The quota entity of the sidecar's own clients: its user with its client id, which no other principal
        can borrow; without a principal, any user (the default) with its client id."""
        return self.sidecar_principal, self.sidecar_client_id


@dataclass(frozen=True)
class ReplicationConfig:
    capacity_default: int | None = None
    capacity_per_broker: Mapping[int, int] = field(default_factory=dict)
    max_tx_percent: float = 90.0
    max_rx_percent: float = 90.0
    min_rate: int = 10_000_000
    change_threshold_percent: float = 10.0
    failure_threshold: int = 1
    disk_guard_rate: int = 1
    network_interface: str = ""
    network_window: timedelta = timedelta(seconds=30)
    check_interval: timedelta = timedelta(seconds=10)
    cleanup_foreign_after: timedelta | None = None
    stuck_after: timedelta = timedelta(minutes=2)
    keep_up_margin_percent: float = 20.0
    throttle_catch_up: bool = False
    remote_copy_rate: int | None = None
    remote_fetch_rate: int | None = None
    remote_copy_lift_on_violation: bool = False

    @property
    def enabled(self) -> bool:
        return self.capacity_default is not None or bool(self.capacity_per_broker)

    def capacity(self, broker_id: int) -> int | None:
        return self.capacity_per_broker.get(broker_id, self.capacity_default)


@dataclass(frozen=True)
class PipelineConfig:
    """The pipeline cluster between the agents and the aggregator, and the aggregator's own settings."""
    bootstrap_servers: str = ""  # pipeline.bootstrap.servers, else the watched cluster's
    named: bool = False  # pipeline.bootstrap.servers was set
    observations_topic: str = OBSERVATIONS_TOPIC
    decisions_topic: str = DECISIONS_TOPIC
    heartbeats_topic: str = HEARTBEATS_TOPIC
    checkpoint: str = ""
    kafka_jars: tuple[str, ...] = ()
    metrics_port: int | None = None  # the aggregator's /metrics on http.host: the history's forecast
    client: Mapping[str, object] = field(default_factory=dict, repr=False)  # kafka-python kwargs; secrets
    java_properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # for Spark's connector


@dataclass(frozen=True)
class SidecarConfig:
    admin_properties: Mapping[str, str]
    storage_limit: StorageLimit | None
    quotas: QuotaConfig = QuotaConfig()
    check_interval: timedelta = timedelta(minutes=1)
    fill_window: timedelta = timedelta(minutes=1)
    local_watch: LocalWatchConfig = LocalWatchConfig()
    poll_timeout: timedelta = DEFAULT_POLL_TIMEOUT
    cordon_log_dirs: bool = True
    cancel_moves_at_limit: bool = True
    cover_after: timedelta = timedelta(seconds=2)  # an agent silent this long is down; 0: no heartbeats, no cover
    cover_interval: timedelta = timedelta(milliseconds=200)
    fallback_factor: float = 1.0
    validity: timedelta = timedelta(minutes=5)
    spark_url: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    api_token: str = field(default="", repr=False)
    http_tls: tuple[str, str] | None = None  # (certificate file, key file): the endpoint speaks https
    http_plain_port: int | None = None  # with TLS, a plain listener beside it for metrics, probes and status
    http_plain_changes: bool = False  # override changes over plain HTTP from anywhere
    broker_id: int | None = None
    zookeeper_connect: str = ""  # empty: no znode volumes
    zookeeper_session_timeout: timedelta = timedelta(seconds=10)
    state_store: str = "topic"  # or "zookeeper"
    replication: ReplicationConfig = ReplicationConfig()
    pipeline: PipelineConfig = PipelineConfig()
    history: HistoryConfig = HistoryConfig()
    admin_client: Mapping[str, object] = field(default_factory=dict, repr=False)  # kafka-python kwargs; secrets

    @property
    def storage_check_enabled(self) -> bool:
        return self.check_interval > timedelta(0)

    @property
    def covering(self) -> bool:
        """Whether the agent beats and covers brokers whose agent is down: cover.after, its broker known, storage
        checked."""
        return bool(self.cover_after) and self.broker_id is not None and self.storage_check_enabled

    def redacted(self) -> dict:
        """Every effective setting with secrets masked: safe for logs and status."""
        admin = {f"{PREFIX}{ADMIN_PREFIX}{k}": (MASK if is_secret(k) else v) for k, v in self.admin_properties.items()}
        return {**admin, "storage_limit": self.storage_limit.describe() if self.storage_limit else None,
                "check_interval": isodate.duration_isoformat(self.check_interval),
                "fill_window": isodate.duration_isoformat(self.fill_window),
                "poll_timeout": isodate.duration_isoformat(self.poll_timeout),
                "cordon_log_dirs": self.cordon_log_dirs,
                "cancel_moves_at_limit": self.cancel_moves_at_limit,
                "fallback_factor": self.fallback_factor,
                "validity": isodate.duration_isoformat(self.validity),
                "broker_id": self.broker_id,  # (no spark.url: the agent runs no Spark; the aggregator logs its own)
                "pipeline": self.pipeline.bootstrap_servers,
                "zookeeper_connect": self.zookeeper_connect or None, "state_store": self.state_store}


# ---------------------------------------------------------------- loading

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
    return CapacityConfig(_storage_limit(values, required=False), HistoryConfig.of(values), values["spark.url"])


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
    storage_limit = _descent(values, _soft_limit(values, _storage_limit(values, required=required)), check_interval)
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
                          values["aggregator.metrics.port"], client_kwargs(java), java)


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
    hint = f"; did you mean {PREFIX}{close[0]}?" if close else "; see the README for the keys"
    return f"{PREFIX}{key} is not a known key{hint}"


def _storage_limit(values: Mapping[str, object], required: bool) -> StorageLimit | None:
    min_bytes, min_ratio = (values[key] for key in HARD_KEYS)
    bytes_key, ratio_key = (PREFIX + key for key in HARD_KEYS)
    if min_bytes is not None and min_ratio is not None:
        raise ConfigError(f"{bytes_key}={min_bytes} and {ratio_key}={min_ratio}: set exactly one of the two limits")
    if min_bytes is None and min_ratio is None:
        if required:
            raise ConfigError(f"{bytes_key} or {ratio_key} is required while the storage check is enabled "
                              f"({PREFIX}storage.check.interval > PT0S)")
        return None
    return StorageLimit(min_bytes, min_ratio, lead_time=values["storage.per.volume.limit.lead.time"])


def _soft_limit(values: Mapping[str, object], limit: StorageLimit | None) -> StorageLimit | None:
    """The hard limit with its soft zone: a soft limit of the hard limit's kind, strictly above it, and a
    `produce` quota for it to scale (the soft factor has nothing else to act on)."""
    given = [(kind, PREFIX + key, values[key]) for kind, key in enumerate(SOFT_KEYS) if values[key] is not None]
    if not given:
        return limit
    if len(given) == 2:
        raise ConfigError(f"{given[0][1]}={given[0][2]} and {given[1][1]}={given[1][2]}: set at most one soft limit")
    (kind, soft_key, soft), = given
    hard = None if limit is None else (limit.min_available_bytes, limit.min_available_ratio)[kind]
    if hard is None:
        raise ConfigError(f"{soft_key}={soft}: a soft limit needs a hard limit of its kind, "
                          f"{PREFIX}{HARD_KEYS[kind]}" + ("" if limit is None else
                          f" (the hard limit is {PREFIX}{HARD_KEYS[1 - kind]}: use {PREFIX}{SOFT_KEYS[1 - kind]})"))
    if soft <= hard:
        raise ConfigError(f"{soft_key}={soft}: must be above the hard limit {PREFIX}{HARD_KEYS[kind]}={hard}")
    if values["produce"] is None:
        raise ConfigError(f"{soft_key}={soft} needs {PREFIX}produce: the soft zone scales the producer quota, "
                          "and without one there is nothing to scale")
    return replace(limit, **{("soft_min_available_bytes", "soft_min_available_ratio")[kind]: soft})


def _descent(values: Mapping[str, object], limit: StorageLimit | None, check_interval: timedelta) -> StorageLimit | None:
    """The hard limit with where the descent starts: a level of the hard limit's kind above it (twice the hard
    limit unless set; for a ratio at most halfway to 1), and a horizon (2 x (check interval + step) unless set)."""
    given = [(kind, PREFIX + key, values[key]) for kind, key in enumerate(DESCENT_KEYS) if values[key] is not None]
    if len(given) == 2:
        raise ConfigError(f"{given[0][1]}={given[0][2]} and {given[1][1]}={given[1][2]}: set at most one start of the descent")
    if limit is None:
        if given:
            raise ConfigError(f"{given[0][1]}={given[0][2]}: the descent needs a hard limit of its kind")
        return None
    hard_kind = 0 if limit.min_available_bytes is not None else 1
    hard = (limit.min_available_bytes, limit.min_available_ratio)[hard_kind]
    if given:
        (kind, key, start), = given
        if kind != hard_kind:
            raise ConfigError(f"{key}={start}: the hard limit is {PREFIX}{HARD_KEYS[hard_kind]}: "
                              f"use {PREFIX}{DESCENT_KEYS[hard_kind]}")
        if start < hard:
            raise ConfigError(f"{key}={start}: must not be below the hard limit {PREFIX}{HARD_KEYS[kind]}={hard}")
    else:
        start = 2 * hard if hard_kind == 0 else min(2 * hard, (1 + hard) / 2)
    horizon = values["storage.per.volume.descent.horizon"]
    if horizon is None:
        horizon = 2 * (check_interval + values["produce.descent.step"])
    return replace(limit, descent_horizon=horizon or None,
                   **{("descent_min_available_bytes", "descent_min_available_ratio")[hard_kind]: start})


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
