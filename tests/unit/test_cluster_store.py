"""cluster_store.py without a cluster: which admin calls reading the records makes (the ACLs they need)."""

import json
from types import SimpleNamespace

import pytest

from quota_sidecar.act import cluster_store
from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.common.records import TOPIC


class Admin:
    """The store's admin: the state topic exists or not; CreateTopics calls are kept."""

    def __init__(self, exists: bool):
        self.exists = exists
        self.created: list[str] = []

    def describe_partitions(self, topics):
        return {(topic, 0): object() for topic in topics if self.exists}

    def live_broker_ids(self):
        return [1]

    def create_topic(self, name, partitions, replication_factor, configs):
        self.created.append(name)
        return not self.exists

    def close(self):
        pass


class Consumer:
    """A consumer of the one partition holding one record."""

    def __init__(self):
        self.at = 0

    def assign(self, partitions):
        pass

    def end_offsets(self, partitions, timeout_ms):
        return {partition: 1 for partition in partitions}

    def seek_to_beginning(self, partition):
        self.at = 0

    def position(self, partition, timeout_ms):
        return self.at

    def poll(self, timeout_ms):
        self.at = 1
        return {"partition": [SimpleNamespace(key=b'["override", "global"]', value=json.dumps({"rate": 5}).encode(),
                                              timestamp=0)]}

    def close(self, autocommit=False):
        pass


@pytest.fixture
def store(monkeypatch):
    def make(exists: bool) -> tuple[ClusterStore, Admin]:
        monkeypatch.setattr(cluster_store, "open_client", lambda *args, **kwargs: Consumer())
        store = ClusterStore({"bootstrap_servers": "127.0.0.1:1"})
        store._admin = Admin(exists)
        return store, store._admin
    return make


def test_a_reader_reads_an_existing_topic_without_creating_it(store):
    """status --direct: no CreateTopics, which Kafka's authorizer refuses without CREATE even for an existing topic."""
    reader, admin = store(exists=True)
    assert reader.read_all(create=False) == {'["override", "global"]': {"rate": 5}}
    assert reader.read_all(create=False) == {'["override", "global"]': {"rate": 5}}
    assert admin.created == []


def test_a_reader_of_a_cluster_without_the_topic_gets_no_records_and_creates_nothing(store):
    reader, admin = store(exists=False)
    assert reader.read_all(create=False) == {}
    assert admin.created == []


def test_the_agent_ensures_its_topic_once_whether_it_exists_or_not(store):
    for exists in (True, False):
        agent, admin = store(exists=exists)
        agent.read_all()
        agent.read_all()
        assert admin.created == [TOPIC]
