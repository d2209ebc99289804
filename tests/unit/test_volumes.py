"""Volume records and the memory of brokers that left the cluster view."""

from datetime import datetime, timedelta, timezone

from quota_sidecar.config import StorageLimit
from quota_sidecar.observation import Volume
from quota_sidecar.volumes import by_broker, remember

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def vol(broker, available, at=T0, total=1000, error=None):
    return Volume(broker, f"/data-{broker}", total, available, at, error)


def test_offline_or_unsized_dirs_are_not_usable():
    assert vol(0, 10).usable
    assert not vol(0, -1, total=-1).usable
    assert not vol(0, 10, error="KAFKA_STORAGE_ERROR").usable


def test_ratio_and_margin():
    assert vol(0, 250).available_ratio == 0.25
    assert vol(0, 0, total=0).available_ratio == 0.0
    assert vol(0, 250).margin(StorageLimit(min_available_bytes=100)) == 150
    assert vol(0, 250).margin(StorageLimit(min_available_ratio=0.3)) < 0
    assert vol(0, -1, total=-1).margin(StorageLimit(min_available_bytes=1)) is None


def test_answering_brokers_replace_their_volumes():
    previous = {0: (vol(0, 10),)}
    fresh = {0: (vol(0, 900, at=T0 + MINUTE),)}
    assert remember(previous, fresh, T0 + MINUTE, 5 * MINUTE) == fresh


def test_absent_broker_is_kept_while_younger_than_validity():
    previous = {0: (vol(0, 10),), 1: (vol(1, 900),)}
    fresh = {1: (vol(1, 900, at=T0 + MINUTE / 2),)}
    assert 0 in remember(previous, fresh, T0 + MINUTE / 2, MINUTE)
    assert 0 not in remember(previous, fresh, T0 + MINUTE, MINUTE)


def test_by_broker_keeps_live_brokers_without_dirs():
    assert by_broker([1, 2], [vol(1, 5)]) == {1: (vol(1, 5),), 2: ()}
