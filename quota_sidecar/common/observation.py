"""What a poll reads from the cluster and this host: the value types that the Kafka I/O (admin.py)
builds and the decisions read. Nothing but data here, so both sides import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping, Sequence

from .vocabulary import StorageLimit

LEADER, FOLLOWER = "leader", "follower"
ROLES = (LEADER, FOLLOWER)
UNLIMITED = 2**63 - 1  # Kafka's "no limit" (Long.MAX_VALUE), for quotas and rates alike

# A client quota entity with a user in it: a user name, None for the default user, or (user, client id), where
# None stands for the default of either. The sidecar's own clients use SIDECAR_CLIENT_ID and get an entity of their
# own (quotas.ClientQuotas.sidecar), so the throttle it sets on the default user never stops the sidecar writing its
# records.
Entity = str | None | tuple[str | None, str | None]


@dataclass(frozen=True)
class Volume:
    broker_id: int
    log_dir: str
    total_bytes: int          # -1 when the broker did not report it
    available_bytes: int      # -1 when the broker did not report it
    observed_at: datetime     # timezone-aware UTC
    error: str | None = None  # e.g. KAFKA_STORAGE_ERROR for an offline dir

    @property
    def usable(self) -> bool:
        """Only usable volumes enter the decision; the others are shown in status."""
        return self.error is None and self.total_bytes >= 0 and self.available_bytes >= 0

    @property
    def available_ratio(self) -> float | None:
        if not self.usable:
            return None
        return self.available_bytes / self.total_bytes if self.total_bytes else 0.0

    def margin(self, limit: StorageLimit) -> float | None:
        """How far the volume is above the limit, in the limit's unit (bytes or ratio); <= 0 violates."""
        return limit.margin(self.available_bytes, self.total_bytes) if self.usable else None

    def as_row(self, now: datetime) -> dict:
        """A row of VOLUME (pipeline/schema.py): this measurement, its time in seconds relative to `now`."""
        return {"broker_id": self.broker_id, "log_dir": self.log_dir, "total_bytes": self.total_bytes,
                "available_bytes": self.available_bytes, "usable": self.usable,
                "at_seconds": (self.observed_at - now).total_seconds()}


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def sources(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.adding)

    @property
    def destinations(self) -> tuple[int, ...]:
        return self.adding


@dataclass(frozen=True)
class Partition:
    """One partition as the cluster's metadata shows it now."""
    leader: int  # -1 while no leader is available
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ReplicaSizes:
    """Bytes of some replicas, (topic, partition, broker) -> size, read at one moment (monotonic seconds)."""
    at: float
    sizes: Mapping[tuple[str, int, int], int]
    link: tuple[int, int] | None = None  # the host link's (sent, received) byte counters, read with the sizes
    adding: frozenset[tuple[str, int, int]] | None = None  # the adding replicas the moves listed; None: not known

    def size_before(self, replica: tuple[str, int, int], later: ReplicaSizes) -> int | None:
        """The replica's bytes at this reading, as a later one measures its growth from: 0 for a replica being
        added later that no move listed here (it did not exist yet), so that the first pass to see a move
        measures the replication since the pass before rather than not at all (then the unthrottled copy
        counted as the clients' traffic, and the first rate was a fraction of the right one); None when unread."""
        if replica in self.sizes:
            return self.sizes[replica]
        if self.adding is not None and later.adding is not None and replica in later.adding - self.adding:
            return 0
        return None

    def grown_since(self, earlier: Sequence[ReplicaSizes], replica: tuple[str, int, int]) -> tuple[int, float] | None:
        """(bytes the replica grew, seconds) from the oldest earlier reading with its size (`size_before`) to this
        one; None when none has it or this one did not read it. `earlier` is oldest first."""
        first = next(((r, size) for r in earlier
                      if r.at < self.at and (size := r.size_before(replica, self)) is not None), None)
        if first is None or replica not in self.sizes:
            return None
        reading, size = first
        return self.sizes[replica] - size, self.at - reading.at


@dataclass(frozen=True)
class MovingReplica:
    """One adding replica of a move as the readings so far show it: what the progress rule
    (spark_jobs/move_progress.py) reads. Growths are over the network window, from the oldest reading there."""
    topic: str
    partition: int
    broker: int                          # the destination
    leader: int                          # the partition's leader, whose replica this one catches up with
    bytes_behind: int | None             # None: a size unknown now
    lag_seconds: float | None            # since the run of readings in which it is behind began (KAFKA-1546)
    behind_then: int | None = None       # bytes behind at the latest reading at or before now - stuck.after
    replica_growth_bytes: int | None = None
    replica_growth_seconds: float | None = None
    leader_growth_bytes: int | None = None
    leader_growth_seconds: float | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.broker


@dataclass(frozen=True)
class BrokerLoad:
    """Network use of one broker's host in bytes/s; the replication figures are measured when known."""
    tx_bytes_per_sec: float
    rx_bytes_per_sec: float
    replication_tx_bytes_per_sec: float | None = None
    replication_rx_bytes_per_sec: float | None = None

    def used(self, role: str) -> float:
        return self.tx_bytes_per_sec if role == LEADER else self.rx_bytes_per_sec

    def replication(self, role: str) -> float | None:
        return self.replication_tx_bytes_per_sec if role == LEADER else self.replication_rx_bytes_per_sec


@dataclass(frozen=True)
class Overrides:
    """Operator rates (bytes/s) set over the admin API; kept in the cluster so every sidecar sees them."""
    global_rate: int | None = None
    global_autoremove: bool = False
    broker_rates: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicationObservation:
    reassignments: tuple[Reassignment, ...] = ()
    broker_load: Mapping[int, BrokerLoad] = field(default_factory=dict)
    applied_rates: Mapping[int, Mapping[str, int | None]] = field(default_factory=dict)
    overrides: Overrides = Overrides()
    catching_up: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)  # topic -> (p, b)
    moving_replicas: tuple[MovingReplica, ...] = ()  # every adding replica, with its progress so far
    # brokers whose own sidecar sees a dir of theirs at or near the limit (the local watch): guarded now
    guarded: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Observation:
    """What one poll saw, or why it failed."""
    at: datetime
    brokers: tuple[int, ...] = ()
    volumes: tuple[Volume, ...] = ()
    error: str | None = None
    replication: ReplicationObservation | None = None  # when replication throttles are on
    local_samples: tuple[Volume, ...] = ()  # this broker's own dirs between polls (the local watch): fill history
    published_volumes: tuple[Volume, ...] = ()  # the sidecars' znode volumes (zookeeper.connect), for status
    # The producer rate each tenant entity had before the sidecars throttled it (quotas.tenant_rates); None
    # when the poll did not read them
    tenant_rates: Mapping[Entity, float | None] | None = None
    # Every entity's producer quota in force and when the sidecars wrote it (decide/descent.Written); None when
    # the poll did not read them
    producer_rates: Mapping[Entity, object] | None = None
    descent_rate: float | None = None  # the records' rate the descent under way began from, with producer_rates
    # The local verdict holds at the pass's start (a dir of this broker at, or its agent's reaction time from,
    # the limit in the watch's samples): the factor is 0 whatever the volumes polled say.
    held_locally: bool = False


