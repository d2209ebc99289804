"""Prometheus metrics, read from the sidecar's state at scrape time through a custom collector.

Names follow proposal 047's metrics (ThrottleFactor, FallbackThrottleFactorApplied, LimitViolated,
ActiveBrokers, ActiveLogDirs) in Prometheus style, plus the available bytes of every volume, its fill rate
and its time to the limit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..act.snapshot import Snapshot
from ..common.vocabulary import CANNOT_KEEP_UP, NO_PROGRESS
from ..decide.quotas import entity_label

NAMESPACE = "quota_sidecar"


class SidecarCollector:
    """Reads the sidecar's last published snapshot at each scrape."""

    def __init__(self, snapshot: Callable[[], Snapshot]):
        self.snapshot = snapshot

    def collect(self):
        snapshot = self.snapshot()
        counters = snapshot.counters
        decision = snapshot.decision
        factor = snapshot.factor
        yield _gauge("throttle_factor", "Throttle factor in force (1.0 = no throttle, 0.0 = producers stopped).",
                     factor.factor)
        refused = GaugeMetricFamily(f"{NAMESPACE}_permission_refused",
                                    "1 for each permission Kafka's authorizer refused this process in its last passes "
                                    "(status says what stops without it).", labels=["permission"])
        for refusal in snapshot.refused:
            refused.add_metric([refusal.permission], 1)
        yield refused
        source = GaugeMetricFamily(f"{NAMESPACE}_throttle_factor_source",
                                   "Where the factor in force comes from (1 for the current source): initial, "
                                   "computed, last_valid or fallback.", labels=["source"])
        source.add_metric([factor.source], 1)
        yield source
        yield _quotas_in_force(snapshot.quotas_in_force)
        yield _gauge("tenant_quotas", "Quota entities above the default user with a producer rate of their own.",
                     snapshot.tenants.with_a_rate_of_their_own)
        yield _gauge("tenant_quotas_throttled", "Of those, the ones whose producer rate in force is the throttle's.",
                     snapshot.tenants.throttled)
        yield _gauge("descending", "1 while a volume fills within the descent's start or horizon: producer quotas "
                     "come down in steps to produce.floor.", int(bool(decision and decision.descending)))
        yield _gauge("last_resort", "1 while a producer quota the sidecars wrote is the hard limit's 1 B/s: Java "
                     "producers of its principals stay silent until restarted, even after the lift.",
                     int(snapshot.last_resort is not None))
        yield _counter("last_resort_episodes", "Times this sidecar saw the hard limit's 1 B/s producer quota go in force.",
                       counters.last_resort_episodes)
        yield _counter("fallback_applied", "Times the fallback throttle factor took over.", counters.fallback_applied)
        yield _counter("limit_violated", "Volumes found violating the storage limit, summed over polls.",
                       counters.limit_violations)
        yield _counter("moves_cancelled", "Moves onto this broker cancelled because the disk guard could not hold "
                       "its free space.", counters.moves_cancelled)
        yield _counter("polls", "Polls of the cluster.", counters.polls)
        yield _counter("poll_failures", "Polls that could not see the whole cluster.", counters.poll_failures)
        yield _counter("pass_failures", "Loop passes that raised; the loop went on.", counters.pass_failures)
        yield _counter("writes", "Client quota values written to the cluster (replication configs are only logged).",
                       counters.writes)
        yield _gauge("poll_duration_seconds", "Wall time of the last pass.", counters.last_poll_seconds)
        if factor.last_success_at is not None:
            yield _gauge("last_success_timestamp_seconds", "When the last poll succeeded.",
                         factor.last_success_at.timestamp())
        yield from _aggregation(snapshot.last_aggregation)
        if snapshot.cover is not None:
            yield _gauge("covered_brokers", "Brokers whose agent is down that this agent covers (watches their "
                         "volumes with DescribeLogDirs).", len(snapshot.cover.covering))
        if decision is None:
            return
        yield _gauge("active_brokers", "Brokers whose volumes the last decision considered.", decision.active_brokers)
        yield _gauge("active_log_dirs", "Usable log dirs the last decision considered.", decision.active_log_dirs)
        available = GaugeMetricFamily(f"{NAMESPACE}_volume_available_bytes", "Available bytes of each volume.",
                                      labels=["broker_id", "log_dir"])
        total = GaugeMetricFamily(f"{NAMESPACE}_volume_total_bytes", "Total bytes of each volume.",
                                  labels=["broker_id", "log_dir"])
        for volume in decision.volumes:
            if volume.usable:
                labels = [str(volume.broker_id), volume.log_dir]
                available.add_metric(labels, volume.available_bytes)
                total.add_metric(labels, volume.total_bytes)
        yield available
        yield total
        yield from _forecast(decision.judged)
        replication = snapshot.replication
        if replication is not None and replication.decision is not None:
            yield _replication_rates(replication.decision)
            yield from _moves(replication.decision)
        if replication is not None and replication.observation is not None:
            yield _gauge("moves_in_progress", "Partition moves (reassignments) in progress in the cluster.",
                         len(replication.observation.reassignments))
            yield from _network_use(replication.observation)


def _forecast(judged):
    """Each judged volume's fill rate and time to the limit; a volume without one (too few measurements,
    not filling) has no sample."""
    fill = GaugeMetricFamily(f"{NAMESPACE}_volume_fill_bytes_per_second",
                             "Bytes/s each volume fills: the least-squares slope of its available bytes over the "
                             "fill window, negated (negative while it frees space).", labels=["broker_id", "log_dir"])
    to_limit = GaugeMetricFamily(f"{NAMESPACE}_volume_seconds_to_limit",
                                 "Seconds until each filling volume reaches the limit at its fill rate (0 at it).",
                                 labels=["broker_id", "log_dir"])
    for row in judged:
        labels = [str(row["broker_id"]), row["log_dir"]]
        if row["fill_bytes_per_sec"] is not None:
            fill.add_metric(labels, row["fill_bytes_per_sec"])
        if row["seconds_to_limit"] is not None:
            to_limit.add_metric(labels, row["seconds_to_limit"])
    yield fill
    yield to_limit


def _quotas_in_force(in_force) -> GaugeMetricFamily:
    quotas = GaugeMetricFamily(f"{NAMESPACE}_client_quota", "Client quotas in force that the sidecar manages, "
                               "as last read from the cluster (9.2e18 = Kafka's unlimited).", labels=["entity", "quota"])
    for entity, keys in in_force.items():
        for key, value in keys.items():
            quotas.add_metric([entity_label(entity), key], value)
    return quotas


def _replication_rates(decision) -> GaugeMetricFamily:
    rates = GaugeMetricFamily(f"{NAMESPACE}_replication_throttle_rate_bytes",
                              "Replication throttle rate this sidecar wants in force, and why.",
                              labels=["broker_id", "role", "reason"])
    for broker_id, broker in decision.brokers.items():
        for role, rate, reason in (("leader", broker.leader_rate, broker.leader_reason),
                                   ("follower", broker.follower_rate, broker.follower_reason)):
            if rate is not None:
                rates.add_metric([str(broker_id), role, reason], rate)
    return rates


def _moves(decision):
    """Every adding replica's lag in bytes and time (KAFKA-1546) and ETA; per destination its SumReplicaLag
    (KIP-73) and its stuck replicas by reason. A figure not known (no second reading, a move that never ends
    at the present rates) has no sample."""
    labels = ["topic", "partition", "broker"]
    lag = GaugeMetricFamily(f"{NAMESPACE}_replica_lag_bytes", "Bytes each adding replica is behind its leader.",
                            labels=labels)
    lag_time = GaugeMetricFamily(f"{NAMESPACE}_replica_lag_seconds",
                                 "Seconds since each adding replica was last caught up with its leader.", labels=labels)
    eta = GaugeMetricFamily(f"{NAMESPACE}_replica_eta_seconds",
                            "Seconds until each adding replica catches up at the present rates.", labels=labels)
    total = GaugeMetricFamily(f"{NAMESPACE}_sum_replica_lag_bytes",
                              "Bytes the adding replicas of each destination broker are behind (KIP-73 SumReplicaLag).",
                              labels=["broker_id"])
    stuck = GaugeMetricFamily(f"{NAMESPACE}_stuck_replicas", "Adding replicas reported stuck, by destination and why.",
                              labels=["broker_id", "reason"])
    stuck_counts: dict[tuple[str, str], int] = {}
    for move in decision.moves:
        replica = [move["topic"], str(move["partition"]), str(move["broker"])]
        for family, value in ((lag, move["bytes_behind"]), (lag_time, move["lag_seconds"]), (eta, move["eta_seconds"])):
            if value is not None:
                family.add_metric(replica, value)
        if move["stuck_reason"] is not None:
            key = (str(move["broker"]), move["stuck_reason"])
            stuck_counts[key] = stuck_counts.get(key, 0) + 1
    for broker_id, summary in sorted(decision.destinations.items()):
        if summary["sum_replica_lag_bytes"] is not None:
            total.add_metric([str(broker_id)], summary["sum_replica_lag_bytes"])
        for reason in (CANNOT_KEEP_UP, NO_PROGRESS):
            stuck.add_metric([str(broker_id), reason], stuck_counts.get((str(broker_id), reason), 0))
    yield from (lag, lag_time, eta, total, stuck)


def _network_use(observation):
    """This host's measured bytes/s, all traffic and the replication within it (what the rule reads)."""
    total = GaugeMetricFamily(f"{NAMESPACE}_network_bytes_per_second",
                              "Bytes/s this host sent (tx) and received (rx), averaged over the network window.",
                              labels=["broker_id", "direction"])
    replication = GaugeMetricFamily(f"{NAMESPACE}_replication_measured_bytes_per_second",
                                    "Throttled replication bytes/s this broker sent (tx) and received (rx), "
                                    "from the growth of the moving replicas.", labels=["broker_id", "direction"])
    for broker_id, load in observation.broker_load.items():
        for direction, used, moved in (("tx", load.tx_bytes_per_sec, load.replication_tx_bytes_per_sec),
                                       ("rx", load.rx_bytes_per_sec, load.replication_rx_bytes_per_sec)):
            total.add_metric([str(broker_id), direction], used)
            if moved is not None:
                replication.add_metric([str(broker_id), direction], moved)
    yield total
    yield replication


def registry_for(snapshot: Callable[[], Snapshot]) -> CollectorRegistry:
    """A registry of its own (never the global one) that reads `snapshot()` at each scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SidecarCollector(snapshot))
    return registry


def _aggregation(last: dict | None):
    """With an aggregator: when it made the last decision for this agent, and how long after the observation."""
    if not last:
        return
    decided, observed = (datetime.fromisoformat(last[key]) for key in ("decided_at", "observed_at"))
    yield _gauge("aggregator_decision_timestamp_seconds", "When the aggregator made its last decision for this "
                 "agent (its age: time() minus this).", decided.timestamp())
    yield _gauge("pipeline_lag_seconds", "Of the last decision: from the observation to the aggregator's decision.",
                 (decided - observed).total_seconds())


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{NAMESPACE}_{name}", documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{NAMESPACE}_{name}", documentation, value=value)
