"""status --direct (serve/direct_status.look): one pass through the loop's parts that reads and decides, as a
pass does, but writes nothing: no quota, no record, the records' topic not created."""

import pytest

from builders import Clock, MemoryStore, OneVolumeAdmin, sidecar_config
from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.decide.decider import Decider
from quota_sidecar.serve.direct_status import look
from quota_sidecar.wiring import assemble


class ReadOnlyStore(MemoryStore):
    """The records' store; fails the test on any write, and keeps whether each read may create its topic."""

    def __init__(self):
        super().__init__()
        self.creating: list[bool] = []

    def read_all(self, create=True):
        self.creating.append(create)
        return super().read_all()

    def write_many(self, changes):
        raise AssertionError(f"status --direct wrote records: {changes}")

    def delete(self, key):
        raise AssertionError(f"status --direct deleted a record: {key}")


class ReadOnlyAdmin(OneVolumeAdmin):
    def alter_user_quotas(self, changes):
        raise AssertionError(f"status --direct wrote quotas: {changes}")


def violated(rows, limit):
    return 0.0, [{**row, "available_ratio": 0.01, "fill_bytes_per_sec": None, "seconds_to_limit": None,
                  "violated": True, "predicted": False, "throttle_factor": 0.0} for row in rows]


def test_status_direct_shows_the_decision_a_pass_would_write_and_writes_nothing():
    config = sidecar_config(**{"broker.id": 1, "produce": "1000000"})
    store = ReadOnlyStore()
    car = assemble(config, ReadOnlyAdmin(100 << 20, 1 << 20), store, lambda *_: Decider(config, violated),
                   clock=Clock())

    snapshot = look(car, timeout=5)

    assert snapshot.decision.throttle_factor == 0.0 and snapshot.factor.factor == 0.0
    assert store.creating == [False]


def test_status_direct_on_a_cluster_it_cannot_read_raises_naming_the_cause():
    class Unreachable(ReadOnlyAdmin):
        def live_broker_ids(self):
            raise RetryableAdminError("DescribeCluster failed: timed out")

    config = sidecar_config(**{"broker.id": 1})
    car = assemble(config, Unreachable(100 << 20, 1 << 20), ReadOnlyStore(), lambda *_: Decider(config, violated),
                   clock=Clock())

    with pytest.raises(RetryableAdminError, match="DescribeCluster failed: timed out"):
        look(car, timeout=5)
