"""Throttled-replica lists, roles and override precedence (pure parts of the replication throttles)."""

from quota_sidecar.throttles import (BROKER_OVERRIDE, COMPUTED, DISK_GUARD, FAIL_SAFE, FOLLOWER, GLOBAL_OVERRIDE,
                                     LEADER, BrokerLoad, BrokerRates, Overrides, Partition, Reassignment,
                                     ReplicaSizes, catching_up, count_failures, growth_rate, measured_replicas,
                                     roles, throttled_replicas, with_overrides)

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
    computed = {(1, LEADER): (24, COMPUTED), (2, LEADER): (10, FAIL_SAFE), (3, FOLLOWER): (1, DISK_GUARD),
                (4, FOLLOWER): (90, COMPUTED)}
    involved = {1: {LEADER}, 2: {LEADER}, 3: {FOLLOWER}, 4: {FOLLOWER}}
    rates = with_overrides(computed, Overrides(global_rate=500, broker_rates={1: 50, 3: 70, 9: 60}), involved)
    assert rates[1] == BrokerRates(50, 50, BROKER_OVERRIDE, BROKER_OVERRIDE)
    assert rates[2] == BrokerRates(500, None, GLOBAL_OVERRIDE, None)
    assert rates[3] == BrokerRates(70, 1, BROKER_OVERRIDE, DISK_GUARD)
    assert rates[9] == BrokerRates(60, 60, BROKER_OVERRIDE, BROKER_OVERRIDE)  # no move: a broker catching up
    assert with_overrides(computed, Overrides(), involved)[2] == BrokerRates(10, None, FAIL_SAFE, None)


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


def test_a_shrinking_replica_counts_as_no_growth():
    earlier = [ReplicaSizes(0.0, {("t", 0, 3): 5_000})]
    assert growth_rate(earlier, ReplicaSizes(1.0, {("t", 0, 3): 1_000}), [("t", 0, 3)]) == 0.0


def test_catching_up_is_the_brokers_out_of_sync_replicas_outside_moves():
    partitions = {("t", 0): Partition(1, (1, 2, 3), (1, 2)), ("t", 1): Partition(2, (2, 3), (2, 3)),
                  ("u", 0): Partition(1, (1, 3), (1,)), ("v", 0): Partition(1, (1, 2), (1,))}
    moving = [Reassignment("u", 0, (1, 3), (3,))]
    assert catching_up(partitions, moving, 3) == {"t": ((0, 3),)}
