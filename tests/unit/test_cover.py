"""Covering the brokers whose agent is down: who covers, and what the cover watch judges."""

import logging
from datetime import timedelta

from prometheus_client import generate_latest

from quota_sidecar.common.errors import RetryableAdminError
from quota_sidecar.common.observation import Volume
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.decide.cover import to_cover
from quota_sidecar.observe.cover_watch import CoverWatch
from quota_sidecar.serve import status
from quota_sidecar.serve.metrics import registry_for

from builders import AT, MiB

AFTER = 2.0


def test_the_live_agent_of_the_lowest_broker_covers_the_brokers_whose_agent_went_silent():
    seen = {1: 99.5, 2: 99.0, 3: 97.0, 5: 90.0}  # broker 3's agent silent for 3 s; 4 has none; 5 is gone
    assert to_cover(1, [1, 2, 3, 4], seen, now=100.0, after=AFTER, reading_since=0.0) == [3]
    assert to_cover(2, [1, 2, 3, 4], seen, now=100.0, after=AFTER, reading_since=0.0) == []  # 1 covers
    assert to_cover(2, [1, 2, 3, 4], {**seen, 1: 90.0}, now=100.0, after=AFTER, reading_since=0.0) == [1, 3]


def test_an_agent_that_cannot_read_its_own_heartbeat_covers_nobody():
    """The pipeline cluster away: every agent looks down to it, and covering them all would flood the cluster."""
    assert to_cover(1, [1, 2, 3], {2: 99.5}, now=100.0, after=AFTER, reading_since=0.0) == []
    assert to_cover(1, [1, 2, 3], {1: 90.0, 2: 90.0}, now=100.0, after=AFTER, reading_since=0.0) == []


def test_an_agent_that_just_started_reading_waits_before_covering():
    assert to_cover(1, [1, 2], {1: 100.5, 2: 98.0}, now=100.5, after=AFTER, reading_since=100.0) == []
    assert to_cover(1, [1, 2], {1: 102.0, 2: 98.0}, now=102.0, after=AFTER, reading_since=100.0) == [2]


class VolumesOfTheCoveredBroker:
    """A stand-in admin: broker 3's one volume, its free space as set; counts the DescribeLogDirs asked."""

    def __init__(self, free):
        self.free, self.asked = free, []

    def describe_volumes(self, brokers, now):
        self.asked.append(list(brokers))
        if self.free is None:
            raise RetryableAdminError("DescribeLogDirs to broker 3 failed: RequestTimedOutError")
        return [Volume(3, "/data", 1000 * MiB, self.free, now), Volume(3, "/offline", 0, 0, now, "KafkaStorageError")]


def cover_watch(admin, targets, limit=StorageLimit(100 * MiB), clock=None):
    ticks = iter(i / 5 for i in range(1000))
    return CoverWatch(heartbeats=None, targets=targets, admin=admin, limit=limit, interval=0.2, fill_window=2.0,
                      monotonic=clock or (lambda: next(ticks)), utcnow=lambda: AT)


def test_a_covered_broker_at_the_limit_is_judged_and_one_not_covered_is_not_asked():
    admin = VolumesOfTheCoveredBroker(free=400 * MiB)
    covering = [3]
    watch = cover_watch(admin, lambda brokers, now: covering)
    watch.brokers = (1, 2, 3)
    assert watch.sample() == []
    admin.free = 100 * MiB
    assert watch.sample() == [(3, "/data")]  # the offline dir is no volume to judge
    covering.clear()  # its agent beats again
    assert watch.sample() == [] and admin.asked == [[3], [3]]


def test_with_a_lead_time_a_covered_volume_is_judged_at_its_fill_rate_over_the_window():
    admin = VolumesOfTheCoveredBroker(free=600 * MiB)
    watch = cover_watch(admin, lambda brokers, now: [3], StorageLimit(100 * MiB, lead_time=timedelta(seconds=3)))
    judged = []
    for _ in range(12):  # 20 MiB a sample of 0.2 s: 100 MiB/s
        judged.append(watch.sample())
        admin.free -= 20 * MiB
    assert judged[9] == [] and judged[11] == [(3, "/data")]  # 320 MiB above the limit: 3.2 s; 280: 2.8 s


def test_a_failed_describe_keeps_what_was_judged_and_is_said_once(caplog):
    admin = VolumesOfTheCoveredBroker(free=50 * MiB)
    watch = cover_watch(admin, lambda brokers, now: [3])
    watch.sample()
    admin.free = None
    with caplog.at_level(logging.WARNING):
        assert watch.sample() == [(3, "/data")] and watch.sample() == [(3, "/data")]
    assert caplog.text.count("DescribeLogDirs of a covered broker failed") == 1


def test_status_names_the_agents_heard_and_the_brokers_covered(a_snapshot, later):
    built = status.build(a_snapshot(), later, mode="running")
    assert built["cover"] == {"covering": [3], "every_seconds": 0.2, "agents_heard": {"1": 0.3, "3": 12.5},
                              "down_after_seconds": 2.0}
    assert ("agents heard: 1 (0.3s ago), 3 (12.5s ago); down after 2s silent; covering broker 3 (DescribeLogDirs "
            "every 0.2s)") in status.render(built)
    snapshot = a_snapshot()
    assert "quota_sidecar_covered_brokers 1.0" in generate_latest(registry_for(lambda: snapshot)).decode()
