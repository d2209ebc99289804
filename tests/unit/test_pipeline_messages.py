"""The messages between the agents and the aggregator: keys, a fresh id per observation, decisions of
another version or not JSON read as none."""
from datetime import datetime, timezone

from quota_sidecar.common import pipeline_messages as messages

AT = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def test_an_observation_carries_its_cluster_agent_rows_and_a_fresh_id():
    first = messages.observation("c1", 3, AT, volumes=[{"broker_id": 3}], limits={"min_available_bytes": 1})
    second = messages.observation("c1", 3, AT, replication=[{"broker_id": 3}])

    assert messages.key("c1", 3) == "c1/3" and messages.key("c1", None) == "c1/"
    assert first["id"] != second["id"]
    assert first["volumes"] == {"rows": [{"broker_id": 3}], "limits": {"min_available_bytes": 1}}
    assert first["replication"] is None and second["volumes"] is None
    assert messages.decode(messages.encode(first)) == first


def test_a_decision_of_another_version_a_tombstone_or_not_json_is_none():
    assert messages.decode(None) is None
    assert messages.decode(b"{not json") is None
    assert messages.decode(b'{"version": 2, "answers": "x"}') is None
    assert messages.decode(b'[1]') is None
