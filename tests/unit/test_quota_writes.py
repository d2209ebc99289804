"""The client quotas' writer hands back what it wrote, also when another sidecar's clean-up took its record."""

from dataclasses import replace

from builders import AT, MemoryStore, QuotasInMemory, sidecar_config
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


def test_a_lift_another_sidecar_wrote_after_this_decisions_look_is_not_undone_by_more_than_a_step():
    """This decision looked when the floor was in force and keeps it; another sidecar lifted it since, from a
    newer view of the volumes: the floor is not written over the lift, and the hard limit still would be."""
    config, admin, store = sidecar_config().quotas, QuotasInMemory(), MemoryStore()
    writer = QuotaWriter(config, admin, store, Counters())
    admin.quotas[None] = {quotas.PRODUCE: 1_000_000.0}  # the lift, written after this decision's look
    wanted = quotas.wanted(config, 1.0)
    floor = replace(wanted, default_user={**wanted.default_user, quotas.PRODUCE: config.floor})

    writer.apply(floor, {}, seen_at=AT)
    assert admin.quotas[None] == {quotas.PRODUCE: 1_000_000.0}

    writer.apply(quotas.wanted(config, 0.0), {}, seen_at=AT)
    assert admin.quotas[None] == {quotas.PRODUCE: 1.0}
