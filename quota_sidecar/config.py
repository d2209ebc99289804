"""Configuration: `client.quota.callback.static.*` properties, parsed and validated once into frozen dataclasses.

The keys are the Strimzi quota plugin's where they overlap (proposal 047), so the sidecar can read the
broker's own server.properties. Every invalid value raises ConfigError with one line naming the key,
the value and what is allowed, before anything touches the cluster. KEYS is the one description of the
keys: the README's table is `quota-sidecar keys --markdown`, and a test holds the two together.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Mapping

import isodate

from .errors import ConfigError
from .properties import (ADMIN_PREFIX, MASK, PREFIX, SIDECAR_CLIENT_ID, boolean, client_kwargs, duration, is_secret,
                         non_negative_int, non_negative_percent, parse_value, percent, port, positive_int,
                         positive_number, principal_list, ratio, read_properties, text)

CAPACITY_KEY = "replication.capacity.bytes.per.second"
# Keys read from the broker's own server.properties (no prefix) when the sidecar sits beside it.
BROKER_ID_KEYS = ("node.id", "broker.id")


# ---------------------------------------------------------------- the keys

@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], object]
    default: object
    doc: str                   # what it means, for the README table and `quota-sidecar keys`
    default_doc: str = ""      # the default in words, where the value alone does not say it

    @property
    def allowed(self) -> str:
        return self.parse.allowed

    def shown_default(self) -> str:
        if self.default_doc:
            return self.default_doc
        if isinstance(self.default, timedelta):
            return isodate.duration_isoformat(self.default)
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if self.default in ("", ()):
            return "empty"
        return str(self.default)


KEYS: tuple[Key, ...] = (
    Key("storage.per.volume.limit.min.available.bytes", non_negative_int, None,
        "throttle when a volume's available bytes <= this", "unset"),
    Key("storage.per.volume.limit.min.available.ratio", ratio, None,
        "throttle when a volume's available/total <= this (total 0 counts as 0)", "unset"),
    Key("storage.check.interval", duration, timedelta(minutes=1),
        "time between polls; PT0S disables the storage check (no limit needed then)"),
    Key("storage.cordon.log.dirs", boolean, True,
        "while a log dir of this broker violates the limit, add it to the broker's cordoned.log.dirs (KIP-1066, "
        "Kafka >= 4.3: no new replicas there) and remove it on recovery; needs broker.id"),
    Key("throttle.factor.fallback", ratio, 1.0, "factor once no valid factor is left"),
    Key("throttle.factor.validity.duration", duration, timedelta(minutes=5),
        "how long a factor stays valid while polls fail"),
    Key("produce", positive_number, None, "producer quota in bytes/s per principal, scaled by the factor",
        "unset (unlimited)"),
    Key("fetch", positive_number, None, "consumer quota in bytes/s per principal, never scaled", "unset (no quota)"),
    Key("request", positive_number, None, "request-time quota in percent per principal, never scaled",
        "unset (no quota)"),
    Key("excluded.principal.name.list", principal_list, (), "principals never throttled"),
    Key("spark.url", text, "", "empty: embedded local Spark; sc://host:port: Spark Connect; else a Spark master URL"),
    Key("http.host", text, "127.0.0.1", "address of the HTTP endpoint (metrics, status, overrides)"),
    Key("http.port", port, 8080, "its port (0 picks a free one, logged)"),
    Key("api.token", text, "", "bearer token for override changes; empty refuses changes"),
    Key("broker.id", non_negative_int, None, "the broker beside this sidecar (needed by replication throttles)",
        "node.id/broker.id of the file"),
    Key(CAPACITY_KEY, positive_int, None, "network capacity of every broker in bytes/s "
        f"({CAPACITY_KEY}.<broker id> for one broker)", "unset (replication throttles off)"),
    Key("replication.max.tx.percent", percent, 90.0, "share of free outbound capacity a source may use"),
    Key("replication.max.rx.percent", percent, 90.0, "share of free inbound capacity a destination may use"),
    Key("replication.min.rate.bytes.per.second", positive_int, 10_000_000, "floor and fail-safe rate in bytes/s"),
    Key("replication.change.threshold.percent", non_negative_percent, 10.0,
        "a new rate is written only when it moves at least this much"),
    Key("replication.failure.threshold", non_negative_int, 1,
        "failed network reads in a row tolerated before the fail-safe rate"),
    Key("replication.disk.guard.rate.bytes.per.second", positive_int, 1,
        "follower rate of a destination whose volume violates the limit"),
    Key("replication.network.interface", text, "",
        "interface measured with psutil; name it on a host with bridges or veths, where the default counts "
        "bytes crossing a bridge twice (in a pod, the default sees just the pod's interface)", "empty (all but lo)"),
    Key("replication.network.window", duration, timedelta(seconds=30), "network figures averaged over this window"),
    Key("replication.check.interval", duration, timedelta(seconds=10),
        "time between replication passes (moves, network, rates; the storage check keeps its own interval); "
        "the shorter of the two applies"),
    Key("replication.cleanup.foreign.after", duration, None,
        "opt-in: clear throttle rates other tools left on this broker once no move was seen this long",
        "unset (off)"),
    Key("remote.copy.max.bytes.per.second", positive_int, None,
        "KIP-956 remote.log.manager.copy.max.bytes.per.second of this broker", "unset (untouched)"),
    Key("remote.fetch.max.bytes.per.second", positive_int, None,
        "KIP-956 remote.log.manager.fetch.max.bytes.per.second of this broker", "unset (untouched)"),
    Key("remote.copy.lift.on.violation", boolean, False,
        "lift the copy quota while this broker has a violating volume, so uploads free local disk sooner"),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
PER_BROKER_CAPACITY = re.compile(re.escape(CAPACITY_KEY) + r"\.(\d+)$")
# The admin client's keys are checked by properties.client_kwargs; the README lists what it accepts.
ADMIN_KEYS_DOC = (
    (ADMIN_PREFIX + "bootstrap.servers", "required", "a comma-separated list of host:port",
     "the cluster the sidecar watches"),
    (ADMIN_PREFIX + "*", "", "see below", "admin client properties (security included), as the Java client names them"),
)


def keys_table() -> str:
    """The keys as a Markdown table: the README's, and `quota-sidecar keys --markdown`."""
    rows = [*ADMIN_KEYS_DOC, *((key.name, key.shown_default(), key.allowed, key.doc) for key in KEYS)]
    lines = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {default} | {allowed} | {doc} |" for name, default, allowed, doc in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- the configuration

@dataclass(frozen=True)
class StorageLimit:
    """Exactly one of the two limits is set."""
    min_available_bytes: int | None = None
    min_available_ratio: float | None = None

    def as_params(self) -> dict:
        return {"min_available_bytes": self.min_available_bytes, "min_available_ratio": self.min_available_ratio}

    def describe(self) -> str:
        if self.min_available_bytes is not None:
            return f"available bytes <= {self.min_available_bytes}"
        return f"available ratio <= {self.min_available_ratio}"


@dataclass(frozen=True)
class QuotaConfig:
    produce: float | None = None
    fetch: float | None = None
    request: float | None = None
    excluded_principals: tuple[str, ...] = ()
    sidecar_client_id: str = SIDECAR_CLIENT_ID  # kafka.admin.client.id: the sidecar's own clients


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
    remote_copy_rate: int | None = None
    remote_fetch_rate: int | None = None
    remote_copy_lift_on_violation: bool = False

    @property
    def enabled(self) -> bool:
        return self.capacity_default is not None or bool(self.capacity_per_broker)

    def capacity(self, broker_id: int) -> int | None:
        return self.capacity_per_broker.get(broker_id, self.capacity_default)


@dataclass(frozen=True)
class SidecarConfig:
    admin_properties: Mapping[str, str]
    storage_limit: StorageLimit | None
    quotas: QuotaConfig = QuotaConfig()
    check_interval: timedelta = timedelta(minutes=1)
    cordon_log_dirs: bool = True
    fallback_factor: float = 1.0
    validity: timedelta = timedelta(minutes=5)
    spark_url: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    api_token: str = field(default="", repr=False)
    broker_id: int | None = None
    replication: ReplicationConfig = ReplicationConfig()
    admin_client: Mapping[str, object] = field(default_factory=dict, repr=False)  # kafka-python kwargs; secrets

    @property
    def storage_check_enabled(self) -> bool:
        return self.check_interval > timedelta(0)

    def redacted(self) -> dict:
        """Every effective setting with secrets masked: safe for logs and status."""
        admin = {f"{PREFIX}{ADMIN_PREFIX}{k}": (MASK if is_secret(k) else v) for k, v in self.admin_properties.items()}
        return {**admin, "storage_limit": self.storage_limit.describe() if self.storage_limit else None,
                "check_interval": isodate.duration_isoformat(self.check_interval),
                "cordon_log_dirs": self.cordon_log_dirs,
                "fallback_factor": self.fallback_factor,
                "validity": isodate.duration_isoformat(self.validity),
                "spark_url": self.spark_url or "embedded", "broker_id": self.broker_id}


# ---------------------------------------------------------------- loading

def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`--set key=value` pairs; a key without the prefix gets it."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        result[key if key.startswith(PREFIX) or key in BROKER_ID_KEYS else PREFIX + key] = value
    return result


def load(path: str | None, overrides: list[str] | tuple[str, ...] = ()) -> SidecarConfig:
    properties = read_properties(path) if path else {}
    properties.update(parse_overrides(overrides))
    return from_properties(properties)


def from_properties(properties: Mapping[str, str]) -> SidecarConfig:
    ours = {key[len(PREFIX):]: str(value) for key, value in properties.items() if key.startswith(PREFIX)}
    admin = {key[len(ADMIN_PREFIX):]: value for key, value in ours.items() if key.startswith(ADMIN_PREFIX)}
    capacities = _per_broker_capacities(ours)
    values = _parse_known(ours, set(admin_key(k) for k in admin) | set(capacities.keys_seen))

    if not admin.get("bootstrap.servers", "").strip():
        raise ConfigError(f"{PREFIX}{ADMIN_PREFIX}bootstrap.servers is required: "
                          "the host:port list of the cluster the sidecar watches")
    check_interval = values["storage.check.interval"]
    storage_limit = _storage_limit(values, required=check_interval > timedelta(0))
    broker_id = values["broker.id"]
    if broker_id is None:
        broker_id = _broker_id_from_file(properties)

    config = SidecarConfig(
        admin_properties=dict(admin),
        admin_client=client_kwargs(admin),  # checks the kafka.admin.* pass-through now, not at the first poll
        storage_limit=storage_limit,
        quotas=QuotaConfig(values["produce"], values["fetch"], values["request"],
                           values["excluded.principal.name.list"],
                           admin.get("client.id", "").strip() or SIDECAR_CLIENT_ID),
        check_interval=check_interval,
        cordon_log_dirs=values["storage.cordon.log.dirs"],
        fallback_factor=values["throttle.factor.fallback"],
        validity=values["throttle.factor.validity.duration"],
        spark_url=values["spark.url"],
        http_host=values["http.host"],
        http_port=values["http.port"],
        api_token=values["api.token"],
        broker_id=broker_id,
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
            remote_copy_rate=values["remote.copy.max.bytes.per.second"],
            remote_fetch_rate=values["remote.fetch.max.bytes.per.second"],
            remote_copy_lift_on_violation=values["remote.copy.lift.on.violation"],
        ),
    )
    for key in ("replication.network.window", "replication.check.interval"):
        if values[key] <= timedelta(0):
            raise ConfigError(f"{PREFIX}{key}={ours[key]}: must be longer than zero")
    return config


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
    min_bytes = values["storage.per.volume.limit.min.available.bytes"]
    min_ratio = values["storage.per.volume.limit.min.available.ratio"]
    bytes_key = f"{PREFIX}storage.per.volume.limit.min.available.bytes"
    ratio_key = f"{PREFIX}storage.per.volume.limit.min.available.ratio"
    if min_bytes is not None and min_ratio is not None:
        raise ConfigError(f"{bytes_key}={min_bytes} and {ratio_key}={min_ratio}: set exactly one of the two limits")
    if min_bytes is None and min_ratio is None:
        if required:
            raise ConfigError(f"{bytes_key} or {ratio_key} is required while the storage check is enabled "
                              f"({PREFIX}storage.check.interval > PT0S)")
        return None
    return StorageLimit(min_bytes, min_ratio)


def _broker_id_from_file(properties: Mapping[str, str]) -> int | None:
    for key in BROKER_ID_KEYS:
        if key in properties:
            return parse_value(key, properties[key], non_negative_int)
    return None
