"""Replication throttles (KIP-73 + kafka-kit autothrottle): who moves what, throttled-replica lists, rates.

Pure decision code: the lists, the rates and their precedence, and what the runner (replication.py) writes
and lets go of; the rate formula itself is Spark's (spark_jobs/replication_rates.py). A move's sources are its current replicas (replicas minus adding) and its
destinations are the adding replicas, Kafka's own rule in kafka-reassign-partitions. Each source gets
`partition:broker` in the topic's leader list and each destination in its follower list; each broker's
leader (outbound) and follower (inbound) rate follows its measured network headroom.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Iterable, Mapping, Sequence

from ..common.observation import (FOLLOWER, LEADER, ROLES, UNLIMITED, BrokerLoad, Overrides, Partition, Reassignment,
                                  ReplicaSizes, ReplicationObservation)
from ..common.errors import DecisionFailed
from ..common.vocabulary import BROKER_OVERRIDE, DISK_GUARD, FAIL_SAFE, GLOBAL_OVERRIDE, KEPT
from ..configuration.settings import ReplicationConfig

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LIST_KEY = {LEADER: LEADER_REPLICAS, FOLLOWER: FOLLOWER_REPLICAS}
RATE_KEY = {LEADER: LEADER_RATE, FOLLOWER: FOLLOWER_RATE}
# The one rate of all copies between a broker's own log dirs (AlterReplicaLogDirs, JBOD): no list of replicas.
DIR_COPY_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
# KIP-956: the remote (tiered) storage quotas of one broker.
REMOTE_COPY = "remote.log.manager.copy.max.bytes.per.second"
REMOTE_FETCH = "remote.log.manager.fetch.max.bytes.per.second"


def measured_replicas(reassignments: Iterable[Reassignment], leaders: Mapping[tuple[str, int], int],
                      broker: int) -> dict[str, list[tuple[str, int, int]]]:
    """The replicas whose growth is this broker's throttled replication traffic, per role.

    A destination receives into its own adding replicas. Only a partition's leader serves fetches, so
    a source sends what the adding replicas of the partitions it leads receive; the other sources of
    a move are in the leader list only in case leadership moves to them.
    """
    sent = [(m.topic, m.partition, d) for m in reassignments
            if leaders.get((m.topic, m.partition)) == broker for d in m.destinations]
    received = [(m.topic, m.partition, broker) for m in reassignments if broker in m.destinations]
    return {LEADER: sent, FOLLOWER: received}


def link_rates(earlier: Sequence[ReplicaSizes], now: ReplicaSizes) -> tuple[float, float] | None:
    """(sent, received) bytes/s of the host's link from the oldest earlier reading with its counters to now: the
    interval growth_rate measures over, so that the clients' share (link less replication) compares like with like.
    A window of the sampler's own ends up to a period before the pass, and later still when the machine is busy:
    late in a client peak the share then looked smaller than it was and the throttle stayed high."""
    first = next((r for r in earlier if r.link is not None and r.at < now.at), None)
    if first is None or now.link is None:
        return None
    elapsed = now.at - first.at
    return (now.link[0] - first.link[0]) / elapsed, (now.link[1] - first.link[1]) / elapsed


def growth_rate(earlier: Sequence[ReplicaSizes], now: ReplicaSizes,
                replicas: Iterable[tuple[str, int, int]]) -> float | None:
    """Bytes/s the replicas grew by, each since the oldest earlier reading that has it (or had no move adding
    it yet: `ReplicaSizes.size_before`); None when no replica was read before. `earlier` is oldest first.

    A replica that shrank (retention deleted a segment) counts as no growth, and a move that ends
    between two readings drops out: the figure errs low, towards the rate in force.
    """
    replicas = list(replicas)
    if not replicas:
        return 0.0  # not the leader of any moving partition: it sends no throttled traffic
    total, measured = 0.0, False
    for replica in replicas:
        grown = now.grown_since(earlier, replica)
        if grown is None:
            continue
        total += max(grown[0], 0) / grown[1]
        measured = True
    return total if measured else None


def catching_up(partitions: Mapping[tuple[str, int], Partition], reassignments: Iterable[Reassignment],
                broker: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """topic -> (partition, broker) for this broker's replicas out of the ISR and not part of a move.

    A broker back from a restart fetches what it missed as an out-of-sync follower; autothrottle puts
    such replicas in the follower list when the broker has an override, and so do we.
    """
    moving = {(m.topic, m.partition) for m in reassignments}
    found: dict[str, list[tuple[int, int]]] = {}
    for (topic, index), partition in sorted(partitions.items()):
        if broker in partition.replicas and broker not in partition.isr and (topic, index) not in moving:
            found.setdefault(topic, []).append((index, broker))
    return {topic: tuple(replicas) for topic, replicas in found.items()}


@dataclass(frozen=True)
class BrokerRates:
    leader_rate: int | None = None
    follower_rate: int | None = None
    leader_reason: str | None = None
    follower_reason: str | None = None
    cannot_keep_up: tuple[str, ...] = ()  # roles whose keep_up floor is above the cap: KIP-73's upper bound

    @property
    def reason(self) -> str | None:
        reasons = {role: r for role, r in ((LEADER, self.leader_reason), (FOLLOWER, self.follower_reason)) if r}
        if len(set(reasons.values())) <= 1:
            return next(iter(reasons.values()), None)
        return ", ".join(f"{role} {why}" for role, why in reasons.items())

    def rate(self, role: str) -> int | None:
        return self.leader_rate if role == LEADER else self.follower_rate

    def to_json(self) -> dict:
        shown = {"leader_rate": self.leader_rate, "follower_rate": self.follower_rate, "reason": self.reason}
        if self.cannot_keep_up:
            shown["cannot_keep_up"] = list(self.cannot_keep_up)
        return shown


@dataclass(frozen=True)
class ReplicationDecision:
    brokers: Mapping[int, BrokerRates]
    topics: Mapping[str, Mapping[str, tuple[str, ...]]]  # topic -> role -> sorted "p:b" entries
    moves: tuple[Mapping, ...] = ()  # every adding replica's progress (spark_jobs.move_progress.MOVE_COLUMNS)
    destinations: Mapping[int, Mapping] = field(default_factory=dict)  # broker -> replicas, lag sum, slowest ETA
    undecided: str | None = None  # why the aggregator gave no rates: undecided_rates() then

    def to_json(self) -> dict:
        return {
            "brokers": {str(b): rates.to_json() for b, rates in sorted(self.brokers.items())},
            "topics": {topic: {"leader_replicas": list(lists[LEADER]), "follower_replicas": list(lists[FOLLOWER])}
                       for topic, lists in sorted(self.topics.items())},
            "moves": [{key: value for key, value in move.items() if key != "leader"} for move in self.moves],
            "destinations": {str(b): dict(summary) for b, summary in sorted(self.destinations.items())},
        }


def throttled_replicas(reassignments: Iterable[Reassignment],
                       catching_up: Mapping[str, Iterable[tuple[int, int]]] = {}) -> dict[str, dict[str, tuple[str, ...]]]:
    """topic -> {leader: sources, follower: destinations}, as sorted `partition:broker` entries."""
    pairs: dict[str, dict[str, set[tuple[int, int]]]] = {}
    for move in reassignments:
        lists = pairs.setdefault(move.topic, {LEADER: set(), FOLLOWER: set()})
        lists[LEADER].update((move.partition, b) for b in move.sources)
        lists[FOLLOWER].update((move.partition, b) for b in move.destinations)
    for topic, replicas in catching_up.items():
        pairs.setdefault(topic, {LEADER: set(), FOLLOWER: set()})[FOLLOWER].update(replicas)
    return {topic: {role: tuple(f"{p}:{b}" for p, b in sorted(entries)) for role, entries in lists.items()}
            for topic, lists in pairs.items()}


def roles(reassignments: Iterable[Reassignment]) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for move in reassignments:
        for broker in move.sources:
            found.setdefault(broker, set()).add(LEADER)
        for broker in move.destinations:
            found.setdefault(broker, set()).add(FOLLOWER)
    return found


def rate_inputs(observation: ReplicationObservation, config: ReplicationConfig, brokers: Iterable[int],
                failures: Mapping[int, int], involved: Mapping[int, set[str]] | None = None) -> list[dict]:
    """One row per (broker, role) for the Spark rate rule (spark_jobs.replication_rates), each with every
    moving replica, whose progress and keep_up floor the same job computes; the roles are the moves' unless
    `involved` says otherwise."""
    rows = []
    by_broker = roles(observation.reassignments) if involved is None else involved
    moving = [dict(vars(replica)) for replica in observation.moving_replicas]
    for broker in sorted(brokers):
        load = observation.broker_load.get(broker)
        applied = observation.applied_rates.get(broker, {})
        for role in sorted(by_broker.get(broker, ())):
            rows.append({
                "broker_id": broker, "role": role,
                "capacity_bytes": config.capacity(broker) or 0,
                "used_bytes_per_sec": None if load is None else float(load.used(role)),
                "applied_rate": applied.get(f"{role}_rate"),
                "measured_replication_bytes_per_sec": None if load is None else load.replication(role),
                "max_percent": config.max_tx_percent if role == LEADER else config.max_rx_percent,
                "min_rate": config.min_rate,
                "change_threshold_percent": config.change_threshold_percent,
                "consecutive_failures": failures.get(broker, 0),
                "failure_threshold": config.failure_threshold,
                "stuck_after_seconds": config.stuck_after.total_seconds(),
                "keep_up_margin_percent": config.keep_up_margin_percent,
                "moving_replicas": moving,
            })
    return rows


def with_overrides(computed: Mapping[tuple[int, str], tuple[int, str]], overrides: Overrides,
                   involved: Mapping[int, set[str]], guarded: set[int] = frozenset(),
                   disk_guard_rate: int = 1) -> dict[int, BrokerRates]:
    """Precedence: disk guard > broker override > global override > the rule (keep_up, then fail-safe, kept,
    unchanged, computed).

    The disk guard slows a destination whose volume violates the limit, or whose own sidecar sees a dir at or
    near it (`guarded`), to `disk_guard_rate` as a follower. A broker override applies to its broker in both
    roles even without a move (a broker catching up after a restart is throttled as a follower); a global
    override applies to every broker in a move.
    """
    brokers = set(involved) | set(overrides.broker_rates)
    result = {}
    for broker in sorted(brokers):
        chosen: dict[str, tuple[int | None, str | None]] = {}
        for role in ROLES:
            rate, reason = computed.get((broker, role), (None, None))[:2]
            if role == FOLLOWER and broker in guarded and role in involved.get(broker, ()):
                rate, reason = disk_guard_rate, DISK_GUARD
            elif broker in overrides.broker_rates:
                rate, reason = overrides.broker_rates[broker], BROKER_OVERRIDE
            elif role in involved.get(broker, ()) and overrides.global_rate is not None:
                rate, reason = overrides.global_rate, GLOBAL_OVERRIDE
            chosen[role] = (rate, reason)
        # (rate, reason[, keep_up_capped]): the rule says whether even its cap is below the keep_up floor
        capped = tuple(role for role in ROLES if any(computed.get((broker, role), ())[2:]))
        result[broker] = BrokerRates(chosen[LEADER][0], chosen[FOLLOWER][0], chosen[LEADER][1], chosen[FOLLOWER][1],
                                     capped)
    return result


def count_failures(previous: Mapping[int, int], brokers: Iterable[int], loads: Mapping[int, BrokerLoad]) -> dict[int, int]:
    """Consecutive polls in which a broker's network figures could not be read."""
    return {broker: (0 if broker in loads else previous.get(broker, 0) + 1) for broker in brokers}


# rows (rate_inputs) -> {"rates": the rows with rate, reason, keep_up_capped; "moves": every adding replica's
# progress; "destinations": per destination broker}, all from one Spark job
RateJudge = Callable[[list[dict]], dict[str, list[dict]]]


def undecided_rates(rows: Iterable[Mapping]) -> dict[str, list[dict]]:
    """What the rate rule (spark_jobs/replication_rates.py) gives a row it has no figures for, when the aggregator
    gives nothing: the rate in force kept; where none is, the fail-safe rate (replication.min.rate). No progress."""
    return {"rates": [{**row, "rate": row["min_rate"] if row["applied_rate"] is None else row["applied_rate"],
                       "reason": FAIL_SAFE if row["applied_rate"] is None else KEPT, "keep_up_capped": False}
                      for row in rows], "moves": [], "destinations": []}


class ReplicationDecider:
    """Carries the failure counts between polls; the rate and progress arithmetic itself runs in Spark."""

    def __init__(self, config: ReplicationConfig, judge_rates: RateJudge, own_broker: int | None = None):
        self.config = config
        self.judge_rates = judge_rates
        self.own_broker = own_broker  # a running sidecar decides for its own broker; evaluate for all
        self.failures: dict[int, int] = {}

    def question(self, observation: ReplicationObservation, violations: Iterable[Mapping]) -> list[dict]:
        """The rows decide() would give the rate rule with these violations, changing nothing: a pass asks
        them beside its volumes, with the last poll's violations, and decide() takes that answer when its
        own rows are the same."""
        return self._inputs(observation, violations)[0]

    def decide(self, observation: ReplicationObservation, violations: Iterable[Mapping]) -> ReplicationDecision:
        rows, involved, guarded, self.failures = self._inputs(observation, violations)
        undecided = None
        try:
            # No Spark job while no broker decided here takes part in a move: the moves' progress waits too.
            judged = self.judge_rates(rows) if rows else {"rates": [], "moves": [], "destinations": []}
        except DecisionFailed as failure:  # a move the aggregator has not decided yet is not left unthrottled
            judged, undecided = undecided_rates(rows), f"decision failed: {failure}"
        computed = {(row["broker_id"], row["role"]): (row["rate"], row["reason"], row["keep_up_capped"])
                    for row in judged["rates"]}
        overrides = observation.overrides
        if self.own_broker is not None:
            involved = {b: r for b, r in involved.items() if b == self.own_broker}
            overrides = Overrides(overrides.global_rate, overrides.global_autoremove,
                                  {b: r for b, r in overrides.broker_rates.items() if b == self.own_broker})
        return ReplicationDecision(
            brokers=with_overrides(computed, overrides, involved, guarded, self.config.disk_guard_rate),
            topics=throttled_replicas(observation.reassignments, observation.catching_up),
            moves=tuple(judged["moves"]),
            destinations={row["broker"]: {key: value for key, value in row.items() if key != "broker"}
                          for row in judged["destinations"]},
            undecided=undecided,
        )

    def _inputs(self, observation: ReplicationObservation, violations: Iterable[Mapping]):
        """(the rule's rows, the roles of each broker involved, the guarded brokers, the failure counts)."""
        involved = roles(observation.reassignments)
        guarded = {v["broker_id"] for v in violations} | observation.guarded
        for replicas in observation.catching_up.values():  # a broker catching up outside any move, when
            for _, broker in replicas:                       # asked or guarded, is a destination too
                if self.config.throttle_catch_up or broker in guarded:
                    involved.setdefault(broker, set()).add(FOLLOWER)
        deciding = set(involved) if self.own_broker is None else set(involved) & {self.own_broker}
        failures = count_failures(self.failures, deciding, observation.broker_load)
        return rate_inputs(observation, self.config, deciding, failures, involved), involved, guarded, failures


# ---------------------------------------------------------------- what the runner writes and lets go of

def wanted_broker_configs(rates: BrokerRates | None, config: ReplicationConfig,
                          violating: bool, guarding_dir_copies: bool = False) -> dict[str, int | None]:
    """This broker's dynamic configs: its two rates (None: no throttle from the sidecar) and the KIP-956
    quotas when configured; the copy quota is lifted (unlimited) while a volume of the broker violates the
    limit, when asked, so that uploads free local disk sooner. `guarding_dir_copies`: the disk guard holds the
    copies between the broker's dirs (local_guard.py) and keeps doing so while the broker is guarded."""
    wanted = {key: (rates.rate(role) if rates else None) for role, key in RATE_KEY.items()}
    if guarding_dir_copies:
        wanted[DIR_COPY_RATE] = config.disk_guard_rate
    if config.remote_copy_rate is not None or config.remote_copy_lift_on_violation:
        lift = config.remote_copy_lift_on_violation and violating
        wanted[REMOTE_COPY] = UNLIMITED if lift else config.remote_copy_rate
    if config.remote_fetch_rate is not None:
        wanted[REMOTE_FETCH] = config.remote_fetch_rate
    return wanted


def config_reasons(rates: BrokerRates | None) -> dict[str, str]:
    """Why each rate key is what it is, for the log line of a change."""
    if rates is None:
        return {key: "no move involves this broker" for key in RATE_KEY.values()}
    return {LEADER_RATE: rates.leader_reason or "not a source", FOLLOWER_RATE: rates.follower_reason or "not a destination"}


@dataclass(frozen=True)
class ListChange:
    """How one broker's sidecar changes one throttled-replica list of one topic."""
    add: frozenset[str]
    remove: frozenset[str]
    delete_key: bool            # the last entries go with the key itself: Kafka would leave '' behind
    recorded: frozenset[str]    # the entries the sidecar owns afterwards


def list_change(wanted: Iterable[str], present: set[str], recorded: set[str]) -> ListChange:
    """Add what is wanted and missing ('*' throttles every replica already); remove only what this sidecar
    added and no longer wants, and only while it is still there: other tools' entries stay."""
    wanted = set(wanted)
    add = set() if "*" in present else wanted - present
    remove = (recorded - wanted) & present
    return ListChange(frozenset(add), frozenset(remove), bool(remove) and present | add <= remove,
                      frozenset((recorded & wanted) | add))


def entries_of(entries: Iterable[str], broker: int) -> set[str]:
    """The `partition:broker` entries that name this broker: the ones its sidecar writes."""
    return {entry for entry in entries if int(entry.split(":")[1]) == broker}


def global_override_expired(overrides: Overrides, moving: bool, moved_under_it: bool) -> tuple[bool, bool]:
    """(the autoremove global override goes now, moves were seen under it). It goes once the moves that ran
    under it have finished; a broker override freezes automatic clearing, as in autothrottle."""
    if overrides.global_rate is None or not overrides.global_autoremove or overrides.broker_rates:
        return False, moving
    if moving:
        return False, True
    return moved_under_it, False


def foreign_cleanup_due(moving: bool, broker_override: bool, last_move_seen: datetime | None, now: datetime,
                        after: timedelta | None) -> tuple[bool, datetime | None]:
    """(clear the rates other tools left on this broker now, when a move was last seen). Opt-in (`after`),
    once no move was seen for that long and no broker override is set; at most once per period."""
    if moving:
        return False, now
    if after is None or broker_override:
        return False, last_move_seen
    last_move_seen = last_move_seen or now
    if now - last_move_seen < after:
        return False, last_move_seen
    return True, now
