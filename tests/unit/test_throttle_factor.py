"""The factor's timeline of proposal 047, on a clock the test moves."""

from datetime import datetime, timedelta, timezone

import pytest

from quota_sidecar.decide.throttle_factor import FactorState, after_failure, after_incomplete, after_success

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
VALIDITY = timedelta(minutes=2)


def replay(steps, fallback=0.0, validity=VALIDITY):
    """steps: (minute, factor or None for a failed poll) -> [(factor, source, fallback switches)]"""
    state, seen = FactorState(), []
    for minute, factor in steps:
        now = T0 + timedelta(minutes=minute)
        state = after_failure(state, now, validity, fallback) if factor is None else after_success(state, factor, now)
        seen.append((state.factor, state.source, state.fallback_switches))
    return seen


def test_proposal_047_example():
    assert replay([(0, 1.0), (1, None), (2, None), (3, None), (4, 1.0)]) == [
        (1.0, "computed", 0), (1.0, "last_valid", 0), (1.0, "last_valid", 0), (0.0, "fallback", 1), (1.0, "computed", 1)]


def test_initial_factor_is_valid_from_the_first_poll():
    assert replay([(0, None), (2, None), (2.01, None)]) == [
        (1.0, "initial", 0), (1.0, "initial", 0), (0.0, "fallback", 1)]


def test_expiry_is_strict_at_the_boundary():
    state = after_success(FactorState(), 0.0, T0)
    at_boundary = after_failure(state, T0 + VALIDITY, VALIDITY, 1.0)
    just_after = after_failure(state, T0 + VALIDITY + timedelta(seconds=1), VALIDITY, 1.0)
    assert (at_boundary.factor, at_boundary.source) == (0.0, "last_valid")
    assert (just_after.factor, just_after.source) == (1.0, "fallback")


def test_each_switch_into_fallback_counts_once():
    steps = [(0, 1.0), (3, None), (4, None), (5, None), (6, 0.0), (9, None), (10, None)]
    assert [switches for *_, switches in replay(steps)] == [0, 1, 1, 1, 1, 2, 2]


def test_zero_validity_falls_back_on_the_first_failure():
    assert replay([(0, 0.0), (0.5, None)], fallback=0.5, validity=timedelta(0))[1] == (0.5, "fallback", 1)


@pytest.mark.parametrize("fallback", [0.0, 0.25, 1.0])
def test_fallback_value_is_the_configured_one(fallback):
    assert replay([(0, 1.0), (10, None)], fallback=fallback)[1][0] == fallback


def test_age_is_measured_from_valid_from():
    state = after_success(FactorState(), 1.0, T0)
    assert state.age(T0 + timedelta(seconds=42)) == timedelta(seconds=42)
    assert FactorState().age(T0) is None


def test_incomplete_view_applies_the_fallback_at_once_and_counts_it():
    state = after_success(FactorState(), 1.0, T0)
    state = after_incomplete(state, T0 + timedelta(seconds=10), 0.0)
    assert (state.factor, state.source, state.fallback_switches) == (0.0, "fallback", 1)
    assert after_incomplete(state, T0 + timedelta(seconds=20), 0.0).fallback_switches == 1
    assert after_success(state, 1.0, T0 + timedelta(seconds=30)).source == "computed"
