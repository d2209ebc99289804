"""deadline.py: one pass's deadline, on a clock the tests move; and a real admin client held to it."""

import socket
import threading
import time

import pytest

from quota_sidecar.common import deadline
from quota_sidecar.common.errors import AdminError, PassTimeout, RetryableAdminError
from quota_sidecar.pipeline.transport import Pipeline
from quota_sidecar.kafka_clients.admin import ClusterAdmin

from builders import Clock

TOLERANCE = 2.0  # seconds a busy machine may add to a deadline (thread wake-ups, closing the client)



def test_outside_a_pass_there_is_no_deadline():
    assert deadline.time_left() is None
    assert deadline.left(3.0) == 3.0 and deadline.left() is None
    assert not deadline.expired()


def test_left_is_the_time_to_the_deadline_capped_by_the_callers_own_limit():
    clock = Clock(100.0)
    with deadline.within(10, "the poll", clock):
        clock.now += 4
        assert deadline.time_left() == 6.0
        assert deadline.left() == 6.0 and deadline.left(at_most=2.5) == 2.5 and deadline.left(at_most=30) == 6.0
    assert deadline.time_left() is None


def test_a_deadline_that_ran_out_fails_the_pass_naming_it_and_what_it_was_doing():
    clock = Clock(100.0)
    with deadline.within(2, "the poll", clock):
        clock.now += 2.5
        assert deadline.expired() and deadline.time_left() == 0.0
        with pytest.raises(PassTimeout) as raised:
            deadline.left(5.0, doing="reading __quota_sidecar_state")
    assert str(raised.value) == "the poll ran out of its 2s deadline while reading __quota_sidecar_state"
    assert isinstance(raised.value, AdminError)  # the loop counts it as any failed poll


def test_a_nested_deadline_never_extends_the_outer_one():
    clock = Clock(100.0)
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


def test_capped_is_the_shorter_of_a_wait_and_the_time_left_and_never_raises():
    clock = Clock(100.0)
    assert deadline.capped(3.0) == 3.0
    with deadline.within(2, "the poll", clock):
        assert deadline.capped(3.0) == 2.0 and deadline.capped(0.5) == 0.5
        clock.now += 5
        assert deadline.capped(3.0) == 0.0


def test_an_admin_call_to_a_server_that_never_answers_ends_at_the_deadline():
    """A real admin client against a socket that accepts connections and never answers (a hung broker): its
    bootstrap, retries and back-offs end with the pass's deadline, not kafka-python's 30 s."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        server = "127.0.0.1:%d" % silent.getsockname()[1]
        with ClusterAdmin({"bootstrap_servers": [server]}) as admin:
            started = time.monotonic()
            with pytest.raises(RetryableAdminError, match="Unable to bootstrap"), deadline.within(1.5, "the poll"):
                admin.live_broker_ids()
            elapsed = time.monotonic() - started
    assert elapsed < 1.5 + TOLERANCE


def test_a_closed_port_fails_the_call_naming_why_not_that_time_ran_out():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        server = "127.0.0.1:%d" % probe.getsockname()[1]
    with ClusterAdmin({"bootstrap_servers": [server]}) as admin, deadline.within(0.5, "the poll"):
        with pytest.raises(RetryableAdminError) as raised:
            admin.live_broker_ids()
    assert str(raised.value) == f"cannot reach any bootstrap server {server} (connection refused)"


@pytest.mark.parametrize("keys, seconds", [
    ({}, 10.0),
    ({"kafka.admin.request.timeout.ms": "2000"}, 7.0),  # never more than a few seconds past the request timeout
    ({"kafka.admin.request.timeout.ms": "60000"}, 10.0),
    ({"poll.timeout": "PT45S"}, 45.0),
])
def test_the_poll_deadline_of_a_configuration(keys, seconds):
    from quota_sidecar.configuration import config as cfg

    config = cfg.from_properties({cfg.PREFIX + key: value for key, value in {
        "kafka.admin.bootstrap.servers": "h:1", "storage.check.interval": "PT0S", **keys}.items()})
    assert config.poll_timeout.total_seconds() == seconds


@pytest.mark.parametrize("left, waits", [
    (None, 10.0),  # outside a pass: the question's own limit
    (9.5, 6.5),    # early in a pass: all but the writes' share of the deadline (3 s of 10)
    (4.0, 1.0),    # late: the writes keep their 3 s, not 30 % of what is left (1.2 s)
    (2.0, 0.0),    # later still: no question, the writes have what is left
])
def test_a_question_to_the_aggregator_leaves_the_pass_a_fixed_share_of_its_deadline_for_its_writes(left, waits):
    pipeline = Pipeline({"bootstrap_servers": ["127.0.0.1:9"]}, lambda: "cluster", 1, timeout=10.0)
    if left is None:
        assert pipeline._budget() == waits
        return
    clock = Clock(100.0)
    with deadline.within(10, "the replication pass", clock):
        clock.now += 10 - left
        assert pipeline._budget() == pytest.approx(waits)
