"""`evaluate`'s input: recorded observations parsed into the types a poll builds; bad input named in one line."""

import json
import re
from datetime import datetime, timezone

import pytest

from quota_sidecar.common.observation import BrokerLoad, Overrides, Reassignment, Volume
from quota_sidecar.decide.evaluate import SnapshotError, load_snapshots, observation


def test_an_observation_with_volumes_and_replication():
    item = {"at": "2026-01-01T00:00:10Z", "brokers": [1, 2],
            "volumes": [{"broker_id": 1, "log_dir": "/d", "total_bytes": 100, "available_bytes": 40}],
            "reassignments": [{"topic": "t", "partition": 0, "replicas": [3, 1], "adding": [3], "removing": [1]}],
            "broker_load": {"3": {"tx_bytes_per_sec": 1, "rx_bytes_per_sec": 2, "replication_rx_bytes_per_sec": 1.5}},
            "applied_rates": {"3": {"follower_rate": 9}},
            "overrides": {"global_rate": 7, "global_autoremove": True, "broker_rates": {"2": 5}}}

    parsed = observation(item, 0)

    at = datetime(2026, 1, 1, 0, 0, 10, tzinfo=timezone.utc)
    assert parsed.at == at and parsed.brokers == (1, 2) and parsed.error is None
    assert parsed.volumes == (Volume(1, "/d", 100, 40, at),)
    assert parsed.replication.reassignments == (Reassignment("t", 0, (3, 1), (3,), (1,)),)
    assert parsed.replication.broker_load == {3: BrokerLoad(1.0, 2.0, None, 1.5)}
    assert parsed.replication.applied_rates == {3: {"leader_rate": None, "follower_rate": 9}}
    assert parsed.replication.overrides == Overrides(7, True, {2: 5})


def test_a_failed_poll_and_a_time_without_zone():
    parsed = observation({"at": "2026-01-01T00:00:00", "error": "timed out"}, 3)

    assert parsed.error == "timed out" and parsed.at.tzinfo is timezone.utc


@pytest.mark.parametrize("item, says", [
    ({}, "snapshot #4: expected an object with 'at'"),
    ({"at": "yesterday"}, "snapshot #4: 'at'='yesterday' is not an ISO-8601 time"),
    ({"at": "2026-01-01T00:00:00Z", "volumes": [{"broker_id": 1}]}, "snapshot #4: bad broker or volume entry"),
    ({"at": "2026-01-01T00:00:00Z", "reassignments": [{"topic": "t"}]}, "snapshot #4: bad reassignment"),
    ({"at": "2026-01-01T00:00:00Z", "broker_load": {"x": {}}}, "snapshot #4: bad reassignment, broker_load"),
])
def test_a_bad_item_is_named_with_its_field(item, says):
    with pytest.raises(SnapshotError, match="^" + re.escape(says)):
        observation(item, 4)


@pytest.mark.parametrize("content, says", [
    (None, "cannot read snapshots file"),
    ("{", "is not JSON"),
    ('{"at": 1}', "expected a JSON list of observations"),
])
def test_a_bad_file_is_one_line(tmp_path, content, says):
    path = tmp_path / "snapshots.json"
    if content is not None:
        path.write_text(content)

    with pytest.raises(SnapshotError, match=says) as raised:
        load_snapshots(str(path))
    assert "\n" not in str(raised.value)


def test_a_list_is_read_as_it_is(tmp_path):
    path = tmp_path / "snapshots.json"
    path.write_text(json.dumps([{"at": "2026-01-01T00:00:00Z"}]))

    assert load_snapshots(str(path)) == [{"at": "2026-01-01T00:00:00Z"}]
