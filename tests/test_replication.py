"""The replication runner's writes, pass after pass, against an in-memory cluster and store.

tests/test_replication_throttles.py runs the same against a real cluster; these catch the same
mistakes in a fraction of a second.
"""

import json
from datetime import datetime, timezone
from types import SimpleNamespace

from quota_sidecar.config import ReplicationConfig
from quota_sidecar.errors import RetryableAdminError
from quota_sidecar.replication import ReplicationRunner
from quota_sidecar.throttles import (COMPUTED, LEADER_RATE, LEADER_REPLICAS, BrokerRates, Reassignment,
                                     ReplicationDecision, ReplicationObservation, throttled_replicas)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
MOVE = Reassignment("t", 0, replicas=(2, 3, 1), adding=(3,), removing=(1,))  # sources 1 and 2


class FakeAdmin:
    """Dynamic configs of topics and brokers, with Kafka's APPEND/SUBTRACT on comma-separated lists."""

    def __init__(self, topics):
        self.configs = {("topic", name): {} for name in topics}
        self.writes = []

    def describe_configs(self, resource_type, names, keys=None):
        found = {}
        for name in map(str, names):
            if resource_type == "topic" and (resource_type, name) not in self.configs:
                raise RetryableAdminError(f"DescribeConfigs of {resource_type} {name!r} failed: [Error 3] "
                                          "UnknownTopicOrPartitionError: This request is for a topic or "
                                          "partition that does not exist on this broker.")
            found[name] = {k: v for k, v in self.configs.get((resource_type, name), {}).items() if k in keys}
        return found

    def incremental_alter_configs(self, resource_type, name, ops):
        configs = self.configs.setdefault((resource_type, str(name)), {})
        for key, (op, value) in ops.items():
            self.writes.append((resource_type, str(name), key, op, value))
            items = [item for item in configs.get(key, "").split(",") if item]
            if op == "APPEND":
                configs[key] = ",".join(items + [v for v in value.split(",") if v not in items])
            elif op == "SUBTRACT":
                configs[key] = ",".join(item for item in items if item not in value.split(","))
            elif op == "SET":
                configs[key] = value
            else:
                configs.pop(key, None)


class FakeStore:
    def __init__(self):
        self.values = {}

    def put(self, key, value):
        self.values[key] = json.loads(json.dumps(value))

    def delete(self, key):
        self.values.pop(key, None)

    def records(self):
        return {tuple(json.loads(key)): value for key, value in self.values.items()}


def runner_for(broker_id, admin, store):
    return ReplicationRunner(SimpleNamespace(replication=ReplicationConfig(capacity_default=100)), broker_id,
                             admin, store, decider=None, sampler=None)


def run_pass(runner, store, moves):
    decision = ReplicationDecision(brokers={1: BrokerRates(leader_rate=50, leader_reason=COMPUTED)} if moves else {},
                                   topics=throttled_replicas(moves))
    runner.apply(decision, ReplicationObservation(reassignments=tuple(moves)), store.records(), set(), NOW)


def test_own_entries_are_added_once_kept_while_the_move_runs_and_removed_after_it():
    admin, store = FakeAdmin(["t"]), FakeStore()
    admin.incremental_alter_configs("topic", "t", {LEADER_REPLICAS: ("APPEND", "0:9")})  # an operator's
    runner = runner_for(1, admin, store)

    run_pass(runner, store, [MOVE])
    run_pass(runner, store, [MOVE])  # the records of the first pass are read back
    assert admin.configs[("topic", "t")][LEADER_REPLICAS] == "0:9,0:1"
    assert admin.configs[("broker", "1")][LEADER_RATE] == "50"
    assert [w for w in admin.writes if w[0] == "topic"][1:] == [("topic", "t", LEADER_REPLICAS, "APPEND", "0:1")]

    run_pass(runner_for(1, admin, store), store, [])  # the move is over; a restarted sidecar
    assert admin.configs[("topic", "t")][LEADER_REPLICAS] == "0:9"
    assert LEADER_RATE not in admin.configs[("broker", "1")]
    assert store.records() == {}


def test_a_deleted_topic_only_drops_the_records_of_its_entries():
    admin, store = FakeAdmin(["t"]), FakeStore()
    runner = runner_for(1, admin, store)
    run_pass(runner, store, [MOVE])
    del admin.configs[("topic", "t")]  # deleted, its configs and its move with it

    run_pass(runner, store, [])

    assert store.records() == {}
    assert LEADER_RATE not in admin.configs[("broker", "1")]
