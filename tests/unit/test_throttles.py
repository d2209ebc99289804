"""Throttled-replica lists, roles and override precedence (pure parts of the replication throttles)."""

from datetime import datetime, timedelta, timezone

import pytest

from quota_sidecar.common.observation import (FOLLOWER, LEADER, UNLIMITED, BrokerLoad, Overrides, Partition,
                                              Reassignment, ReplicaSizes)
from quota_sidecar.common.vocabulary import (BROKER_OVERRIDE, COMPUTED, DISK_GUARD, FAIL_SAFE, GLOBAL_OVERRIDE, KEEP_UP,
                                             KEPT, UNCHANGED)
from quota_sidecar.configuration.settings import ReplicationConfig
from quota_sidecar.decide.throttles import (DIR_COPY_RATE, FOLLOWER_RATE, LEADER_RATE, REMOTE_COPY, REMOTE_FETCH,
                                            BrokerRates, ListChange, catching_up, count_failures, entries_of,
                                            foreign_cleanup_due, global_override_expired, growth_rate, link_rates,
                                            list_change, measured_replicas, roles, throttled_replicas,
                                            wanted_broker_configs, with_overrides)

MOVE = Reassignment("t", 0, replicas=(3, 1, 2), adding=(3,), removing=(1,))


def test_sources_are_replicas_minus_adding_and_destinations_the_adding():
    assert MOVE.sources == (1, 2) and MOVE.destinations == (3,)


def test_lists_are_sorted_numerically_by_partition_then_broker():
    moves = [Reassignment("t", 10, (12, 2), (12,)), Reassignment("t", 2, (1, 10, 9), (10,)), MOVE]
    lists = throttled_replicas(moves)
    assert lists["t"][LEADER] == ("0:1", "0:2", "2:1", "2:9", "10:2")
    assert lists["t"][FOLLOWER] == ("0:3", "2:10", "10:12")


def test_catching_up_replicas_are_throttled_as_followers():
    assert throttled_replicas([], {"u": [(4, 7)]}) == {"u": {LEADER: (), FOLLOWER: ("4:7",)}}


def test_roles_per_broker():
    assert roles([MOVE, Reassignment("u", 1, (3, 4), (4,))]) == {1: {LEADER}, 2: {LEADER}, 3: {FOLLOWER, LEADER},
                                                                   4: {FOLLOWER}}


def test_failures_count_consecutive_missing_reads_and_reset():
    loads = {1: BrokerLoad(0, 0)}
    assert count_failures({2: 1}, [1, 2, 3], loads) == {1: 0, 2: 2, 3: 1}


def test_precedence_disk_guard_then_broker_then_global_then_fail_safe_then_computed():
    computed = {(1, LEADER): (24, COMPUTED), (2, LEADER): (10, FAIL_SAFE), (3, FOLLOWER): (40, COMPUTED),
                (4, FOLLOWER): (90, COMPUTED)}
    involved = {1: {LEADER}, 2: {LEADER}, 3: {FOLLOWER}, 4: {FOLLOWER}}
    overrides = Overrides(global_rate=500, broker_rates={1: 50, 3: 70, 9: 60})
    rates = with_overrides(computed, overrides, involved, guarded={3}, disk_guard_rate=1)
    assert rates[1] == BrokerRates(50, 50, BROKER_OVERRIDE, BROKER_OVERRIDE)
    assert rates[2] == BrokerRates(500, None, GLOBAL_OVERRIDE, None)
    assert rates[3] == BrokerRates(70, 1, BROKER_OVERRIDE, DISK_GUARD)
    assert rates[9] == BrokerRates(60, 60, BROKER_OVERRIDE, BROKER_OVERRIDE)  # no move: a broker catching up
    assert with_overrides(computed, Overrides(), involved)[2] == BrokerRates(10, None, FAIL_SAFE, None)


def test_keep_up_yields_to_the_disk_guard_and_the_overrides_and_reports_a_broken_upper_bound():
    computed = {(b, FOLLOWER): (30, KEEP_UP, b == 4) for b in (1, 2, 3, 4)}
    involved = {b: {FOLLOWER} for b in (1, 2, 3, 4)}
    rates = with_overrides(computed, Overrides(global_rate=500, broker_rates={2: 50}), involved, guarded={1})
    assert rates[1] == BrokerRates(None, 1, None, DISK_GUARD)
    assert rates[2] == BrokerRates(50, 50, BROKER_OVERRIDE, BROKER_OVERRIDE)
    assert rates[3] == BrokerRates(None, 500, None, GLOBAL_OVERRIDE)
    alone = with_overrides(computed, Overrides(), involved)
    assert alone[3] == BrokerRates(None, 30, None, KEEP_UP)
    assert alone[4] == BrokerRates(None, 30, None, KEEP_UP, cannot_keep_up=(FOLLOWER,))
    assert alone[4].to_json()["cannot_keep_up"] == [FOLLOWER]


@pytest.mark.parametrize("computed_reason", [KEEP_UP, COMPUTED, FAIL_SAFE, KEPT, UNCHANGED])
def test_disk_guard_slows_a_destination_whatever_the_rule_says(computed_reason):
    computed = {(3, FOLLOWER): (50_000_000, computed_reason)}
    rates = with_overrides(computed, Overrides(), {3: {FOLLOWER}}, guarded={3}, disk_guard_rate=7)
    assert rates[3] == BrokerRates(None, 7, None, DISK_GUARD)


def test_disk_guard_leaves_a_source_and_an_unguarded_destination_alone():
    computed = {(3, LEADER): (24, COMPUTED), (4, FOLLOWER): (90, COMPUTED)}
    rates = with_overrides(computed, Overrides(), {3: {LEADER}, 4: {FOLLOWER}}, guarded={3}, disk_guard_rate=1)
    assert rates[3] == BrokerRates(24, None, COMPUTED, None)
    assert rates[4] == BrokerRates(None, 90, None, COMPUTED)


def test_reason_names_roles_only_when_they_differ():
    assert BrokerRates(1, 2, COMPUTED, COMPUTED).reason == COMPUTED
    assert BrokerRates(1, 2, COMPUTED, DISK_GUARD).reason == "leader computed, follower disk_guard"
    assert BrokerRates().reason is None


def test_only_the_leader_of_a_moving_partition_counts_as_sender():
    moves = [MOVE, Reassignment("u", 1, (2, 4), (4,))]
    leaders = {("t", 0): 1, ("u", 1): 2}
    assert measured_replicas(moves, leaders, 1) == {LEADER: [("t", 0, 3)], FOLLOWER: []}
    assert measured_replicas(moves, leaders, 2) == {LEADER: [("u", 1, 4)], FOLLOWER: []}
    assert measured_replicas(moves, leaders, 3) == {LEADER: [], FOLLOWER: [("t", 0, 3)]}


def test_growth_is_measured_per_replica_since_its_oldest_reading():
    replicas = [("t", 0, 3), ("u", 1, 4)]
    earlier = [ReplicaSizes(10.0, {("t", 0, 3): 1_000}), ReplicaSizes(12.0, {("t", 0, 3): 3_000, ("u", 1, 4): 0})]
    now = ReplicaSizes(14.0, {("t", 0, 3): 9_000, ("u", 1, 4): 500})
    assert growth_rate(earlier, now, replicas) == 8_000 / 4 + 500 / 2


def test_growth_is_unknown_without_an_earlier_reading_and_zero_without_replicas():
    now = ReplicaSizes(5.0, {("t", 0, 3): 100})
    assert growth_rate([], now, [("t", 0, 3)]) is None
    assert growth_rate([ReplicaSizes(4.0, {})], now, [("t", 0, 3)]) is None
    assert growth_rate([], now, []) == 0.0


def test_a_move_first_seen_grows_from_nothing_since_the_pass_before_it_began():
    replica = ("t", 0, 3)
    before = ReplicaSizes(10.0, {}, adding=frozenset())
    now = ReplicaSizes(11.0, {replica: 5_000_000}, adding=frozenset({replica}))
    assert growth_rate([before], now, [replica]) == 5_000_000  # not None: the unthrottled copy is replication
    unread = ReplicaSizes(10.0, {}, adding=frozenset({replica}))  # the move was listed, its size not read
    assert growth_rate([unread], now, [replica]) is None
    assert growth_rate([ReplicaSizes(10.0, {})], now, [replica]) is None  # nothing known of the moves then


def test_the_link_is_measured_over_the_interval_of_the_replicas_growth():
    earlier = [ReplicaSizes(9.0, {}), ReplicaSizes(10.0, {}, link=(1_000, 50)), ReplicaSizes(12.0, {}, link=(5_000, 50))]
    assert link_rates(earlier, ReplicaSizes(14.0, {}, link=(17_000, 450))) == (4_000.0, 100.0)
    assert link_rates(earlier, ReplicaSizes(14.0, {})) is None  # the counters unread now
    assert link_rates(earlier[:1], ReplicaSizes(14.0, {}, link=(1, 1))) is None  # none read before


def test_a_shrinking_replica_counts_as_no_growth():
    earlier = [ReplicaSizes(0.0, {("t", 0, 3): 5_000})]
    assert growth_rate(earlier, ReplicaSizes(1.0, {("t", 0, 3): 1_000}), [("t", 0, 3)]) == 0.0


def test_catching_up_is_the_brokers_out_of_sync_replicas_outside_moves():
    partitions = {("t", 0): Partition(1, (1, 2, 3), (1, 2)), ("t", 1): Partition(2, (2, 3), (2, 3)),
                  ("u", 0): Partition(1, (1, 3), (1,)), ("v", 0): Partition(1, (1, 2), (1,))}
    moving = [Reassignment("u", 0, (1, 3), (3,))]
    assert catching_up(partitions, moving, 3) == {"t": ((0, 3),)}


# ---------------------------------------------------------------- what the runner writes and lets go of

def replication_config(**values) -> ReplicationConfig:
    return ReplicationConfig(capacity_default=100, **values)


def test_wanted_broker_configs_are_the_rates_and_none_without_a_move():
    rates = BrokerRates(24, None, COMPUTED, None)
    assert wanted_broker_configs(rates, replication_config(), violating=False) == {LEADER_RATE: 24, FOLLOWER_RATE: None}
    assert wanted_broker_configs(None, replication_config(), violating=True) == {LEADER_RATE: None, FOLLOWER_RATE: None}


def test_the_copy_rate_between_dirs_is_the_guard_rate_while_the_guard_holds_them_and_else_not_the_sidecars():
    guarding = wanted_broker_configs(None, replication_config(disk_guard_rate=7), False, guarding_dir_copies=True)
    assert guarding[DIR_COPY_RATE] == 7
    assert DIR_COPY_RATE not in wanted_broker_configs(None, replication_config(), False)  # handed back (let_go)


@pytest.mark.parametrize("settings, violating, copy, fetch", [
    ({"remote_copy_rate": 5, "remote_fetch_rate": 6}, False, 5, 6),
    ({"remote_copy_rate": 5, "remote_copy_lift_on_violation": True}, False, 5, "absent"),
    ({"remote_copy_rate": 5, "remote_copy_lift_on_violation": True}, True, UNLIMITED, "absent"),
    ({"remote_copy_lift_on_violation": True}, False, None, "absent"),  # lift alone: nothing set until it lifts
    ({"remote_copy_rate": 5}, True, 5, "absent"),  # no lift unless asked
    ({}, True, "absent", "absent"),
])
def test_remote_storage_quotas_and_their_lift_on_violation(settings, violating, copy, fetch):
    wanted = wanted_broker_configs(None, replication_config(**settings), violating)
    assert wanted.get(REMOTE_COPY, "absent") == copy and wanted.get(REMOTE_FETCH, "absent") == fetch


@pytest.mark.parametrize("wanted, present, recorded, add, remove, delete_key, after", [
    ({"0:1"}, set(), set(), {"0:1"}, set(), False, {"0:1"}),
    ({"0:1"}, {"0:1"}, set(), set(), set(), False, set()),  # an entry someone else set serves, and stays theirs
    ({"0:1"}, {"*"}, set(), set(), set(), False, set()),  # '*' throttles every replica already
    (set(), {"0:1", "9:9"}, {"0:1"}, set(), {"0:1"}, False, set()),  # another tool's entry stays
    (set(), {"0:1"}, {"0:1"}, set(), {"0:1"}, True, set()),  # the last entry goes with the key
    (set(), set(), {"0:1"}, set(), set(), False, set()),  # already gone: only the record goes
    ({"1:1"}, {"0:1"}, {"0:1"}, {"1:1"}, {"0:1"}, False, {"1:1"}),
])
def test_list_change_adds_what_is_missing_and_removes_only_what_the_sidecar_added(
        wanted, present, recorded, add, remove, delete_key, after):
    assert list_change(wanted, present, recorded) == ListChange(frozenset(add), frozenset(remove), delete_key,
                                                                frozenset(after))


def test_a_sidecar_writes_only_the_entries_of_its_own_broker():
    assert entries_of(["0:1", "1:12", "2:1", "3:2"], 1) == {"0:1", "2:1"}


AUTOREMOVE = Overrides(global_rate=10, global_autoremove=True)


@pytest.mark.parametrize("overrides, moving, moved_before, expired, moved_after", [
    (AUTOREMOVE, True, False, False, True),
    (AUTOREMOVE, False, True, True, False),  # the moves it ran under are done
    (AUTOREMOVE, False, False, False, False),  # set while nothing moved: waits for a move to end
    (Overrides(global_rate=10), False, True, False, False),  # not autoremove
    (Overrides(10, True, {1: 5}), False, True, False, False),  # a broker override freezes clearing
])
def test_an_autoremove_global_override_goes_once_its_moves_are_done(overrides, moving, moved_before, expired,
                                                                    moved_after):
    assert global_override_expired(overrides, moving, moved_before) == (expired, moved_after)


T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("moving, override, last_seen, now, after, due, seen_after", [
    (True, False, None, T0, timedelta(minutes=5), False, T0),
    (False, False, None, T0, None, False, None),  # opt-in
    (False, False, None, T0, timedelta(minutes=5), False, T0),  # the period starts now
    (False, False, T0, T0 + timedelta(minutes=4), timedelta(minutes=5), False, T0),
    (False, False, T0, T0 + timedelta(minutes=5), timedelta(minutes=5), True, T0 + timedelta(minutes=5)),
    (False, True, T0, T0 + timedelta(minutes=9), timedelta(minutes=5), False, T0),  # a broker override holds it
])
def test_foreign_cleanup_is_due_once_no_move_was_seen_for_the_period(moving, override, last_seen, now, after,
                                                                    due, seen_after):
    assert foreign_cleanup_due(moving, override, last_seen, now, after) == (due, seen_after)


def fake_rate_judge(rows):
    """Stands in for the Spark rule (tested in tests/spark): every row gets 42 'computed'."""
    return {"rates": [{**row, "rate": 42, "reason": COMPUTED, "keep_up_capped": False} for row in rows],
            "moves": [], "destinations": []}


@pytest.mark.parametrize("catch_up, guarded, violations, follower", [
    (True, (), (), (42, COMPUTED)),
    (False, (), (), (None, None)),
    (False, (3,), (), (1, DISK_GUARD)),  # its own sidecar sees a dir at or near the limit
    (False, (), ({"broker_id": 3},), (1, DISK_GUARD)),  # the last poll found a volume of it violating
])
def test_a_broker_catching_up_outside_moves_is_a_destination_when_asked_or_guarded(catch_up, guarded, violations,
                                                                                   follower):
    from quota_sidecar.common.observation import ReplicationObservation
    from quota_sidecar.decide.throttles import ReplicationDecider

    config = ReplicationConfig(capacity_default=100, throttle_catch_up=catch_up)
    observation = ReplicationObservation(broker_load={3: BrokerLoad(0, 0)}, catching_up={"t": ((0, 3),)},
                                         guarded=frozenset(guarded))
    decision = ReplicationDecider(config, fake_rate_judge, own_broker=3).decide(observation, violations)
    rates = decision.brokers.get(3, BrokerRates())
    assert (rates.follower_rate, rates.follower_reason) == follower
    assert decision.topics["t"][FOLLOWER] == ("0:3",)


def test_a_move_the_aggregator_has_not_decided_keeps_its_rate_or_gets_the_fail_safe_rate_not_none():
    from quota_sidecar.common.errors import DecisionFailed
    from quota_sidecar.common.observation import Reassignment, ReplicationObservation
    from quota_sidecar.decide.throttles import ReplicationDecider

    def no_decision(rows):
        raise DecisionFailed("the poll ran out of its 7s deadline while waiting for the aggregator's decision")

    # Broker 3 leads one move (a leader rate in force) and receives another (none yet).
    moves = (Reassignment("a", 0, (3, 1), adding=(1,)), Reassignment("b", 0, (4, 3), adding=(3,)))
    observation = ReplicationObservation(moves, broker_load={3: BrokerLoad(0, 0)},
                                         applied_rates={3: {"leader_rate": 7_000_000, "follower_rate": None}})
    config = ReplicationConfig(capacity_default=100_000_000, min_rate=10_000_000)
    decision = ReplicationDecider(config, no_decision, own_broker=3).decide(observation, ())
    rates = decision.brokers[3]
    assert (rates.leader_rate, rates.leader_reason) == (7_000_000, KEPT)
    assert (rates.follower_rate, rates.follower_reason) == (10_000_000, FAIL_SAFE)
    assert decision.topics["a"][LEADER] == ("0:3",) and decision.topics["b"][FOLLOWER] == ("0:3",)
    assert decision.undecided.startswith("decision failed: the poll ran out of its 7s deadline")
