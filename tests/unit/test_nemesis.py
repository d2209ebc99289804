"""The fault soak's schedule and ledger (tests/harness/faults/nemesis.py, invariants.py): a seed makes the same faults,
every kind comes before any comes twice, a fault is healed before the next, and a violation is reported with the
faults before it."""

import threading

import pytest

from harness.cluster.disk import what_uses
from harness.faults.fault_soak import FLOOR, LIFTED_ABOVE, LIMIT, PRODUCE_RATE, FaultSoak
from harness.faults.invariants import INVARIANTS, Convergence, Ledger, MemoryGrowth, Recovery, report
from harness.faults.nemesis import KINDS, NO_TARGET, Event, Fault, Nemesis, schedule

from builders import Clock


def test_a_seed_makes_the_same_schedule_and_another_seed_another():
    assert schedule(7, 1800, [1, 2, 3]) == schedule(7, 1800, [1, 2, 3])
    assert schedule(7, 1800, [1, 2, 3]) != schedule(8, 1800, [1, 2, 3])


def test_every_kind_comes_once_before_any_comes_twice_each_healed_before_the_next():
    faults = schedule(11, 1800, [1, 2, 3])

    assert sorted(fault.kind for fault in faults[:len(KINDS)]) == sorted(KINDS)
    assert all(a.at + a.hold < b.at for a, b in zip(faults, faults[1:]))
    assert all(fault.at + fault.hold <= 1800 for fault in faults)
    assert all((fault.target is None) == (fault.kind in NO_TARGET) for fault in faults)
    assert {fault.target for fault in faults} - {None} <= {1, 2, 3}


def test_a_short_soak_gets_as_many_faults_as_fit_and_an_unknown_kind_is_refused():
    assert [f.kind for f in schedule(3, 60, [1], kinds=["kill-agent"], gap=(10, 10), hold=(5, 5))] == \
        ["kill-agent"] * 4  # at 10, 25, 40, 55: the fifth would end after 60 s
    with pytest.raises(ValueError, match="unknown fault kinds"):
        schedule(3, 60, [1], kinds=["unplug-the-rack"])



def test_the_nemesis_injects_and_heals_in_order_logs_each_and_says_what_failed():
    done, clock = [], Clock(0.0)

    def inject(fault):
        done.append(("inject", fault.kind))
        if fault.kind == "pause-agent":
            raise OSError("no such process")

    def heal(fault):
        done.append(("heal", fault.kind))

    faults = [Fault(0.0, "kill-agent", 1, 0.01), Fault(0.0, "pause-agent", 2, 0.01)]
    nemesis = Nemesis(faults, {"kill-agent": (inject, heal), "pause-agent": (inject, heal)}, clock=clock).start()
    nemesis._thread.join(5)

    assert done == [("inject", "kill-agent"), ("heal", "kill-agent"), ("inject", "pause-agent"), ("heal", "pause-agent")]
    assert [(e.what, e.fault.kind, e.error) for e in nemesis.events] == [
        ("inject", "kill-agent", None), ("heal", "kill-agent", None),
        ("inject", "pause-agent", "OSError: no such process"), ("heal", "pause-agent", None)]
    assert nemesis.active() is None and nemesis.quiet_since() == 0.0
    with pytest.raises(ValueError, match="cannot inject"):
        Nemesis(faults, {"kill-agent": (inject, heal)})


def test_a_stop_heals_the_fault_in_force_at_once():
    healed = threading.Event()
    nemesis = Nemesis([Fault(0.0, "kill-broker", 3, 3600.0)],
                      {"kill-broker": (lambda fault: None, lambda fault: healed.set())}).start()
    while nemesis.active() is None:
        pass
    nemesis.stop(timeout=5)
    assert healed.is_set() and [e.what for e in nemesis.events] == ["inject", "heal"]


def test_the_report_counts_checks_and_places_a_violation_after_the_faults_before_it():
    ledger = Ledger()
    for name in INVARIANTS:
        ledger.check(name, True)
    ledger.check("no volume full", False, "0 bytes free on broker 3", at=130.0)
    fault = Fault(100.0, "pause-agent", 3, 20.0)
    events = [Event(100.0, "inject", fault), Event(120.0, "heal", fault)]

    text = report(ledger, events, {"pause-agent": [4.0]})

    assert "| pause-agent | 1 | 4.0 s, 4.0 s |" in text
    assert "| no volume full | 2 | 1 |" in text
    assert "+130.0 s **no volume full**: 0 bytes free on broker 3 (faults before: +100.0 s inject pause-agent; " \
           "+120.0 s heal pause-agent)" in text
    assert ledger.unchecked() == []
    with pytest.raises(ValueError, match="unknown invariant"):
        ledger.check("the moon is made of cheese", True)


def test_a_difference_that_begins_after_the_quotas_agreed_is_a_violation_once_it_outlasts_its_allowance():
    """Counted only from a heal until the quotas first agreed after it, a difference that began later (a throttle
    left in force for the rest of a soak) would never be looked at."""
    convergence = Convergence(within=80.0)
    convergence.healed("kill-agent", 10.0)
    assert convergence.differ(11.0) is None
    convergence.agree(15.0)  # converged 5 s after the heal
    said = [(at, since) for at in range(20, 200) if (since := convergence.differ(float(at))) is not None]
    assert convergence.after == {"kill-agent": [5.0]}
    assert said == [(101, 20.0), (182, 101.0)]  # from its start, then once per allowance while it lasts


def test_a_difference_gets_its_allowance_again_after_a_heal():
    convergence = Convergence(within=80.0)
    convergence.healed("kill-aggregator", 0.0)
    assert [convergence.differ(at) for at in (1.0, 70.0)] == [None, None]
    convergence.healed("cut-broker", 75.0)  # the fault in force meanwhile may have held it up
    assert convergence.differ(150.0) is None
    assert convergence.differ(156.0) == 1.0


def test_memory_is_compared_from_when_each_process_is_warm_and_a_restarted_one_from_its_own_warm_sample():
    """Compared from half-time, an aggregator started again three minutes before would be judged on its heap still
    filling, and one started after it not judged at all."""
    memory = MemoryGrowth(after=900.0, warm=300.0)
    for at in range(0, 1801, 10):
        memory.sample(at, "agent sidecar-1", 11, 50 << 20 if at < 1000 else 52 << 20)
        memory.sample(at, "aggregator", 20 if at < 700 else 21, (700 << 20) + ((at - 700) << 20 if 700 <= at < 1000
                                                                              else 300 << 20))
        if at >= 1600:  # started again too late to be warm by the end: not judged
            memory.sample(at, "agent sidecar-2", 12, 40 << 20)
    assert memory.grown() == {"agent sidecar-1": 2 << 20, "aggregator": 0}


def test_a_process_started_again_after_it_was_warm_is_named_with_its_pid():
    memory = MemoryGrowth(after=0.0, warm=0.0)
    memory.sample(0.0, "aggregator", 20, 100)
    memory.sample(5.0, "aggregator", 20, 130)
    memory.sample(6.0, "aggregator", 21, 90)
    memory.sample(9.0, "aggregator", 21, 95)
    assert memory.grown() == {"aggregator (pid 20)": 30, "aggregator (pid 21)": 5}


def test_a_long_gap_after_every_nth_fault_leaves_that_much_quiet():
    faults = schedule(2, 1800.0, [1, 2, 3], long_gap=(4, 90.0))
    quiet = [after.at - (before.at + before.hold) for before, after in zip(faults, faults[1:])]
    assert all(gap >= 90.0 for gap in quiet[3::4]) and all(gap < 90.0 for i, gap in enumerate(quiet) if i % 4 != 3)


def test_what_uses_a_filesystem_counts_its_entries_files_not_one_deleted_while_open(tmp_path):
    (tmp_path / "flood-1-0").mkdir()
    (tmp_path / "flood-1-0" / "0.log").write_bytes(b"x" * (3 << 20))
    (tmp_path / "small").write_bytes(b"x" * (1 << 20))
    with (tmp_path / "open").open("wb") as kept_open:
        kept_open.write(b"x" * (2 << 20))
        kept_open.flush()
        (tmp_path / "open").unlink()
        said = what_uses(str(tmp_path))
    assert "files 4 MiB: flood-1-0 3 MiB, small 1 MiB" in said


def _steady(recovery: Recovery, quotas: dict[int, float | None], rates: dict[int, int], seconds: int) -> list:
    """Each second the producer's acknowledged records (at `rates`' rate from each second given) and the quota in
    force (from each second given); the lifts said."""
    said, acknowledged, rate, quota = [], 0, 0, None
    for at in range(seconds):
        rate, quota = rates.get(at, rate), quotas.get(at, quota)
        acknowledged += rate
        recovery.acknowledged(float(at), acknowledged)
        if (lift := recovery.quota(float(at), quota)) is not None:
            said.append((at, lift))
    return said


def test_a_producer_back_at_its_rate_within_the_allowance_of_a_lift_is_judged_back_and_a_slow_one_not():
    recovery = Recovery(rate=200, lifted=1 << 30)
    said = _steady(recovery, {0: 1 << 30, 10: 5e6, 40: 1 << 30, 100: 3e5, 130: None},
                   {0: 200, 15: 130, 60: 400, 70: 200, 120: 100, 159: 200}, 200)
    assert said == [(40, "lift"), (130, "lift")]
    assert recovery.due(69.0) == [] and recovery.pending() == 2
    assert recovery.due(70.0) == [(40.0, 15.0, 184.0)]  # from 55 to 60: 4 s at 130, then the catch-up at 400
    (lift, back, best), = recovery.due(200.0)
    assert (lift, back) == (130.0, None) and 100 <= best < 180  # back to 200 only 29 s after the lift


def test_a_lift_after_the_last_resort_is_counted_apart_and_each_episode_once():
    recovery = Recovery(rate=200, lifted=1 << 30)
    said = _steady(recovery, {0: 1 << 30, 5: 5e6, 10: 1.0, 20: 5e6, 25: 1.0, 30: 1 << 30, 50: 1e6, 60: 1 << 30},
                   {0: 200}, 100)
    assert said == [(30, "lift after the last resort"), (60, "lift")]
    assert recovery.last_resort_episodes == 2 and recovery.after_last_resort == [30.0]
    assert [lift for lift, _, _ in recovery.due(100.0)] == [60.0]


@pytest.mark.parametrize("in_force, free, flooding, fits", [
    (1.0, LIMIT, True, True),  # at the hard limit: its 1 B/s
    (FLOOR, LIMIT, True, False),
    (1.0, LIMIT + 1, True, True),  # near the line the 1 B/s may hold
    (1.0, LIFTED_ABOVE, True, False),  # the last resort above the line
    (FLOOR, LIFTED_ABOVE, True, True),  # the descent's floor while the flood fills
    (FLOOR - 1, LIFTED_ABOVE, True, False),  # below the floor before the hard limit
    (PRODUCE_RATE, LIFTED_ABOVE, True, True),  # no step yet
    (None, LIFTED_ABOVE, True, False),
    (PRODUCE_RATE, LIFTED_ABOVE, False, True),  # the flood's topic deleted: lifted
    (5e6, LIFTED_ABOVE, False, False),
])
def test_the_soak_wants_the_hard_limits_1_b_s_a_step_of_the_descent_while_filling_and_a_lift_after(
        in_force, free, flooding, fits):
    assert FaultSoak._quota_fits(in_force, free, flooding) is fits
