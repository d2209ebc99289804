"""The replication throttles at run time: observe moves and this host's network, write what changed.

Each sidecar writes only what names its own broker: the `partition:<own id>` entries of the throttled
replica lists, and its own broker's leader/follower rates (and KIP-956 remote-storage quotas). Every
sidecar of the cluster computes the same lists, so together they write each entry exactly once, and a
sidecar knows its own entries after a restart from the records it keeps in the cluster.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime

from . import ownership
from .errors import AdminError, UnknownTopicError
from .loop import of_kind
from .netstats import NetworkSampler
from .throttles import (FOLLOWER, LEADER, LIST_KEY, RATE_KEY, ROLES, BrokerLoad, Overrides, ReplicaSizes,
                        ReplicationDecider, ReplicationDecision, ReplicationObservation, catching_up, growth_rate,
                        measured_replicas)

log = logging.getLogger(__name__)
ENTRIES_RECORD, CONFIG_RECORD, OVERRIDE_RECORD = "entries", "config", "override"
REMOTE_COPY = "remote.log.manager.copy.max.bytes.per.second"
REMOTE_FETCH = "remote.log.manager.fetch.max.bytes.per.second"
UNLIMITED_RATE = 2**63 - 1


class ReplicationRunner:
    def __init__(self, config, broker_id: int, admin, store, decider: ReplicationDecider,
                 sampler: NetworkSampler | None):
        self.config = config.replication
        self.broker_id = broker_id
        self.admin = admin
        self.store = store
        self.decider = decider
        self.sampler = sampler
        self.last_move_seen: datetime | None = None
        self.moves_under_global_override = False
        self.last: ReplicationDecision | None = None
        self.last_observation: ReplicationObservation | None = None
        self.replica_readings: list[ReplicaSizes] = []  # moving replicas' sizes over the network window

    # -------------------------------------------------------------- observe

    def observe(self, records: dict) -> ReplicationObservation:
        moves = tuple(self.admin.list_reassignments())
        overrides = overrides_from(records)
        try:
            applied = {self.broker_id: self._applied_rates()}
        except AdminError as error:  # own broker down: its rates wait, the lists of its replicas do not
            log.warning("broker %d not reachable, its rates wait for it: %s", self.broker_id, error)
            applied = {}
        # A broker override also throttles this broker's out-of-sync replicas: then every topic is read.
        with_override = self.broker_id in overrides.broker_rates
        partitions = self.admin.describe_partitions(None if with_override else {m.topic for m in moves})
        rates = self.sampler.rates() if self.sampler else None
        loads = {}
        if rates is not None:
            leaders = {key: partition.leader for key, partition in partitions.items()}
            loads = {self.broker_id: BrokerLoad(*rates, *self._replication_rates(moves, leaders))}
        observation = ReplicationObservation(
            moves, loads, applied, overrides,
            catching_up(partitions, moves, self.broker_id) if with_override else {})
        self.last_observation = observation
        return observation

    def _replication_rates(self, moves, leaders) -> tuple[float | None, float | None]:
        """(sent, received) replication bytes/s of this broker, from the growth of the moving replicas
        over the network window; None for a role whose replicas have no earlier reading."""
        replicas = measured_replicas(moves, leaders, self.broker_id)
        by_broker: dict[int, dict[str, list[int]]] = {}
        for topic, partition, broker in sorted({r for role in ROLES for r in replicas[role]}):
            by_broker.setdefault(broker, {}).setdefault(topic, []).append(partition)
        sizes = {}
        for broker, partitions in by_broker.items():
            try:
                found = self.admin.describe_replica_sizes(broker, partitions)
            except AdminError as error:  # those replicas count as not measured this time
                log.warning("replica sizes from broker %d: %s", broker, error)
                continue
            sizes.update({(topic, partition, broker): size for (topic, partition), size in found.items()})
        now = ReplicaSizes(time.monotonic(), sizes)
        window = self.config.network_window.total_seconds()
        earlier = [r for r in self.replica_readings if now.at - r.at <= window] or self.replica_readings[-1:]
        self.replica_readings = [*earlier, now]
        return growth_rate(earlier, now, replicas[LEADER]), growth_rate(earlier, now, replicas[FOLLOWER])

    def _applied_rates(self) -> dict[str, int | None]:
        found = self.admin.describe_configs("broker", [self.broker_id], list(RATE_KEY.values())).get(
            str(self.broker_id), {})
        return {f"{role}_rate": _int(found.get(RATE_KEY[role])) for role in ROLES}

    # -------------------------------------------------------------- apply

    def apply(self, decision: ReplicationDecision, observation: ReplicationObservation, records: dict,
              violated_brokers: set[int], now: datetime) -> None:
        self.last = decision
        self._apply_lists(decision, records)
        if self.broker_id in observation.applied_rates:  # read this pass: the broker answers
            self._apply_broker_configs(decision, records, violated_brokers)
            self._clear_foreign_throttles(observation, now)
        self._expire_global_override(observation)

    def _apply_lists(self, decision: ReplicationDecision, records: dict) -> None:
        own = {key[2:]: value["entries"] for key, value in records.items()
               if key[0] == ENTRIES_RECORD and key[1] == self.broker_id}  # (topic, role) -> entries
        topics = sorted(set(decision.topics) | {topic for topic, _ in own})
        if not topics:
            return
        current = self._topic_lists(topics)
        for topic in topics:
            for role in ROLES:
                wanted = {e for e in decision.topics.get(topic, {}).get(role, ()) if _broker_of(e) == self.broker_id}
                self._converge_list(topic, role, wanted, current.get(topic), set(own.get((topic, role), ())))

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

    def _converge_list(self, topic: str, role: str, wanted: set[str], current: dict | None, recorded: set[str]) -> None:
        record_key = json.dumps([ENTRIES_RECORD, self.broker_id, topic, role])
        if current is None:  # the topic is gone, and its configs with it
            if recorded:
                self.store.delete(record_key)
            return
        present = current[role]
        add = set() if "*" in present else wanted - present  # '*' throttles every replica already
        remove = (recorded - wanted) & present
        keep = (recorded & wanted) | add
        if add:
            self.store.put(record_key, {"entries": sorted(recorded | add)})  # before the write: never lose track
            self.admin.incremental_alter_configs("topic", topic, {LIST_KEY[role]: ("APPEND", ",".join(sorted(add)))})
            log.info("topic %s %s: added %s", topic, LIST_KEY[role], ",".join(sorted(add)))
        if remove:
            # The last entries go with the key itself: Kafka would leave an empty value behind.
            op = ("DELETE", None) if present | add <= remove else ("SUBTRACT", ",".join(sorted(remove)))
            self.admin.incremental_alter_configs("topic", topic, {LIST_KEY[role]: op})
            log.info("topic %s %s: removed %s (move done)", topic, LIST_KEY[role], ",".join(sorted(remove)))
        if keep != recorded:
            if keep:
                self.store.put(record_key, {"entries": sorted(keep)})
            else:
                self.store.delete(record_key)

    def _apply_broker_configs(self, decision, records, violated_brokers) -> None:
        rates = decision.brokers.get(self.broker_id)
        wanted = {key: (rates.rate(role) if rates else None) for role, key in RATE_KEY.items()}
        if self.config.remote_copy_rate is not None or self.config.remote_copy_lift_on_violation:
            lift = self.config.remote_copy_lift_on_violation and self.broker_id in violated_brokers
            wanted[REMOTE_COPY] = UNLIMITED_RATE if lift else self.config.remote_copy_rate
        if self.config.remote_fetch_rate is not None:
            wanted[REMOTE_FETCH] = self.config.remote_fetch_rate
        owned = self._owned_configs(records)
        in_force = self._broker_configs(set(wanted) | set(owned))
        writes = ownership.plan({**{k: None for k in owned}, **wanted}, in_force, owned)
        self._write_configs(writes, self._why(rates))

    def _owned_configs(self, records: dict) -> dict[str, float | None]:
        """key -> the value it replaced, for every config of this broker the sidecar set."""
        return {target[1]: replaced for target, replaced in of_kind(records, CONFIG_RECORD).items()
                if target[0] == self.broker_id}

    def _broker_configs(self, keys: set[str]) -> dict[str, float]:
        found = self.admin.describe_configs("broker", [self.broker_id], sorted(keys)).get(str(self.broker_id), {})
        return {key: float(value) for key, value in found.items() if value is not None}

    def _write_configs(self, writes: list[ownership.Write], why: dict, force: bool = False) -> None:
        def set_config(key: str, value: float | None) -> None:
            op = ("DELETE", None) if value is None else ("SET", str(int(value)))
            self.admin.incremental_alter_configs("broker", self.broker_id, {key: op})

        def changed(write: ownership.Write) -> None:
            log.info("broker %d %s: %s -> %s (%s)", self.broker_id, write.target, _shown(write.old),
                     _shown(write.new), why.get(write.target, "configured"))

        ownership.carry_out(writes, self.store, lambda key: json.dumps([CONFIG_RECORD, self.broker_id, key]),
                            set_config, changed, force)

    @staticmethod
    def _why(rates) -> dict[str, str]:
        if rates is None:
            return {key: "no move involves this broker" for key in RATE_KEY.values()}
        return {RATE_KEY[LEADER]: rates.leader_reason or "not a source",
                RATE_KEY[FOLLOWER]: rates.follower_reason or "not a destination"}

    def _expire_global_override(self, observation: ReplicationObservation) -> None:
        """An autoremove global override goes once the moves that ran under it have finished."""
        overrides = observation.overrides
        if overrides.global_rate is None or not overrides.global_autoremove or overrides.broker_rates:
            self.moves_under_global_override = bool(observation.reassignments)
            return  # a broker override freezes automatic clearing, as in autothrottle
        if observation.reassignments:
            self.moves_under_global_override = True
        elif self.moves_under_global_override:
            self.store.delete(json.dumps([OVERRIDE_RECORD, "global"]))
            self.moves_under_global_override = False
            log.info("global throttle override removed: the moves it was set for are done (autoremove)")

    def _clear_foreign_throttles(self, observation: ReplicationObservation, now: datetime) -> None:
        """Opt-in: once no move was seen for a while, clear what other tools left on this broker."""
        if observation.reassignments:
            self.last_move_seen = now
            return
        after = self.config.cleanup_foreign_after
        if after is None or observation.overrides.broker_rates.get(self.broker_id) is not None:
            return
        self.last_move_seen = self.last_move_seen or now
        if now - self.last_move_seen < after:
            return
        leftovers = {key: ("DELETE", None) for key in RATE_KEY.values()
                     if key in self._broker_configs(set(RATE_KEY.values()))}
        if leftovers:
            self.admin.incremental_alter_configs("broker", self.broker_id, leftovers)
            log.info("broker %d: cleared throttle rates left by other tools (%s) after %s without moves",
                     self.broker_id, ", ".join(sorted(leftovers)), after)
        self.last_move_seen = now  # at most once per period

    # -------------------------------------------------------------- clean-up

    def cleanup(self, records: dict) -> None:
        """Remove every entry and rate this broker's sidecar set; put back what they replaced."""
        empty = ReplicationDecision(brokers={}, topics={})
        self._apply_lists(empty, records)
        owned = self._owned_configs(records)
        in_force = self._broker_configs(set(owned))
        self._write_configs(ownership.restore(in_force, owned), {}, force=True)

    def status(self) -> dict:
        observation, decision = self.last_observation, self.last
        rates = decision.brokers.get(self.broker_id) if decision else None
        load = observation.broker_load.get(self.broker_id) if observation else None
        own_roles = sorted({role for m in (observation.reassignments if observation else ())
                            for role, brokers in ((LEADER, m.sources), (FOLLOWER, m.destinations))
                            if self.broker_id in brokers})
        return {
            "moves": [{"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas),
                       "adding": list(m.adding), "removing": list(m.removing)}
                      for m in (observation.reassignments if observation else ())],
            "brokers": [{"broker_id": self.broker_id, "role": "+".join(own_roles) or "none",
                         "tx_bytes_per_sec": _rounded(load and load.tx_bytes_per_sec),
                         "rx_bytes_per_sec": _rounded(load and load.rx_bytes_per_sec),
                         "replication_tx_bytes_per_sec": _rounded(load and load.replication_tx_bytes_per_sec),
                         "replication_rx_bytes_per_sec": _rounded(load and load.replication_rx_bytes_per_sec),
                         "capacity": self.config.capacity(self.broker_id),
                         "leader_rate": rates.leader_rate if rates else None,
                         "follower_rate": rates.follower_rate if rates else None,
                         "reason": (rates.reason if rates else None) or "no throttle"}],
            "overrides": _overrides_json(observation.overrides) if observation else None,
        }


def overrides_from(records: dict) -> Overrides:
    global_record = records.get((OVERRIDE_RECORD, "global"))
    brokers = {key[2]: value["rate"] for key, value in records.items()
               if key[0] == OVERRIDE_RECORD and key[1] == "broker"}
    return Overrides(global_rate=global_record["rate"] if global_record else None,
                     global_autoremove=bool(global_record and global_record.get("autoremove")),
                     broker_rates=brokers)


def _overrides_json(overrides: Overrides) -> dict:
    return {"global": None if overrides.global_rate is None else
            {"rate": overrides.global_rate, "autoremove": overrides.global_autoremove},
            "brokers": {str(b): r for b, r in sorted(overrides.broker_rates.items())}}


def _entries(raw: str | None) -> set[str]:
    return {item.strip() for item in (raw or "").split(",") if item.strip()}


def _broker_of(entry: str) -> int:
    return int(entry.split(":")[1])


def _int(value) -> int | None:
    return None if value in (None, "") else int(float(value))


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)


def _shown(value) -> str:
    return "none" if value is None else f"{value:.0f}"
