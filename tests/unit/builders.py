"""Plain data the unit tests build on: a configuration, and what the sidecar publishes after a pass (a
Snapshot), so that status, metrics and the HTTP endpoint are tested on a known state."""

from datetime import datetime, timezone

from quota_sidecar.act.snapshot import Counters, CoverView, ReplicationView, Snapshot
from quota_sidecar.common.observation import BrokerLoad, Overrides, Reassignment, ReplicationObservation, Volume
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide import quotas
from quota_sidecar.decide.decider import Decision
from quota_sidecar.decide.throttle_factor import COMPUTED, FactorState
from quota_sidecar.decide.throttles import BrokerRates, ReplicationDecision

AT = datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc)
MiB = 1 << 20


def sidecar_config(**keys) -> cfg.SidecarConfig:
    """A configuration for broker 3's sidecar; a key given as None is left out."""
    return cfg.from_properties({f"{cfg.PREFIX}{key}": str(value) for key, value in {
        "kafka.admin.bootstrap.servers": "127.0.0.1:9092",
        "storage.per.volume.limit.min.available.bytes": 24 * MiB, "produce": 1_000_000, "broker.id": 3,
        **keys}.items() if value is not None})


def snapshot(replication: bool = False, **changes) -> Snapshot:
    """A Snapshot after a pass that found broker 3's volume violating; `changes` replace its fields."""
    config = sidecar_config(**({"replication.capacity.bytes.per.second": 40_000_000} if replication else {}))
    volumes = (Volume(1, "/data/a", 100 * MiB, 80 * MiB, AT), Volume(3, "/data/b", 64 * MiB, 20 * MiB, AT),
               Volume(2, "/data/c", -1, -1, AT, "KAFKA_STORAGE_ERROR"))
    violation = {"broker_id": 3, "log_dir": "/data/b", "total_bytes": 64 * MiB, "available_bytes": 20 * MiB,
                 "available_ratio": 20 / 64}
    judged = (judged_row(volumes[0], 1024.0, (80 - 24) * MiB / 1024.0),
              judged_row(volumes[1], 2048.0, 0.0, violated=True))
    decision = Decision(AT, 0.0, COMPUTED, AT, quotas.wanted(config.quotas, 0.0), volumes, (violation,), judged)
    view = None
    if replication:
        move = Reassignment("t", 0, (3, 1, 2), adding=(3,), removing=(1,))
        observation = ReplicationObservation((move,), {3: BrokerLoad(1_000.4, 2_000.6, None, 1_500.2)},
                                             {3: {"leader_rate": None, "follower_rate": 9}}, Overrides(7, True))
        moves = (progress("t", 0, 3, 1_288_490_189, 130.0, 6_000_000.0, 1_000_000.0, 250.0, "moving", None),
                 progress("t", 1, 3, 0, 0.0, 0.0, 0.0, 0.0, "caught_up", None),
                 progress("u", 0, 4, 5_000, 300.0, 1_000.0, 2_000.0, None, "stuck", "cannot_keep_up"))
        destinations = {3: {"replicas": 2, "sum_replica_lag_bytes": 1_288_490_189, "eta_seconds": 250.0, "stuck": 0},
                        4: {"replicas": 1, "sum_replica_lag_bytes": 5_000, "eta_seconds": None, "stuck": 1}}
        rates = ReplicationDecision({3: BrokerRates(None, 1, None, "disk_guard")}, {}, moves, destinations)
        view = ReplicationView(3, 40_000_000, observation, rates)
    made = Snapshot(config, FactorState(0.0, COMPUTED, 0.0, AT, AT), decision,
                    Counters(polls=4, poll_failures=1, limit_violations=2, writes=3, last_poll_seconds=0.25),
                    {None: {quotas.PRODUCE: 1.0}, (None, "quota-sidecar"): {quotas.PRODUCE: quotas.UNLIMITED}}, view,
                    cover=CoverView({1: 0.3, 3: 12.5}, (3,)))  # broker 3's agent silent, covered by this one
    return Snapshot(**{**made.__dict__, **changes})


def progress(topic, partition, broker, behind, lag, catch_up, incoming, eta, state, reason) -> dict:
    """An adding replica as the progress rule judges it (spark_jobs.move_progress.MOVE_COLUMNS)."""
    return {"topic": topic, "partition": partition, "broker": broker, "leader": 1, "bytes_behind": behind,
            "lag_seconds": lag, "catch_up_bytes_per_sec": catch_up, "incoming_bytes_per_sec": incoming,
            "eta_seconds": eta, "state": state, "stuck_reason": reason}


def judged_row(volume: Volume, fill: float | None, seconds_to_limit: float | None, violated: bool = False,
               predicted: bool = False, factor: float | None = None) -> dict:
    """A volume as the Spark job judges it (Decision.judged)."""
    return {"broker_id": volume.broker_id, "log_dir": volume.log_dir, "total_bytes": volume.total_bytes,
            "available_bytes": volume.available_bytes, "available_ratio": volume.available_ratio,
            "fill_bytes_per_sec": fill, "seconds_to_limit": seconds_to_limit, "violated": violated,
            "predicted": predicted, "throttle_factor": (0.0 if violated else 1.0) if factor is None else factor}


class Clock:
    """A clock a test moves by hand: calling it gives `now` (AT unless given: a datetime or seconds)."""

    def __init__(self, now=AT):
        self.now = now

    def __call__(self):
        return self.now


class MemoryStore:
    """The records store's interface over a dict (act/cluster_store.py keeps them in the cluster)."""

    def __init__(self):
        self.values: dict[str, dict] = {}

    def put(self, key, value):
        self.values[key] = value

    def delete(self, key):
        self.values.pop(key, None)

    def write_many(self, changes):
        for key, value in changes.items():
            self.delete(key) if value is None else self.put(key, value)

    def read_all(self, create=True):
        return dict(self.values)

    def written_lately(self, key):
        return []


class QuotasInMemory:
    """The client quotas of a cluster, kept in a dict: what DescribeClientQuotas and AlterClientQuotas see."""

    def __init__(self, quotas=None):
        self.quotas = quotas or {}

    def describe_user_quotas(self, entities=None):
        return {entity: dict(self.quotas.get(entity, {})) for entity in (self.quotas if entities is None else entities)}

    def alter_user_quotas(self, changes):
        for entity, keys in changes.items():
            for key, value in keys.items():
                if value is None:
                    self.quotas.get(entity, {}).pop(key, None)
                else:
                    self.quotas.setdefault(entity, {})[key] = value


class OneVolumeAdmin(QuotasInMemory):
    """Broker 1 with one volume, /data, of `total` bytes, `available` of them free; the quotas in memory."""

    def __init__(self, total: int, available: int, quotas=None):
        super().__init__(quotas)
        self.total, self.available = total, available

    def live_broker_ids(self):
        return [1]

    def describe_volumes(self, brokers, now):
        return [Volume(1, "/data", self.total, self.available, now)]

    def close(self):
        pass
