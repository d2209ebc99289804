"""The configuration's values: frozen dataclasses, each setting typed and its default given, which config.py
builds from the keys once they are parsed and validated (history.py holds the history's and the capacity
report's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Mapping

import isodate

from ..common.vocabulary import StorageLimit
from .history import HistoryConfig
from .keys import DECISIONS_TOPIC, DEFAULT_POLL_TIMEOUT, HEARTBEATS_TOPIC, OBSERVATIONS_TOPIC
from .properties import ADMIN_PREFIX, MASK, MIN_DRIVER_MIB, PREFIX, SIDECAR_CLIENT_ID, is_secret


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
    driver_memory: str = f"{MIN_DRIVER_MIB}m"  # aggregator.driver.memory: the small driver
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
