"""The client quotas' writer hands back what it wrote, also when another sidecar's clean-up took its record; keeps
as the sidecars' a value two of them wrote at once; steps no quota down from a value gone since its look."""

from dataclasses import replace
from datetime import timedelta

from builders import AT, MemoryStore, QuotasInMemory, sidecar_config
from quota_sidecar.act import ownership
from quota_sidecar.act.quota_writes import QuotaWriter
from quota_sidecar.act.snapshot import Counters
from quota_sidecar.common import records
from quota_sidecar.decide import quotas


class CleanupDuringAWrite(QuotasInMemory):
    """A fault injector: the first quota change lands only after `cleanup` ran, as when every agent gets SIGTERM at
    once and one's clean-up reads the records between another's record and its value."""

    def __init__(self):
        super().__init__()
        self.cleanup = None

    def alter_user_quotas(self, changes):
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            cleanup()
        super().alter_user_quotas(changes)


def test_a_value_whose_record_another_clean_up_deleted_is_still_handed_back():
    config, admin, store = sidecar_config().quotas, CleanupDuringAWrite(), MemoryStore()
    writing, leaving = (QuotaWriter(config, admin, store, Counters()) for _ in range(2))
    admin.cleanup = leaving.cleanup

    writing.apply(quotas.wanted(config, 0.5), records.parse(store.read_all()), seen_at=AT)
    assert admin.quotas[None] == {quotas.PRODUCE: 500_000} and store.values == {}  # the record went, not the value

    writing.cleanup()

    assert {entity: keys for entity, keys in admin.quotas.items() if keys} == {} and store.values == {}


def test_a_value_someone_changed_after_the_write_is_left_as_it_is():
    config, admin, store = sidecar_config().quotas, QuotasInMemory(), MemoryStore()
    writer = QuotaWriter(config, admin, store, Counters())
    writer.apply(quotas.wanted(config, 0.5), {}, seen_at=AT)
    store.values.clear()  # another sidecar's clean-up
    admin.quotas[None][quotas.PRODUCE] = 7_000.0  # then an operator's kafka-configs

    writer.cleanup()

    assert admin.quotas[None] == {quotas.PRODUCE: 7_000.0}


class RecentWrites(MemoryStore):
    """The records store, with the values written within the race window (ClusterStore.written_lately) set by hand."""

    def __init__(self):
        super().__init__()
        self.lately: dict[str, list[dict]] = {}

    def written_lately(self, key):
        return self.lately.get(key, [])


def test_a_value_two_sidecars_wrote_at_once_stays_the_sidecars_after_the_race_window(monkeypatch):
    monkeypatch.setattr(ownership, "SECOND_LOOK_SECONDS", 0.0)
    config, admin, store = sidecar_config().quotas, QuotasInMemory(), RecentWrites()
    first, second = (QuotaWriter(config, admin, store, Counters()) for _ in range(2))
    first.apply(quotas.wanted(config, 1.0), {}, seen_at=AT)
    # Two sidecars step it down at once: the second's record (500,000) lands after the first's (250,000), the
    # first's value after the second's: 250,000 in force, beside a record naming 500,000.
    key = records.key(records.QUOTA, None, quotas.PRODUCE)
    stored = dict(store.values[key], written=500_000.0, before=1_000_000.0)
    store.values[key] = stored
    store.lately = {key: [dict(stored, written=250_000.0), stored]}
    admin.quotas[None][quotas.PRODUCE] = 250_000.0
    first.apply(quotas.wanted(config, 0.25), records.parse(store.read_all()), seen_at=AT + timedelta(seconds=5))
    store.lately = {}  # the race window has passed

    second.apply(quotas.wanted(config, 0.1), records.parse(store.read_all()), seen_at=AT + timedelta(seconds=20))

    assert admin.quotas[None][quotas.PRODUCE] == 100_000
    assert not store.values[key].get("yielded")


def test_a_lift_written_since_this_decisions_look_is_not_stepped_down_from_what_the_look_saw():
    """This decision's look saw the floor and keeps it; another sidecar lifted it since, from a newer view of the
    volumes (and an earlier look at the quotas): the floor is not written over the lift. The hard limit would be."""
    config, admin, store = sidecar_config().quotas, QuotasInMemory(), MemoryStore()
    writer = QuotaWriter(config, admin, store, Counters())
    admin.quotas[None] = {quotas.PRODUCE: 1_000_000.0}  # the lift
    wanted = quotas.wanted(config, 1.0)
    floor = replace(wanted, default_user={**wanted.default_user, quotas.PRODUCE: config.floor})

    writer.apply(floor, {}, seen_at=AT, stepped_from={None: config.floor})
    assert admin.quotas[None] == {quotas.PRODUCE: 1_000_000.0}

    writer.apply(floor, {}, seen_at=AT, stepped_from={None: 1_000_000.0})  # the next pass's look saw the lift
    assert admin.quotas[None] == {quotas.PRODUCE: config.floor}

    admin.quotas[None] = {quotas.PRODUCE: 1_000_000.0}
    writer.apply(quotas.wanted(config, 0.0), {}, seen_at=AT, stepped_from={None: config.floor})
    assert admin.quotas[None] == {quotas.PRODUCE: 1.0}
