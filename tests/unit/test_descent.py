"""The descent's steps (decide/descent.py): every throttle Kafka computes from them stays short."""

from __future__ import annotations

from datetime import timedelta

import pytest

from builders import AT, Clock, MemoryStore, OneVolumeAdmin, sidecar_config
from quota_sidecar.common import records
from quota_sidecar.common.observation import Observation, Volume
from quota_sidecar.common.records import Owned
from quota_sidecar.configuration.settings import QuotaConfig
from quota_sidecar.decide import descent, quotas
from quota_sidecar.decide.decider import Decider
from quota_sidecar.decide.descent import Written
from quota_sidecar.wiring import assemble

CONFIG = QuotaConfig(floor=26_214, descent_ratio=3.0, descent_step=timedelta(seconds=36))
WINDOW = 12.0  # Kafka's quota window at most, seconds (11 samples of 1 s, the current one partly)


def written(factor: float, descending: bool, fill: float | None, in_force: dict, now: float = 1000.0,
            tenants: dict | None = None, config: QuotaConfig = CONFIG) -> quotas.ClientQuotas:
    tenants = tenants or {}
    goal = quotas.wanted(config, factor, tenants)
    return descent.descend(goal, factor, descending, fill, in_force, {None: config.produce, **tenants}, now, config)


def producer(result: quotas.ClientQuotas) -> float | None:
    return result.default_user[quotas.PRODUCE]


def throttle_seconds(observed: float, quota: float) -> float:
    """Kafka's bandwidth throttle time, QuotaUtils.throttleTime."""
    return max(0.0, (observed - quota) / quota * WINDOW)


def test_the_first_step_is_a_third_of_the_fastest_brokers_fill_rate():
    assert producer(written(1.0, True, 20e6, {})) == pytest.approx(20e6 / 3, abs=1)


def test_no_step_comes_sooner_than_the_step_time_after_the_last_one():
    in_force = {None: Written(6_666_666.0, at=1000.0 - 20)}
    assert producer(written(1.0, True, 20e6, in_force)) == 6_666_666.0
    in_force = {None: Written(6_666_666.0, at=1000.0 - 36)}
    assert producer(written(1.0, True, 20e6, in_force)) == 2_222_222.0


def test_a_flood_comes_down_to_the_floor_with_every_throttle_under_30_seconds():
    rate, quota, now, steps = 50e6, None, 0.0, 0
    while quota != CONFIG.floor:
        in_force = {None: Written(quota, at=None if quota is None else now - 36)}
        new = producer(written(1.0, True, rate, in_force, now=now))
        assert throttle_seconds(rate if quota is None else quota, new) <= 24.0 + 1e-9
        quota, rate, now, steps = new, new, now + 36, steps + 1
    assert steps == 7  # 50 MB/s to 26 kB/s: about four minutes


def test_the_soft_zones_goal_and_the_fallback_come_in_steps_to_where_proposal_047_puts_them():
    config = QuotaConfig(produce=1e6, floor=26_214)
    assert producer(written(0.01, False, None, {None: Written(1e6, at=0.0)}, config=config)) == 333_334.0
    assert producer(written(0.01, False, None, {None: Written(30_000.0, at=0.0)}, config=config)) == 10_000.0
    slow = QuotaConfig(produce=1000.0, floor=26_214)  # a producer quota below the floor: the fallback halves it
    assert producer(written(0.5, False, None, {None: Written(1.0, at=999.0)}, config=slow)) == 500.0


def test_room_back_lifts_at_once():
    assert producer(written(1.0, False, 100.0, {None: Written(26_214.0, at=999.0)})) is None


def test_the_hard_limit_is_one_byte_a_second_at_once():
    assert producer(written(0.0, False, 50e6, {None: Written(None)})) == descent.LAST_RESORT


def test_after_the_hard_limit_the_floor_comes_back_at_once():
    assert producer(written(1.0, True, 10.0, {None: Written(1.0, at=999.0)})) == 26_214.0


def test_a_tenant_steps_from_its_own_rate_and_gets_it_back():
    alice = "alice"
    down = written(1.0, True, 50e6, {alice: Written(1e6)}, tenants={alice: 1e6})
    assert down.tenants[alice] == 333_334.0
    back = written(1.0, False, 0.0, {alice: Written(333_334.0, at=999.0)}, tenants={alice: 1e6})
    assert back.tenants[alice] is None  # handed back: its own rate again


def test_a_tenant_an_operator_raised_is_handed_back_not_stepped():
    assert written(1.0, False, None, {"bob": Written(2e9)}, tenants={"bob": 1e9}).tenants["bob"] is None


def test_a_tenant_slower_than_the_floor_is_left_at_its_own_rate():
    assert written(1.0, True, 50e6, {"bob": Written(10_000.0)}, tenants={"bob": 10_000.0}).tenants["bob"] is None


def test_the_fastest_broker_is_its_filling_volumes_together():
    judged = [{"broker_id": 1, "fill_bytes_per_sec": 3e6}, {"broker_id": 1, "fill_bytes_per_sec": 2e6},
              {"broker_id": 2, "fill_bytes_per_sec": 4e6}, {"broker_id": 3, "fill_bytes_per_sec": -9e6},
              {"broker_id": 3, "fill_bytes_per_sec": None}]
    assert descent.fastest_fill(judged) == 5e6
    assert descent.fastest_fill([]) is None


def test_in_force_knows_when_the_sidecars_lowered_a_value_still_theirs():
    owned = {(None, quotas.PRODUCE): Owned(None, 26_214.0, seen_at=50.0, before=78_280.0, before_known=True),
             ("alice", quotas.PRODUCE): Owned(1e6, 333_334.0, seen_at=60.0, before=1e6, before_known=True),
             ("bob", quotas.PRODUCE): Owned(1e6, 26_214.0, seen_at=70.0, before=1.0, before_known=True)}
    found = descent.in_force({None: {quotas.PRODUCE: 26_214.0}, "alice": {quotas.PRODUCE: 5e5},
                              "bob": {quotas.PRODUCE: 26_214.0}}, owned)
    # alice's changed by someone else since; bob's raised from the hard limit's: the next step need not wait
    assert found == {None: Written(26_214.0, 50.0), "alice": Written(5e5, None), "bob": Written(26_214.0, None)}
    assert descent.in_force({}, {}) == {None: Written(None)}  # no quota: unlimited


def descending_judge(verdicts: list[bool], limits_seen: list[dict]):
    """The volume rule's answers: filling at 3 MB/s, descending or not, in turn; the limits it was asked with."""
    def judge(rows, limits):
        limits_seen.append(limits)
        descending = verdicts.pop(0)
        newest = {(row["broker_id"], row["log_dir"]): row for row in rows}  # a row per volume, as Spark's
        return 1.0, [{**row, "available_ratio": 0.5, "fill_bytes_per_sec": 3e6 if descending else -1e6,
                      "seconds_to_limit": 60.0 if descending else None, "violated": False, "predicted": False,
                      "throttle_factor": 1.0, "descending": descending} for row in newest.values()]
    return judge


def test_the_loop_steps_down_a_step_apart_records_the_rate_and_lifts():
    config = sidecar_config(**{"broker.id": 1, "produce": None})  # producers unlimited but for the descent
    admin, store, limits = OneVolumeAdmin(10 << 30, 5 << 30), MemoryStore(), []
    car = assemble(config, admin, store, lambda *_: Decider(config, descending_judge([True] * 5 + [False], limits)),
                   clock=Clock())
    written = []
    for seconds in (0, 10, 20, 30, 40, 50):
        car.clock.now = AT + timedelta(seconds=seconds)
        car.run_pass()
        written.append((admin.quotas.get(None, {}).get(quotas.PRODUCE),
                        records.descent_rate(records.parse(store.read_all()))))

    assert written == [(1e6, 3e6), (1e6, 3e6), (1e6, 3e6), (1e6, 3e6), (333_334.0, 3e6), (None, None)]
    assert [seen["descent_rate_bytes_per_sec"] for seen in limits] == [None, 3e6, 3e6, 3e6, 3e6, 3e6]


def test_an_agent_started_during_a_descent_judges_at_the_recorded_rate_and_waits_out_the_step():
    config = sidecar_config(**{"broker.id": 1, "produce": None})  # producers unlimited but for the descent
    admin, store, limits = OneVolumeAdmin(10 << 30, 5 << 30), MemoryStore(), []
    first = assemble(config, admin, store, lambda *_: Decider(config, descending_judge([True], [])), clock=Clock())
    first.run_pass()
    second = assemble(config, admin, store, lambda *_: Decider(config, descending_judge([True], limits)),
                      clock=Clock(AT + timedelta(seconds=10)))
    second.run_pass()

    assert limits[0]["descent_rate_bytes_per_sec"] == 3e6
    assert admin.quotas[None][quotas.PRODUCE] == 1e6  # the first agent's step, 10 s old: held


def test_passes_come_every_step_while_the_descent_lasts():
    config = sidecar_config(**{"broker.id": 1, "produce": None, "storage.check.interval": "PT1M"})
    car = assemble(config, OneVolumeAdmin(10 << 30, 5 << 30), MemoryStore(),
                   lambda *_: Decider(config, descending_judge([True, False], [])), clock=Clock())
    car.run_pass()
    during = car._full_every(60.0)
    car.clock.now = AT + timedelta(seconds=60)
    car.run_pass()

    assert (during, car._full_every(60.0)) == (36.0, 60.0)


def test_a_poll_that_could_not_decide_takes_no_step():
    assert producer(descent.descend(quotas.wanted(CONFIG, 1.0, {}), 1.0, True, 20e6, {None: Written(1e6, at=0.0)},
                                    {None: None}, 1000.0, CONFIG, hold=True)) == 1e6


def test_a_step_is_dated_when_first_seen_when_its_record_looked_earlier():
    """While polls fail, a record's look is the last success's: the step it wrote is as old as first seen."""
    config = sidecar_config(**{"broker.id": 1, "produce": None})
    decider = Decider(config, descending_judge([True] * 3, []))
    seen = {None: Written(333_334.0, at=AT.timestamp() - 300)}  # its writer's look, 5 minutes old
    for seconds in (0, 20):
        decision = decider.decide(Observation(at=AT + timedelta(seconds=seconds), brokers=(1,),
                                              volumes=OneVolumeAdmin(10 << 30, 5 << 30).describe_volumes((1,), AT),
                                              tenant_rates={}, producer_rates=seen))
        assert decision.written_quotas.default_user[quotas.PRODUCE] == 333_334.0  # held: first seen at +0 s


def test_a_decision_says_which_producer_quota_its_step_came_from():
    """What the look read (the writer leaves a lowering alone when another value is in force by then); a decision
    without a look at the quotas names none."""
    config = sidecar_config(**{"broker.id": 1, "produce": None})
    volumes = OneVolumeAdmin(10 << 30, 5 << 30).describe_volumes((1,), AT)
    seen = {None: Written(333_334.0, at=AT.timestamp() - 300)}
    looked = Decider(config, descending_judge([True], [])).decide(
        Observation(at=AT, brokers=(1,), volumes=volumes, tenant_rates={}, producer_rates=seen))
    assert looked.stepped_from == {None: 333_334.0}
    unread = Decider(config, descending_judge([True], [])).decide(
        Observation(at=AT, brokers=(1,), volumes=volumes, tenant_rates={}))
    assert unread.stepped_from == {}


def test_a_flood_that_began_seconds_ago_is_stepped_from_its_growth_over_kafkas_window_not_the_slope():
    """Flat for a minute, then 5 MB/s for 10 s: the slope over the fill window shows a part of it; a step from
    that would throttle the flood's clients for minutes, one from its growth for under (ratio - 1) x the window."""
    volumes = [Volume(1, "/data", 10 << 30, (5 << 30) - max(0, seconds - 60) * 5_000_000,
                      AT + timedelta(seconds=seconds)) for seconds in range(0, 75, 5)]
    history = {(1, "/data"): tuple(volumes)}
    judged = [{"broker_id": 1, "fill_bytes_per_sec": 1.2e6}]  # about what a slope over the minute shows

    bound = descent.fill_bound(judged, history)

    assert bound == pytest.approx(5e6, rel=0.01)
    step = producer(written(1.0, True, bound, {}))
    assert throttle_seconds(5e6, step) <= 2 * WINDOW + 1
    assert descent.fill_bound(judged, {(1, "/data"): tuple(volumes[:3])}) == 1.2e6  # steady: the slope
    assert descent.fastest_growth({(1, "/data"): tuple(volumes[-2:])}) is None  # nothing a window older


def test_the_decider_steps_a_young_flood_from_its_growth():
    config = sidecar_config(**{"broker.id": 1, "produce": None})
    decider = Decider(config, descending_judge([False, False, True], []))  # its slope: 3 MB/s
    for seconds, available in ((0, 5 << 30), (5, 5 << 30), (10, (5 << 30) - 300_000_000)):  # 30 MB/s since +5 s
        at = AT + timedelta(seconds=seconds)
        volume = Volume(1, "/data", 10 << 30, available, at)
        decision = decider.decide(Observation(at=at, brokers=(1,), volumes=(volume,), tenant_rates={},
                                              producer_rates={None: Written(None)}))
    assert decision.written_quotas.default_user[quotas.PRODUCE] == 10_000_000.0  # a third of 30 MB/s, not of 3
