"""The client quotas' writer hands back what it wrote, also when another sidecar's clean-up took its record."""

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
