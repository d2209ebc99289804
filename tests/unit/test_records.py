"""The records the sidecars keep in the cluster: keys written and read back by the same module."""

from quota_sidecar.common import records
from quota_sidecar.common.observation import Overrides
from quota_sidecar.common.records import Owned


def stored(*pairs) -> dict[str, dict]:
    return {key: value for key, value in pairs}


def test_keys_read_back_as_tuples_entities_included():
    raw = stored((records.key(records.QUOTA, (None, "quota-sidecar"), "producer_byte_rate"),
                  {"replaced": None, "written": 1.0}),
                 (records.key(records.QUOTA, None, "producer_byte_rate"), {"replaced": 5.0, "written": 1.0}))
    assert records.owned(records.parse(raw), records.QUOTA) == {
        ((None, "quota-sidecar"), "producer_byte_rate"): Owned(None, 1.0), (None, "producer_byte_rate"): Owned(5.0, 1.0)}


def test_what_was_replaced_and_written_reads_back_as_stored():
    for owned in (Owned(None, 1.0), Owned(5.0, None), Owned(5.0, 1.0, yielded=True), Owned(5.0, 1.0, seen_at=1.5e9)):
        assert Owned.read(owned.stored()) == owned


def test_a_record_of_an_older_version_does_not_know_what_was_written():
    assert Owned.read({"replaced": 7.0}) == Owned(7.0, None, written_known=False)


def test_a_broker_owns_only_its_own_configs_and_entries():
    raw = stored((records.key(records.CONFIG, 1, "leader.replication.throttled.rate"), {"replaced": 7.0, "written": 9.0}),
                 (records.key(records.CONFIG, 2, "leader.replication.throttled.rate"), {"replaced": None, "written": 9.0}),
                 (records.key(records.ENTRIES, 1, "t", "leader"), {"entries": ["0:1"]}),
                 (records.key(records.ENTRIES, 2, "t", "leader"), {"entries": ["0:2"]}))
    parsed = records.parse(raw)
    assert records.owned_configs(parsed, 1) == {"leader.replication.throttled.rate": Owned(7.0, 9.0)}
    assert records.owned_entries(parsed, 1) == {("t", "leader"): {"0:1"}}


def test_a_broker_knows_only_the_log_dirs_its_own_sidecar_cordoned():
    raw = stored((records.key(records.CORDON, 1, "/data/a"), {"yielded": False}),
                 (records.key(records.CORDON, 1, "/data/b"), {"yielded": True}),
                 (records.key(records.CORDON, 2, "/data/a"), {"yielded": False}))
    assert records.cordoned(records.parse(raw), 1) == {"/data/a": False, "/data/b": True}


def test_overrides_global_and_per_broker():
    raw = stored((records.override_key(None), {"rate": 100, "autoremove": True}),
                 (records.override_key(3), {"rate": 50}))
    assert records.overrides(records.parse(raw)) == Overrides(100, True, {3: 50})
    assert records.overrides({}) == Overrides()
