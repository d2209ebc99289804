"""What the replication runner writes of a decision (act/replication.py), against an admin that keeps the brokers'
dynamic configs in a dict."""

from datetime import datetime, timezone

from builders import MemoryStore

from quota_sidecar.act.replication import ReplicationRunner
from quota_sidecar.common import records
from quota_sidecar.common.observation import Reassignment, ReplicationObservation
from quota_sidecar.common.vocabulary import COMPUTED, UNCHANGED
from quota_sidecar.configuration.config import ReplicationConfig
from quota_sidecar.decide.throttles import LEADER_RATE, BrokerRates, ReplicationDecision

NOW = datetime(2026, 11, 26, 17, 0, tzinfo=timezone.utc)
MOVE = Reassignment("t", 0, (1, 3), adding=(3,), removing=())


class ConfigsAdmin:
    """Broker 1's dynamic configs in a dict, and every write to them."""

    def __init__(self):
        self.configs: dict[str, str] = {}
        self.writes: list[dict] = []

    def describe_configs(self, resource_type, names, keys):
        return {str(name): {key: self.configs.get(key) for key in keys} for name in names}

    def incremental_alter_configs(self, resource_type, name, changes):
        self.writes.append(dict(changes))
        for key, (op, value) in changes.items():
            self.configs.pop(key, None) if op == "DELETE" else self.configs.__setitem__(key, value)


def apply(runner, admin, store, leader_rate, reason, read_in_force):
    """One pass's writes of broker 1's leader rate; the pass read `read_in_force` as the rate in force."""
    decision = ReplicationDecision({1: BrokerRates(leader_rate=leader_rate, leader_reason=reason)}, {})
    observation = ReplicationObservation((MOVE,), applied_rates={1: {"leader_rate": read_in_force}})
    runner.apply(decision, observation, records.parse(store.read_all()), set(), NOW)


def test_a_rate_the_rule_kept_unchanged_keeps_what_the_broker_shows_not_the_older_rate_the_pass_read():
    admin, store = ConfigsAdmin(), MemoryStore()
    runner = ReplicationRunner(ReplicationConfig(capacity_default=6_000_000), 1, admin, store, decider=None, sampler=None)
    apply(runner, admin, store, 4_571_729, COMPUTED, read_in_force=None)
    apply(runner, admin, store, 5_081_118, COMPUTED, read_in_force=4_571_729)
    # The next pass read the broker before the last write reached it: the rule, within its change threshold of
    # that older rate, kept it. Written back, it would undo the last pass's rate.
    apply(runner, admin, store, 4_571_729, UNCHANGED, read_in_force=4_571_729)
    assert admin.configs[LEADER_RATE] == "5081118"
    assert [write[LEADER_RATE] for write in admin.writes] == [("SET", "4571729"), ("SET", "5081118")]
