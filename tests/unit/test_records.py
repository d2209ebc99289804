"""The records the sidecars keep in the cluster: keys written and read back by the same module."""

from quota_sidecar import records
from quota_sidecar.observation import Overrides


def stored(*pairs) -> dict[str, dict]:
    return {key: value for key, value in pairs}


def test_keys_read_back_as_tuples_entities_included():
    raw = stored((records.key(records.QUOTA, (None, "quota-sidecar"), "producer_byte_rate"), {"replaced": None}),
                 (records.key(records.QUOTA, None, "producer_byte_rate"), {"replaced": 5.0}))
    assert records.replaced(records.parse(raw), records.QUOTA) == {
        ((None, "quota-sidecar"), "producer_byte_rate"): None, (None, "producer_byte_rate"): 5.0}


def test_a_broker_owns_only_its_own_configs_and_entries():
    raw = stored((records.key(records.CONFIG, 1, "leader.replication.throttled.rate"), {"replaced": 7.0}),
                 (records.key(records.CONFIG, 2, "leader.replication.throttled.rate"), {"replaced": None}),
                 (records.key(records.ENTRIES, 1, "t", "leader"), {"entries": ["0:1"]}),
                 (records.key(records.ENTRIES, 2, "t", "leader"), {"entries": ["0:2"]}))
    parsed = records.parse(raw)
    assert records.owned_configs(parsed, 1) == {"leader.replication.throttled.rate": 7.0}
    assert records.owned_entries(parsed, 1) == {("t", "leader"): {"0:1"}}


def test_overrides_global_and_per_broker():
    raw = stored((records.override_key(None), {"rate": 100, "autoremove": True}),
                 (records.override_key(3), {"rate": 50}))
    assert records.overrides(records.parse(raw)) == Overrides(100, True, {3: 50})
    assert records.overrides({}) == Overrides()
