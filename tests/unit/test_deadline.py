"""deadline.py: one pass's deadline, on a clock the tests move."""

import threading

import pytest

from quota_sidecar import deadline
from quota_sidecar.errors import AdminError, PassTimeout


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_outside_a_pass_there_is_no_deadline():
    assert deadline.time_left() is None
    assert deadline.left(3.0) == 3.0 and deadline.left() is None
    assert not deadline.expired()


def test_left_is_the_time_to_the_deadline_capped_by_the_callers_own_limit():
    clock = Clock()
    with deadline.within(10, "the poll", clock):
        clock.now += 4
        assert deadline.time_left() == 6.0
        assert deadline.left() == 6.0 and deadline.left(at_most=2.5) == 2.5 and deadline.left(at_most=30) == 6.0
    assert deadline.time_left() is None


def test_a_deadline_that_ran_out_fails_the_pass_naming_it_and_what_it_was_doing():
    clock = Clock()
    with deadline.within(2, "the poll", clock):
        clock.now += 2.5
        assert deadline.expired() and deadline.time_left() == 0.0
        with pytest.raises(PassTimeout) as raised:
            deadline.left(5.0, doing="reading __quota_sidecar_state")
    assert str(raised.value) == "the poll ran out of its 2s deadline while reading __quota_sidecar_state"
    assert isinstance(raised.value, AdminError)  # the loop counts it as any failed poll


def test_a_nested_deadline_never_extends_the_outer_one():
    clock = Clock()
    with deadline.within(5, "the poll", clock):
        with deadline.within(60, "a longer step", clock):
            assert deadline.time_left() == 5.0
        with deadline.within(1, "a shorter step", clock):
            assert deadline.time_left() == 1.0
        assert deadline.time_left() == 5.0


def test_each_thread_has_its_own_deadline():
    seen = []
    with deadline.within(5):
        other = threading.Thread(target=lambda: seen.append(deadline.time_left()))
        other.start()
        other.join()
    assert seen == [None]
