"""The replication throttles at run time: read moves, sizes and this host's network; write what throttles.py decided.

Each sidecar writes only what names its own broker: the `partition:<own id>` entries of the throttled
replica lists, and its own broker's leader/follower rates (and KIP-956 remote-storage quotas). Every
sidecar of the cluster computes the same lists, so together they write each entry exactly once, and a
sidecar knows its own entries after a restart from the records it keeps in the cluster (records.py).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Iterable

from ..common import records
from ..common.errors import AdminError, UnknownTopicError
from ..common.observation import FOLLOWER, LEADER, ROLES, BrokerLoad, Reassignment, ReplicaSizes, ReplicationObservation
from ..common.vocabulary import DISK_GUARD, KEPT, UNCHANGED
from ..configuration.settings import ReplicationConfig
from ..decide.throttles import (DIR_COPY_RATE, FOLLOWER_RATE, LIST_KEY, RATE_KEY, ReplicationDecider,
                                ReplicationDecision, catching_up, config_reasons, entries_of, foreign_cleanup_due,
                                global_override_expired, growth_rate, link_rates, list_change, measured_replicas,
                                throttled_replicas, wanted_broker_configs)
from ..observe.moves import MoveHistory, MoveLog, replicas_to_read, within
from ..observe.netstats import NetworkSampler
from . import ownership
from .snapshot import ReplicationView

log = logging.getLogger(__name__)

DIR_COPY_GUARD = f"{DISK_GUARD}: a copy between this broker's log dirs into a dir at or near the limit"


class ReplicationRunner:
    def __init__(self, config: ReplicationConfig, broker_id: int, admin, store, decider: ReplicationDecider,
                 sampler: NetworkSampler | None, clock=time.monotonic):
        self.config = config
        self.broker_id = broker_id
        self.admin = admin
        self.store = store
        self.decider = decider
        self.sampler = sampler
        self.clock = clock  # monotonic seconds, for the growth of the moving replicas
        self.last_move_seen: datetime | None = None
        self.moved_under_global_override = False
        self.last: ReplicationDecision | None = None
        self.last_observation: ReplicationObservation | None = None
        self.history = MoveHistory(config.network_window, config.stuck_after)  # the moving replicas' sizes
        self.move_log = MoveLog(broker_id)

    runs_between_polls = True  # replication passes come between the storage polls

    def view(self) -> ReplicationView:
        return ReplicationView(self.broker_id, self.config.capacity(self.broker_id), self.last_observation, self.last)

    def show(self, decision: ReplicationDecision | None) -> None:
        """What a pass would write, shown rather than written (status --direct)."""
        self.last = decision

    # -------------------------------------------------------------- read

    def observe(self, all_records: records.Records, guarded: bool = False) -> ReplicationObservation:
        """`guarded`: this broker's disk guard is on (a dir of it at or near the limit); its catch-ups are throttled."""
        moves = tuple(self.admin.list_reassignments())
        overrides = records.overrides(all_records)
        try:
            applied = {self.broker_id: self._applied_rates()}
        except AdminError as error:  # own broker down: its rates wait, the lists of its replicas do not
            log.warning("broker %d not reachable, its rates wait for it: %s", self.broker_id, error)
            applied = {}
        # A broker override, replication.throttle.catch.up or the disk guard also throttles this broker's
        # out-of-sync replicas: then every topic is read.
        with_override = self.broker_id in overrides.broker_rates or self.config.throttle_catch_up or guarded
        partitions = self.admin.describe_partitions(None if with_override else {m.topic for m in moves})
        leaders = {key: partition.leader for key, partition in partitions.items()}
        sizes = self._replica_sizes(replicas_to_read(moves, leaders))
        adding = frozenset((m.topic, m.partition, broker) for m in moves for broker in m.destinations)
        now = ReplicaSizes(self.clock(), sizes, self.sampler.counters() if self.sampler else None, adding)
        earlier = within(self.history.readings, now.at, self.config.network_window.total_seconds())
        # The link over the replicas' growth interval; the sampler's own window until two passes have read it.
        rates = (link_rates(earlier, now) or self.sampler.rates()) if self.sampler else None
        progress = self.history.record(moves, leaders, now)
        loads = {}
        if rates is not None:  # (sent, received): the growth of the replicas this broker sends and receives
            replicas = measured_replicas(moves, leaders, self.broker_id)
            loads = {self.broker_id: BrokerLoad(*rates, growth_rate(earlier, now, replicas[LEADER]),
                                                growth_rate(earlier, now, replicas[FOLLOWER]))}
        observation = ReplicationObservation(
            moves, loads, applied, overrides,
            catching_up(partitions, moves, self.broker_id) if with_override else {}, progress,
            frozenset({self.broker_id}) if guarded else frozenset())
        self.last_observation = observation
        return observation

    def _replica_sizes(self, replicas: set[tuple[str, int, int]]) -> dict[tuple[str, int, int], int]:
        """The sizes of the replicas from their brokers (DescribeLogDirs); a broker that does not answer
        leaves its replicas unread this time."""
        by_broker: dict[int, dict[str, list[int]]] = {}
        for topic, partition, broker in sorted(replicas):
            by_broker.setdefault(broker, {}).setdefault(topic, []).append(partition)
        sizes = {}
        for broker, partitions in by_broker.items():
            try:
                found = self.admin.describe_replica_sizes(broker, partitions)
            except AdminError as error:
                log.warning("replica sizes from broker %d: %s", broker, error)
                continue
            sizes.update({(topic, partition, broker): size for (topic, partition), size in found.items()})
        return sizes

    def _applied_rates(self) -> dict[str, int | None]:
        found = self._broker_configs(set(RATE_KEY.values()))
        return {f"{role}_rate": _int(found.get(RATE_KEY[role])) for role in ROLES}

    def _broker_configs(self, keys: set[str]) -> dict[str, float]:
        if not keys:  # no key at all would ask for every dynamic config of the broker (cordoned.log.dirs too)
            return {}
        found = self.admin.describe_configs("broker", [self.broker_id], sorted(keys)).get(str(self.broker_id), {})
        return {key: float(value) for key, value in found.items() if value is not None}

    def _topic_lists(self, topics: list[str]) -> dict[str, dict[str, set[str]] | None]:
        """topic -> role -> entries in force; None for a topic that no longer exists."""
        lists = {}
        for topic in topics:
            try:
                configs = self.admin.describe_configs("topic", [topic], list(LIST_KEY.values())).get(topic, {})
            except UnknownTopicError:
                lists[topic] = None
                continue
            lists[topic] = {role: _entries(configs.get(LIST_KEY[role])) for role in ROLES}
        return lists

    # -------------------------------------------------------------- write

    def apply(self, decision: ReplicationDecision, observation: ReplicationObservation, all_records: records.Records,
              violated_brokers: set[int], now: datetime) -> None:
        self.last = decision
        own = decision.brokers.get(self.broker_id)
        self.move_log.after(decision.moves, own.cannot_keep_up if own else (), self.clock())
        self._apply_lists(decision, all_records)
        if self.broker_id in observation.applied_rates:  # read this pass: the broker answers
            rates = decision.brokers.get(self.broker_id)
            guarding_dir_copies = (self.broker_id in observation.guarded
                                   and DIR_COPY_RATE in records.owned_configs(all_records, self.broker_id))
            wanted = wanted_broker_configs(rates, self.config, self.broker_id in violated_brokers, guarding_dir_copies)
            why = DIR_COPY_GUARD if guarding_dir_copies else "no copy between this broker's dirs to guard"
            reasons = config_reasons(rates)
            kept = {key for key, reason in reasons.items() if reason in (UNCHANGED, KEPT)}
            self._apply_broker_configs(wanted, all_records, {**reasons, DIR_COPY_RATE: why}, keep_in_force=kept)
            self._clear_foreign_throttles(observation, now)
        expired, self.moved_under_global_override = global_override_expired(
            observation.overrides, bool(observation.reassignments), self.moved_under_global_override)
        if expired:
            self.store.delete(records.override_key(None))
            log.info("global throttle override removed: the moves it was set for are done (autoremove)")

    def _apply_lists(self, decision: ReplicationDecision, all_records: records.Records) -> None:
        own = records.owned_entries(all_records, self.broker_id)
        topics = sorted(set(decision.topics) | {topic for topic, _ in own})
        if not topics:
            return
        current = self._topic_lists(topics)
        for topic in topics:
            for role in ROLES:
                record_key = records.key(records.ENTRIES, self.broker_id, topic, role)
                recorded = own.get((topic, role), set())
                if current[topic] is None:  # the topic is gone, and its configs with it
                    if recorded:
                        self.store.delete(record_key)
                    continue
                wanted = entries_of(decision.topics.get(topic, {}).get(role, ()), self.broker_id)
                self._change_list(topic, role, record_key, recorded, list_change(wanted, current[topic][role], recorded))

    def _change_list(self, topic: str, role: str, record_key: str, recorded: set[str], change) -> None:
        if change.add:
            self.store.put(record_key, {"entries": sorted(recorded | change.add)})  # before the write: never lose track
            self.admin.incremental_alter_configs("topic", topic, {LIST_KEY[role]: ("APPEND", ",".join(sorted(change.add)))})
            log.info("topic %s %s: added %s", topic, LIST_KEY[role], ",".join(sorted(change.add)))
        if change.remove:
            op = ("DELETE", None) if change.delete_key else ("SUBTRACT", ",".join(sorted(change.remove)))
            self.admin.incremental_alter_configs("topic", topic, {LIST_KEY[role]: op})
            log.info("topic %s %s: removed %s (move done)", topic, LIST_KEY[role], ",".join(sorted(change.remove)))
        if change.recorded != recorded:
            if change.recorded:
                self.store.put(record_key, {"entries": sorted(change.recorded)})
            else:
                self.store.delete(record_key)

    def _apply_broker_configs(self, wanted: dict[str, int | None], all_records: records.Records,
                              why: dict[str, str], let_go: bool = True, keep_in_force: set[str] = frozenset()) -> None:
        """Write `wanted`; with `let_go`, hand back every other config the sidecar set (else they stay). The keys of
        `keep_in_force` (the rule kept the rate in force) keep what the broker shows now: the pass read the rate in
        force before the last pass's write had reached the broker, at times, and wrote that older rate back."""
        def planned(all_records: records.Records) -> list[ownership.Write]:
            owned = records.owned_configs(all_records, self.broker_id)
            in_force = self._broker_configs(set(wanted) | set(owned))
            kept = {key: in_force[key] for key in keep_in_force if in_force.get(key) is not None}
            return ownership.plan({**{key: None for key in owned if let_go}, **wanted, **kept}, in_force, owned)

        self._write_configs(ownership.with_second_look(planned, all_records, self._read_records), why)

    def _read_records(self) -> records.Records:
        return records.parse(self.store.read_all())

    def _write_configs(self, writes: list[ownership.Write], why: dict[str, str], force: bool = False) -> None:
        def set_config(key: str, value: float | None) -> None:
            op = ("DELETE", None) if value is None else ("SET", str(int(value)))
            self.admin.incremental_alter_configs("broker", self.broker_id, {key: op})

        def changed(write: ownership.Write) -> None:
            if write.left_alone:
                log.info("broker %d %s: %s", self.broker_id, write.target, ownership.left_alone_reason(write, _shown))
                return
            log.info("broker %d %s: %s -> %s (%s)", self.broker_id, write.target, _shown(write.old),
                     _shown(write.new), why.get(write.target, "configured"))

        ownership.carry_out(writes, self.store, lambda key: records.key(records.CONFIG, self.broker_id, key),
                            set_config, changed, force)

    def _clear_foreign_throttles(self, observation: ReplicationObservation, now: datetime) -> None:
        due, self.last_move_seen = foreign_cleanup_due(
            bool(observation.reassignments), self.broker_id in observation.overrides.broker_rates,
            self.last_move_seen, now, self.config.cleanup_foreign_after)
        if not due:
            return
        leftovers = {key: ("DELETE", None) for key in self._broker_configs(set(RATE_KEY.values()))}
        if leftovers:
            self.admin.incremental_alter_configs("broker", self.broker_id, leftovers)
            log.info("broker %d: cleared throttle rates left by other tools (%s) after %s without moves",
                     self.broker_id, ", ".join(sorted(leftovers)), self.config.cleanup_foreign_after)

    # -------------------------------------------------------------- the disk guard, before any pass decides

    def write_the_guard(self, all_records: records.Records) -> tuple[tuple[Reassignment, ...], dict]:
        """This broker's follower rate at the guard rate, and its replicas being added or catching up outside the
        ISR in the follower lists, added to what is there (what goes waits for a pass). For the cancel
        (local_guard.py): the moves adding replicas to this broker, and (topic, partition) -> leader of every
        guarded replica."""
        moves = self.admin.list_reassignments()
        partitions = self.admin.describe_partitions(None)
        incoming = tuple(move for move in moves if self.broker_id in move.destinations)
        catch_ups = catching_up(partitions, moves, self.broker_id)
        guarded = [(m.topic, m.partition) for m in incoming] + [(t, p) for t, pairs in catch_ups.items() for p, _ in pairs]
        leaders = {key: partitions[key].leader for key in guarded if key in partitions}
        lists = throttled_replicas(incoming, catch_ups)
        if not lists:
            return incoming, leaders
        self._apply_broker_configs({FOLLOWER_RATE: self.config.disk_guard_rate}, all_records,
                                   {FOLLOWER_RATE: f"{DISK_GUARD}: a local dir at or near the limit"}, let_go=False)
        own = records.owned_entries(all_records, self.broker_id)
        current = self._topic_lists(sorted(lists))
        for topic, roles in lists.items():
            if current[topic] is None:  # deleted meanwhile
                continue
            recorded = own.get((topic, FOLLOWER), set())
            wanted = entries_of(roles[FOLLOWER], self.broker_id) | recorded
            self._change_list(topic, FOLLOWER, records.key(records.ENTRIES, self.broker_id, topic, FOLLOWER), recorded,
                              list_change(wanted, current[topic][FOLLOWER], recorded))
        return incoming, leaders

    def guard_dir_copies(self, all_records: records.Records,
                         at_risk: Iterable[str]) -> dict[tuple[str, int], tuple[str, str]]:
        """This broker's copies between its own log dirs into a dir at risk, (topic, partition) -> (the dir it is
        copied into, the dir it is in); while there are any, the broker's copy rate at the guard rate (recorded
        first, as every write; kept by each pass while the broker is guarded)."""
        at_risk = set(at_risk)
        copies = {partition: dirs for partition, dirs in self.admin.describe_dir_moves(self.broker_id).items()
                  if dirs[0] in at_risk}
        if copies:
            self._apply_broker_configs({DIR_COPY_RATE: self.config.disk_guard_rate}, all_records,
                                       {DIR_COPY_RATE: DIR_COPY_GUARD}, let_go=False)
        return copies

    # -------------------------------------------------------------- clean-up

    def cleanup(self, all_records: records.Records) -> None:
        """Remove every entry and rate this broker's sidecar set; hand back what they replaced (ownership.py)."""
        self._apply_lists(ReplicationDecision(brokers={}, topics={}), all_records)

        def planned(all_records: records.Records) -> list[ownership.Write]:
            owned = records.owned_configs(all_records, self.broker_id)
            return ownership.restore(self._broker_configs(set(owned)), owned)

        self._write_configs(ownership.with_second_look(planned, all_records, self._read_records), {}, force=True)

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()


class NoReplication:
    """Without replication throttles: no moves observed, nothing written."""

    decider = None
    runs_between_polls = False

    def view(self) -> None:
        return None

    def show(self, decision: ReplicationDecision | None) -> None:
        pass

    def observe(self, all_records: records.Records, guarded: bool = False) -> None:
        return None

    def apply(self, decision, observation, all_records: records.Records, violated: set[int], now: datetime) -> None:
        pass

    def cleanup(self, all_records: records.Records) -> None:
        pass

    def close(self) -> None:
        pass


def _entries(raw: str | None) -> set[str]:
    return {item.strip() for item in (raw or "").split(",") if item.strip()}


def _int(value) -> int | None:
    return None if value is None else int(value)


def _shown(value) -> str:
    return "none" if value is None else f"{value:.0f}"
