"""volumes.with_published: which volumes count when the sidecars publish theirs in ZooKeeper."""

from datetime import datetime, timezone

from quota_sidecar.observation import Volume
from quota_sidecar.volumes import with_published

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def sized(broker: int, available: int = 50) -> Volume:
    return Volume(broker, f"/data/{broker}", 100, available, NOW)


def unsized(broker: int) -> Volume:  # DescribeLogDirs below v4 (Kafka < 3.3)
    return Volume(broker, f"/data/{broker}", -1, -1, NOW)


def test_a_broker_reporting_sizes_keeps_them_over_its_znode():
    assert with_published([1], [sized(1, 50)], {1: (sized(1, 7),)}) == ((1,), (sized(1, 50),))


def test_a_broker_without_sizes_takes_its_published_volumes():
    assert with_published([1, 2], [sized(1), unsized(2)], {2: (sized(2, 3),)}) == ((1, 2), (sized(1), sized(2, 3)))


def test_a_broker_without_sizes_and_without_znode_is_absent():
    assert with_published([1, 2], [sized(1), unsized(2)], {}) == ((1,), (sized(1),))


def test_an_offline_dir_is_not_a_missing_size():
    offline = Volume(1, "/data/1", -1, -1, NOW, "KAFKA_STORAGE_ERROR")
    assert with_published([1], [offline], {}) == ((1,), (offline,))


def test_znodes_of_brokers_not_in_the_cluster_are_ignored():
    assert with_published([1], [sized(1)], {9: (sized(9),)}) == ((1,), (sized(1),))
