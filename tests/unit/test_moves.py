"""The moves' history (moves.py): bytes behind, lag since lag_begin (KAFKA-1546), the reading stuck.after
ago, growth over the network window; and the log lines of the moves into one broker."""

import logging
from datetime import timedelta

from quota_sidecar.common.observation import Reassignment, ReplicaSizes
from quota_sidecar.observe.moves import MoveHistory, MoveLog, leader_of, replicas_to_read

MOVE = Reassignment("t", 0, replicas=(3, 1), adding=(3,), removing=(1,))


def history(window=30, stuck_after=60):
    return MoveHistory(timedelta(seconds=window), timedelta(seconds=stuck_after))


def record(moves_history, at, leader_bytes, replica_bytes, leaders={}):
    sizes = {}
    if leader_bytes is not None:
        sizes[("t", 0, 1)] = leader_bytes
    if replica_bytes is not None:
        sizes[("t", 0, 3)] = replica_bytes
    [replica] = moves_history.record([MOVE], leaders, ReplicaSizes(at, sizes))
    return replica


def test_the_leader_is_the_metadata_s_else_the_first_source():
    assert leader_of(MOVE, {("t", 0): 3}) == 3
    assert leader_of(MOVE, {("t", 0): -1}) == 1 and leader_of(MOVE, {}) == 1
    assert replicas_to_read([MOVE], {}) == {("t", 0, 1), ("t", 0, 3)}


def test_lag_runs_from_the_first_reading_behind_and_resets_when_caught_up():
    moves = history()
    assert record(moves, 100.0, 1000, 0).lag_seconds == 0.0
    assert record(moves, 110.0, 1000, 500).lag_seconds == 10.0
    caught_up = record(moves, 120.0, 1000, 1000)
    assert (caught_up.bytes_behind, caught_up.lag_seconds) == (0, 0.0)
    behind_again = record(moves, 130.0, 2000, 1000)
    assert (behind_again.bytes_behind, behind_again.lag_seconds) == (1000, 0.0)  # a new run begins now
    assert record(moves, 145.0, 2000, 1500).lag_seconds == 15.0


def test_a_size_unread_leaves_bytes_behind_unknown_without_ending_the_run():
    moves = history()
    record(moves, 0.0, 1000, 0)
    unread = record(moves, 10.0, None, 100)
    assert (unread.bytes_behind, unread.lag_seconds) == (None, None)
    assert record(moves, 20.0, 1000, 200).lag_seconds == 20.0


def test_a_replica_ahead_of_a_stale_leader_reading_is_zero_behind():
    assert record(history(), 0.0, 1000, 1200).bytes_behind == 0


def test_behind_then_is_the_latest_reading_at_or_before_now_minus_stuck_after():
    moves = history(window=10, stuck_after=60)
    for at, replica_bytes in ((0.0, 0), (30.0, 100), (59.0, 200)):
        assert record(moves, at, 1000, replica_bytes).behind_then is None
    assert record(moves, 60.0, 1000, 300).behind_then == 1000   # the reading at 0
    assert record(moves, 95.0, 1000, 300).behind_then == 900    # the reading at 30
    assert record(moves, 500.0, 1000, 300).behind_then == 700   # long ago: the latest one kept


def test_growth_is_from_the_oldest_reading_inside_the_window():
    moves = history(window=30)
    record(moves, 0.0, 1000, 0)
    record(moves, 10.0, 1100, 100)
    replica = record(moves, 40.0, 1400, 900)
    assert (replica.replica_growth_bytes, replica.replica_growth_seconds) == (800, 30.0)
    assert (replica.leader_growth_bytes, replica.leader_growth_seconds) == (300, 30.0)
    alone = record(history(), 0.0, 1000, 0)
    assert (alone.replica_growth_bytes, alone.leader_growth_bytes) == (None, None)


def test_after_a_gap_longer_than_the_window_growth_is_from_the_latest_reading():
    moves = history(window=30)
    record(moves, 0.0, 1000, 0)
    replica = record(moves, 100.0, 1000, 500)
    assert (replica.replica_growth_bytes, replica.replica_growth_seconds) == (500, 100.0)


def test_a_move_first_seen_grew_from_nothing_since_the_pass_before_it_while_its_leader_is_unknown_then():
    moves = history(window=30)
    moves.record([], {}, ReplicaSizes(0.0, {}, adding=frozenset()))
    replica = moves.record([MOVE], {}, ReplicaSizes(2.0, {("t", 0, 1): 1000, ("t", 0, 3): 600},
                                                    adding=frozenset({("t", 0, 3)})))[0]
    assert (replica.replica_growth_bytes, replica.replica_growth_seconds) == (600, 2.0)
    assert replica.leader_growth_bytes is None  # the leader existed before the move: its size then is unknown


def move(state="moving", broker=3, reason=None):
    return {"topic": "t", "partition": 0, "broker": broker, "state": state, "stuck_reason": reason,
            "bytes_behind": 10, "lag_seconds": 5.0, "catch_up_bytes_per_sec": 1.0, "incoming_bytes_per_sec": 2.0}


def test_move_log_says_once_when_a_move_into_its_broker_is_stuck_and_when_it_ends(caplog):
    caplog.set_level(logging.INFO, logger="quota_sidecar.observe.moves")
    lines = MoveLog(3)
    lines.after([move(), move(broker=4)], (), 0.0)
    lines.after([move("stuck", reason="cannot_keep_up")], (), 10.0)
    lines.after([move("stuck", reason="cannot_keep_up")], (), 20.0)
    lines.after([], (), 95.0)
    said = [record.getMessage() for record in caplog.records]
    assert said == ["move of t-0 to broker 3 is stuck (cannot_keep_up): 10 bytes behind for 5 s, catch-up 1 B/s, "
                    "incoming 2 B/s", "move of t-0 to broker 3 ended after 95 s"]


def test_move_log_warns_once_per_move_when_even_the_cap_cannot_keep_up(caplog):
    lines = MoveLog(3)
    for now in (0.0, 10.0):
        lines.after([move()], ("follower",), now)
    assert len([r for r in caplog.records if "upper bound" in r.getMessage()]) == 1
