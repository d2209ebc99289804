"""The disk guard on the local verdict's path: what one round of guarded fetches can bring, when a guard is not
holding, and what the guard cancels (local_guard.py), on a recording admin and store."""

from datetime import datetime, timezone

import pytest

from quota_sidecar.act.local_guard import FETCH_MAX_BYTES, RESPONSE_MAX_BYTES, LocalGuard, cancel_below, fetch_allowance
from quota_sidecar.act.snapshot import Counters
from quota_sidecar.common import records
from quota_sidecar.common.observation import Reassignment
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.observe.volumes import LocalSample

MiB = 1 << 20
AT = datetime(2026, 11, 25, 14, 0, tzinfo=timezone.utc)
KAFKA_DEFAULTS = {FETCH_MAX_BYTES: 1 * MiB, RESPONSE_MAX_BYTES: 10 * MiB}


@pytest.mark.parametrize("leaders, allowance", [
    ({}, 0),
    ({("t", 0): 1}, 1 * MiB),
    ({("t", p): 1 for p in range(20)}, 10 * MiB),  # one source broker: its response is capped
    ({("t", p): 1 + p % 2 for p in range(20)}, 20 * MiB),  # two sources, two responses
    ({("t", p): 1 + p % 3 for p in range(4)}, 4 * MiB),
])
def test_one_round_of_fetches_brings_a_partition_max_each_at_most_a_response_max_per_source(leaders, allowance):
    assert fetch_allowance(list(leaders.values()), KAFKA_DEFAULTS) == allowance


def test_a_fetch_max_above_the_response_max_still_comes_whole():
    assert fetch_allowance([1], {FETCH_MAX_BYTES: 20 * MiB, RESPONSE_MAX_BYTES: 10 * MiB}) == 20 * MiB


@pytest.mark.parametrize("when_guarded, limit, allowance, below", [
    (200 * MiB, 128 * MiB, 1 * MiB, 126 * MiB),  # guarded above the limit: two rounds below the limit
    (20 * MiB, 24 * MiB, 1 * MiB, 18 * MiB),  # guarded below it: two rounds below what it had then
    (3 * MiB, 24 * MiB, 1 * MiB, 1 * MiB),  # whatever the limit, no less than one round
    (200 * MiB, 0, 10 * MiB, 10 * MiB),
])
def test_a_guard_does_not_hold_when_the_free_space_falls_two_rounds_below_the_limit_and_its_start(
        when_guarded, limit, allowance, below):
    assert cancel_below(when_guarded, limit, allowance) == below


class RecordingRunner:
    broker_id = 3

    def __init__(self, incoming, leaders, copies=None):
        self.incoming, self.leaders, self.copies, self.guards, self.copies_guarded = incoming, leaders, copies or {}, 0, []

    def write_the_guard(self, all_records):
        self.guards += 1
        return self.incoming, self.leaders

    def guard_dir_copies(self, all_records, at_risk):
        copies = {partition: dirs for partition, dirs in self.copies.items() if dirs[0] in at_risk}
        self.copies_guarded.append(sorted(copies))
        return copies


class RecordingAdmin:
    def __init__(self, replicas):
        self.replicas, self.cancelled, self.copied_back = replicas, [], []

    def describe_config_layers(self, broker, keys):
        return {FETCH_MAX_BYTES: {"DEFAULT_CONFIG": str(MiB)},
                RESPONSE_MAX_BYTES: {"STATIC_BROKER_CONFIG": str(10 * MiB), "DEFAULT_CONFIG": str(20 * MiB)}}

    def describe_replicas(self, broker, partitions):
        return {key: value for key, value in self.replicas.items() if key[1] in partitions.get(key[0], ())}

    def alter_reassignments(self, targets):
        if targets:
            self.cancelled.append(dict(targets))

    def alter_replica_log_dirs(self, broker, dirs):
        if dirs:
            self.copied_back.append((broker, dict(dirs)))


class RecordingStore:
    def __init__(self, admin):
        self.admin, self.puts = admin, []

    def write_many(self, changes):
        assert not self.admin.cancelled and not self.admin.copied_back, "the cancel came before its record"
        self.puts += list(changes.items())


ONTO_A = Reassignment("t", 0, (3, 1), adding=(3,), removing=(1,))
ONTO_B = Reassignment("t", 1, (3, 2), adding=(3,), removing=(2,))
NOT_YET = Reassignment("u", 0, (3, 2), adding=(3,), removing=(2,))


def guard(cancel_moves=True, incoming=(ONTO_A, ONTO_B, NOT_YET), copies=None):
    admin = RecordingAdmin({("t", 0): ("/a", 5 * MiB), ("t", 1): ("/b", 5 * MiB)})  # u-0 not created yet
    leaders = {("t", 0): 1, ("t", 1): 2, ("u", 0): 2}
    runner = RecordingRunner(incoming, {move: leaders[move] for move in leaders if incoming}, copies)
    return LocalGuard(runner, admin, RecordingStore(admin), StorageLimit(min_available_bytes=128 * MiB),
                      cancel_moves, Counters()), runner, admin


def sample(log_dir, available):
    return LocalSample(log_dir, 0.0, 512 * MiB, available)


def test_a_guard_that_holds_cancels_nothing_and_one_that_does_not_cancels_the_moves_onto_its_dir():
    local, runner, admin = guard()
    assert local.hold({"/a": sample("/a", 200 * MiB)}, {}, AT)  # the guard goes in above the limit
    assert local.hold({"/a": sample("/a", 130 * MiB)}, {}, AT)  # falling, but above the limit
    assert runner.guards == 2 and admin.cancelled == []
    # one round is 3 MiB (three partitions, two sources): 122 MiB is the line
    assert local.hold({"/a": sample("/a", 121 * MiB)}, {}, AT)
    assert admin.cancelled == [{("t", 0): None}]  # only the move whose replica is in /a
    ((key, recorded),) = local.store.puts
    assert key == records.key(records.CANCELLED, 3, "t", 0)
    assert (recorded["log_dir"], recorded["replicas"], recorded["removing"]) == ("/a", [3, 1], [1])
    assert "fell to 126877696 B under the disk guard (209715200 B when the guard went in)" in recorded["why"]
    assert local.counters.moves_cancelled == 1 and [m["partition"] for m in local.moves] == [0]


def test_the_start_of_a_guard_is_forgotten_once_its_dir_is_out_of_danger():
    local, runner, admin = guard()
    local.hold({"/a": sample("/a", 200 * MiB)}, {}, AT)
    assert not local.hold({}, {}, AT) and runner.guards == 1  # nothing at risk: nothing written
    local.hold({"/a": sample("/a", 121 * MiB)}, {}, AT)  # a new guard, from 121 MiB: 115 MiB is the line
    assert admin.cancelled == []


def test_with_the_cancel_off_the_guard_is_written_and_nothing_is_cancelled():
    local, runner, admin = guard(cancel_moves=False)
    local.hold({"/a": sample("/a", 200 * MiB)}, {}, AT)
    local.hold({"/a": sample("/a", 1 * MiB)}, {}, AT)
    assert runner.guards == 2 and admin.cancelled == [] and local.store.puts == []


def test_copies_between_the_brokers_dirs_into_a_dir_at_risk_are_guarded_and_sent_back_when_it_does_not_hold():
    # v-0 is copied from /b into /a, v-1 from /a into /b; no move onto the broker
    local, runner, admin = guard(incoming=(), copies={("v", 0): ("/a", "/b"), ("v", 1): ("/b", "/a")})
    assert local.hold({"/a": sample("/a", 200 * MiB)}, {}, AT)
    assert runner.copies_guarded == [[("v", 0)]] and admin.copied_back == []
    # one round: the broker's own fetch of one partition (1 MiB): 126 MiB is the line
    local.hold({"/a": sample("/a", 127 * MiB)}, {}, AT)
    assert admin.copied_back == []
    local.hold({"/a": sample("/a", 125 * MiB)}, {}, AT)
    assert admin.copied_back == [(3, {("v", 0): "/b"})] and admin.cancelled == []  # back to the dir it is in
    ((key, recorded),) = local.store.puts
    assert key == records.key(records.CANCELLED, 3, "v", 0)
    assert (recorded["log_dir"], recorded["from_log_dir"], recorded["replicas"]) == ("/a", "/b", [3])
    assert local.counters.moves_cancelled == 1
