"""The messages between the agents and the aggregator: keys, a fresh id per observation, the fields schema.py
spells, and the reader that refuses a version it does not know with one line for each sender and version."""
import logging
from datetime import datetime, timedelta, timezone

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from quota_sidecar.common.observation import (BrokerLoad, MovingReplica, Reassignment, ReplicationObservation,
                                              Volume)
from quota_sidecar.configuration.settings import ReplicationConfig
from quota_sidecar.decide.throttles import rate_inputs
from quota_sidecar.pipeline import messages, schema
from quota_sidecar.configuration.keys import DECISIONS_TOPIC, HEARTBEATS_TOPIC

AT = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def record(value: bytes | None, topic: str = DECISIONS_TOPIC, partition: int = 4, offset: int = 17):
    """A record as kafka-python's consumer returns it."""
    return ConsumerRecord(topic=topic, partition=partition, leader_epoch=0, offset=offset, timestamp=0,
                          timestamp_type=0, key=b"c1/3", value=value, headers=[], checksum=None,
                          serialized_key_size=4, serialized_value_size=len(value or b""), serialized_header_size=-1)


def decisions() -> messages.Reader:
    return messages.Reader("a decision", "this agent", messages.from_aggregator)


def refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == messages.log.name and r.levelno == logging.WARNING]


def test_an_observation_carries_its_cluster_agent_rows_and_a_fresh_id():
    first = messages.observation("c1", 3, AT, volumes=[{"broker_id": 3}], limits={"min_available_bytes": 1})
    second = messages.observation("c1", 3, AT, replication=[{"broker_id": 3}])

    assert messages.key("c1", 3) == "c1/3" and messages.key("c1", None) == "c1/"
    assert first["id"] != second["id"]
    assert first["version"] == messages.VERSION == 1
    assert first["volumes"] == {"rows": [{"broker_id": 3}], "limits": {"min_available_bytes": 1}}
    assert first["replication"] is None and second["volumes"] is None
    assert decisions().read(record(messages.encode(first))) == first


def test_the_messages_have_the_fields_of_the_schema_in_its_order():
    observation = messages.observation("c1", 3, AT, volumes=[], limits={})
    beat = messages.heartbeat("c1", 3, AT, holding=True)

    assert tuple(observation) == schema.OBSERVATION.names
    assert tuple(observation["volumes"]) == ("rows", "limits")
    assert tuple(beat) == schema.HEARTBEAT.names and beat["holding"] is True
    with pytest.raises(ValueError, match="no field agnet in the message"):
        schema.HEARTBEAT.shape({"agnet": 3})


def test_the_rows_an_agent_sends_have_the_fields_of_the_schema():
    volume = Volume(3, "/data", 10, 5, AT - timedelta(seconds=10))
    observation = ReplicationObservation(
        reassignments=(Reassignment("t", 0, (1, 3), adding=(3,)),), broker_load={1: BrokerLoad(1e6, 1e6)},
        moving_replicas=(MovingReplica("t", 0, 3, 1, 1000, 1.0),))

    (row, *_) = rate_inputs(observation, ReplicationConfig(capacity_default=1 << 30), (1, 3), {})

    assert tuple(volume.as_row(AT)) == schema.VOLUME.names
    assert tuple(row) == schema.REPLICATION_PASS.names
    assert tuple(row["moving_replicas"][0]) == schema.MOVING_REPLICA.names


def test_a_tombstone_what_is_not_json_or_not_an_object_is_read_as_none(caplog):
    reader = decisions()

    assert [reader.read(record(value)) for value in (None, b"{not json", b"[1]")] == [None, None, None]
    assert refusals(caplog) == []


def test_a_message_without_a_version_is_read_as_version_1():
    assert decisions().read(record(b'{"answers": "x", "aggregator": "a1"}')) == {"answers": "x", "aggregator": "a1"}


def test_a_version_the_reader_does_not_know_is_refused_with_one_line_for_each_sender_and_version(caplog):
    reader = decisions()
    newer = b'{"version": 2, "answers": "x", "aggregator": "host-b/12"}'

    with caplog.at_level(logging.DEBUG, logger=messages.log.name):
        read = [reader.read(record(newer, offset=17)), reader.read(record(newer, offset=18)),
                reader.read(record(b'{"version": 3, "answers": "y", "aggregator": "host-b/12"}')),
                reader.read(record(b'{"version": "1", "answers": "z", "aggregator": "host-c/7"}')),
                reader.read(record(b'{"version": 1, "answers": "w", "aggregator": "host-b/12"}'))]

    assert read[:4] == [None] * 4 and read[4]["answers"] == "w"
    assert refusals(caplog) == [
        f"refused a decision of version 2 from aggregator host-b/12 at {DECISIONS_TOPIC}-4 offset 17: this agent "
        "reads version 1, and a message without one as version 1; skipped (said once for this sender and version)",
        f"refused a decision of version 3 from aggregator host-b/12 at {DECISIONS_TOPIC}-4 offset 17: this agent "
        "reads version 1, and a message without one as version 1; skipped (said once for this sender and version)",
        f"refused a decision of version '1' from aggregator host-c/7 at {DECISIONS_TOPIC}-4 offset 17: this agent "
        "reads version 1, and a message without one as version 1; skipped (said once for this sender and version)"]
    assert any(r.levelno == logging.DEBUG and f"{DECISIONS_TOPIC}-4 offset 18" in r.getMessage()
               for r in caplog.records)


def test_a_heartbeat_of_an_unknown_version_names_its_agent_and_cluster(caplog):
    reader = messages.Reader("a heartbeat", "this agent", messages.from_agent)
    beat = {**messages.heartbeat("c1", 5, AT), "version": 2}

    assert reader.read(record(messages.encode(beat), topic=HEARTBEATS_TOPIC, partition=0, offset=3)) is None
    assert reader.read(record(messages.encode({**beat, "version": 1}), topic=HEARTBEATS_TOPIC)) is not None
    (line,) = refusals(caplog)
    assert line.startswith(f"refused a heartbeat of version 2 from the agent of broker 5 of cluster c1 at "
                           f"{HEARTBEATS_TOPIC}-0 offset 3: this agent reads version 1")
