"""The sidecars' records in ZooKeeper (state.store=zookeeper), on a real ZooKeeper server: versioned writes."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from harness.cluster.local_cluster import DEFAULT_JVM_OPTIONS, ZOOKEEPER_CLASSPATH_FILE, read_classpath
from harness.cluster.zookeeper_server import LocalZooKeeper
from quota_sidecar.act.zookeeper_store import ZooKeeperStore
from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.observe.zookeeper_session import ZooKeeperSession

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    with LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"), read_classpath(ZOOKEEPER_CLASSPATH_FILE),
                        DEFAULT_JVM_OPTIONS) as server:
        yield server


@pytest.fixture
def stores(zookeeper, unique_name):
    """Two sidecars' stores, each with a session of its own, under a chroot of the test's own (made first,
    as a broker makes its own)."""
    maker = KazooClient(hosts=zookeeper.connect_string)
    maker.start(timeout=15)
    maker.ensure_path(f"/{unique_name}")
    maker.stop()
    maker.close()
    made = [ZooKeeperStore(ZooKeeperSession(f"{zookeeper.connect_string}/{unique_name}", 10.0)) for _ in range(2)]
    yield made
    for store in made:
        store.close()


def test_records_round_trip_and_a_reader_writes_nothing(stores):
    first, second = stores
    assert second.read_all(create=False) == {}
    first.put('["override", 1]', {"rate": 1000, "nested": {"b": 2, "a": 1}})
    first.put('["quota", null]', {"replaced": None})
    first.delete('["quota", null]')
    assert second.read_all() == {'["override", 1]': {"rate": 1000, "nested": {"a": 1, "b": 2}}}


def test_two_sidecars_writing_at_once_lose_none_of_each_others_updates(stores):
    def write(store, name):
        for index in range(40):
            store.put(f"{name}-{index}", {"index": index})
        for index in range(0, 40, 2):
            store.delete(f"{name}-{index}")

    threads = [threading.Thread(target=write, args=(store, name)) for store, name in zip(stores, "ab")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert stores[0].read_all() == {f"{name}-{index}": {"index": index} for name in "ab" for index in range(1, 40, 2)}


def test_a_stopped_zookeeper_is_a_retryable_failure_and_the_store_comes_back(zookeeper, stores):
    first, _ = stores
    first.put("k", {"v": 1})
    zookeeper.stop()
    try:
        with pytest.raises(RetryableAdminError, match="in ZooKeeper at"):
            first.put("k", {"v": 2})
    finally:
        zookeeper.start()
    first.put("k", {"v": 3})
    assert first.read_all() == {"k": {"v": 3}}
