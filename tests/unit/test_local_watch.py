"""The local watch: when a local log dir needs a pass now, read with the real statvfs of this machine."""

import logging
from datetime import timedelta

import pytest

from harness.waiting import eventually
from quota_sidecar.common.observation import Volume
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.configuration import config as cfg
from quota_sidecar.configuration.config import LocalWatchConfig
from quota_sidecar.observe.host_checks import check_host
from quota_sidecar.observe.local_watch import LocalWatch
from quota_sidecar.observe.volumes import (LocalSample, at_the_limit, default_horizon, fill_rate, foreign_dirs,
                                           hold_the_pass, in_danger, predicted, seconds_to_limit, time_left,
                                           until_judged)

MiB = 1 << 20
LIMIT = StorageLimit(min_available_bytes=100 * MiB)


def filling(per_second: float, start_free: float, seconds: float = 1.0, every: float = 0.1, total=1000 * MiB):
    steps = int(round(seconds / every)) + 1
    return [LocalSample("/data", i * every, total, int(start_free - per_second * i * every)) for i in range(steps)]


def test_the_fill_rate_is_the_least_squares_slope_of_free_space():
    assert fill_rate(filling(10 * MiB, 500 * MiB)) == pytest.approx(10 * MiB)
    assert fill_rate(filling(10 * MiB, 500 * MiB)[:1]) is None


def test_a_volume_at_the_limit_needs_a_pass_now():
    assert seconds_to_limit([LocalSample("/data", 0.0, 1000 * MiB, 100 * MiB)], LIMIT) == 0.0


def test_time_to_the_limit_at_the_current_fill_rate():
    assert seconds_to_limit(filling(100 * MiB, 400 * MiB), LIMIT) == pytest.approx(2.0)  # 200 MiB left at 100 MiB/s


def test_a_volume_that_empties_or_stands_still_is_never_in_danger():
    assert seconds_to_limit(filling(-10 * MiB, 400 * MiB), LIMIT) is None
    assert seconds_to_limit(filling(0, 400 * MiB), LIMIT) is None


def test_only_the_newest_second_sets_the_fill_rate():
    quiet_then_flood = [LocalSample("/data", t, 1000 * MiB, 900 * MiB) for t in range(0, 60)]
    quiet_then_flood += [LocalSample("/data", 60 + i / 10, 1000 * MiB, int(900 * MiB - 100 * MiB * i / 10))
                         for i in range(1, 11)]
    assert seconds_to_limit(quiet_then_flood, LIMIT) == pytest.approx(7.0, rel=0.05)


def test_a_ratio_limit_is_a_share_of_the_total():
    ratio = StorageLimit(min_available_ratio=0.25)
    assert seconds_to_limit(filling(50 * MiB, 350 * MiB), ratio) == pytest.approx(1.0)  # 300 left, 250 limit


def test_dirs_in_danger_are_those_within_the_horizon():
    history = {"/fast": filling(100 * MiB, 400 * MiB), "/slow": filling(MiB, 400 * MiB), "/empty": []}
    assert in_danger(time_left(history, LIMIT), horizon=3.0) == ["/fast"]
    assert in_danger(time_left(history, LIMIT), horizon=1.0) == []


def test_only_dirs_at_or_below_the_hard_limit_are_at_it_whatever_the_lead_time():
    below = [LocalSample("/below", 0.0, 1000 * MiB, 99 * MiB)]
    at = [LocalSample("/at", 0.0, 1000 * MiB, 100 * MiB)]
    history = {"/below": below, "/at": at, "/fast": filling(100 * MiB, 400 * MiB)}
    assert at_the_limit(time_left(history, LIMIT)) == ["/below", "/at"]
    long_lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=5))
    assert at_the_limit(time_left(history, long_lead)) == ["/below", "/at"]  # a predicted violation is the pass's


def test_a_dir_is_judged_violated_at_the_limit_or_a_lead_time_before_it():
    history = {"/fast": filling(100 * MiB, 400 * MiB), "/slow": filling(10 * MiB, 400 * MiB), "/still": filling(0, 400 * MiB)}
    assert until_judged(time_left(history, LIMIT), LIMIT) == pytest.approx(2.0)  # the nearest: 200 MiB left at 100 MiB/s
    lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=0.5))
    assert until_judged(time_left(history, lead), lead) == pytest.approx(1.5)
    long_lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=5))
    assert until_judged(time_left(history, long_lead), long_lead) == 0.0
    assert until_judged(time_left({"/still": filling(0, 400 * MiB)}, LIMIT), LIMIT) is None


def test_a_dir_is_predicted_to_violate_when_its_fill_rate_over_the_window_brings_it_to_the_limit_within_the_lead():
    lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=5))
    fast, slow = filling(100 * MiB, 400 * MiB, seconds=2), filling(10 * MiB, 400 * MiB, seconds=2)
    assert predicted({"/fast": fast, "/slow": slow}, lead) == ["/fast"]  # 1 s left at 100 MiB/s; 28 s at 10
    assert predicted({"/fast": fast}, LIMIT) == []  # no lead time, no prediction
    below = [LocalSample("/below", 0.0, 1000 * MiB, 99 * MiB)]
    assert predicted({"/below": below}, lead) == []  # at the limit already: a violation, not a prediction


def test_a_burst_of_a_second_in_a_calm_window_is_no_predicted_violation():
    """The fill window's slope, as the aggregator judges it, not the last second's: a writeback of dirty pages
    takes the free space down at once, and a second's slope would call that a flood."""
    lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=5))
    calm = [LocalSample("/data", i * 0.1, 1000 * MiB, 600 * MiB) for i in range(50)]
    burst = [*calm, *(LocalSample("/data", 5.0 + i * 0.1, 1000 * MiB, (600 - 30 * i) * MiB) for i in range(1, 11))]
    assert time_left({"/data": burst[-11:]}, lead)["/data"] < 5.0  # the last second alone: within the lead
    assert predicted({"/data": burst}, lead) == []


def test_the_watch_judges_its_dirs_on_the_samples_of_the_fill_window():
    readings = iter(range(600, 0, -10))  # MiB free, 100 MiB/s at a sample each 0.1 s
    clock = iter(i / 10 for i in range(100))
    config = LocalWatchConfig(("/data",), timedelta(milliseconds=100))
    lead = StorageLimit(100 * MiB, lead_time=timedelta(seconds=3))
    local = LocalWatch(config, lead, lambda: None, horizon=lambda: 0.5,
                       read=lambda log_dir, at: LocalSample(log_dir, at, 1000 * MiB, next(readings) * MiB),
                       clock=lambda: next(clock), fill_window=2.0)
    judged = []
    for _ in range(25):
        local.sample()
        judged.append(local.judged)
    assert judged[18] == [] and judged[20] == ["/data"]  # 300 MiB left at 100 MiB/s: 3 s, the lead time
    assert len(local._fill["/data"]) == 21  # two seconds of samples


def scripted_watch(frees_mib, fill_window=60.0) -> LocalWatch:
    """A watch every 0.1 s whose samples read `frees_mib`, in order; the limit 100 MiB free."""
    readings, clock = iter(frees_mib), iter(i / 10 for i in range(10_000))
    return LocalWatch(LocalWatchConfig(("/data",), timedelta(milliseconds=100)), LIMIT, lambda: None,
                      horizon=lambda: 0.5, read=lambda log_dir, at: LocalSample(log_dir, at, 1000 * MiB,
                                                                                 int(next(readings) * MiB)),
                      clock=lambda: next(clock), fill_window=fill_window)


def test_a_flood_is_judged_the_agents_reaction_time_before_the_limit_and_stays_judged_until_space_is_freed():
    """100 MiB/s: in the 0.2 s a watch interval and the verdict's write take, 20 MiB land. Judged when the free
    space less those reaches the limit, the producer's last bytes land before it, not past it. Held still, the
    flood is not forgotten after the fill window (lifted, it would come back at full speed); a deletion frees it."""
    flood = [200, 190, 180, 170, 160, 150, 140, 130]
    held_still = [118] * 40  # four seconds: twice the fill window
    local = scripted_watch([*flood, 118, *held_still, 300], fill_window=2.0)
    judged = []
    for _ in range(len(flood) + 1 + len(held_still) + 1):
        local.sample()
        judged.append(list(local.judged))

    assert local.reaction == pytest.approx(0.2)
    assert judged[len(flood) - 1] == [] and judged[len(flood)] == ["/data"]  # 30 MiB above it: not yet; 18: now
    assert all(j == ["/data"] for j in judged[len(flood):-1])
    assert judged[-1] == []  # 200 MiB above the limit after a deletion: away from it


def test_the_reaction_time_is_the_watch_interval_and_the_verdicts_last_write():
    local = scripted_watch([200, 190, 180, 170, 160, 150])
    local.reacted(0.5)
    for _ in range(6):
        local.sample()
    assert local.reaction == pytest.approx(0.6)
    assert local.reaching == ["/data"]  # 50 MiB above the limit at 100 MiB/s: within 0.6 s


def test_one_slow_write_of_the_verdict_does_not_hold_a_flood_judged_after_space_is_freed():
    """One write takes 5.4 s (a fault): with the reaction time its last write's, 100 MiB/s for 5.5 s would put
    200 MiB above the limit still within reach, no write would follow (the quota is in force already) and the
    throttle would stay for good. The median of the recent writes is 0.1 s: a deletion frees it."""
    flood = [200, 190, 180, 170, 160, 150, 140, 130]
    local = scripted_watch([*flood, 118, 118, 118, 300, 300])
    for write_seconds in (0.1, 0.1, 5.4):  # two flood rounds' writes, then a slow one
        local.reacted(write_seconds)
    for _ in range(len(flood) + 3):
        local.sample()
    assert local.judged == ["/data"]
    local.sample()
    local.sample()
    assert local.reaction == pytest.approx(0.2)
    assert local.judged == []


def test_write_times_are_forgotten_after_five_minutes_without_a_write():
    local = scripted_watch([500] * 3100)
    local.sample()
    for _ in range(3):
        local.reacted(5.4)
    assert local.reaction == pytest.approx(5.5)
    for _ in range(3010):  # 301 s of samples, no write
        local.sample()
    assert local.reaction == pytest.approx(0.2)


def test_a_pass_waits_when_the_verdict_would_change_before_it_could_end():
    assert hold_the_pass(until=0.2, pass_seconds=0.3, held_for=0.0)  # it would judge the free space of 0.1 s early
    assert hold_the_pass(until=0.5, pass_seconds=0.3, held_for=0.0)  # the next pass may take half as long again
    assert hold_the_pass(until=0.2, pass_seconds=0.3, held_for=0.55)
    assert not hold_the_pass(until=0.2, pass_seconds=0.3, held_for=0.6)  # never longer than two passes: a forecast
    assert not hold_the_pass(until=0.0, pass_seconds=0.3, held_for=0.0)  # at the limit already: the pass goes now
    assert not hold_the_pass(until=0.7, pass_seconds=0.3, held_for=0.0)  # passes end before: they update the rest
    assert not hold_the_pass(until=None, pass_seconds=0.3, held_for=0.0)


def test_the_default_horizon_is_a_few_passes_never_below_one_interval():
    assert default_horizon(0.4, 0.1) == pytest.approx(1.2)
    assert default_horizon(None, 0.1) == 3.0
    assert default_horizon(0.01, 0.1) == 0.1


def test_a_local_dir_that_is_not_the_brokers_volume_is_named():
    at = None
    reported = [Volume(3, "/data", 1000 * MiB, 500 * MiB, at), Volume(3, "/other", 1000 * MiB, 500 * MiB, at)]
    latest = {"/data": LocalSample("/data", 0, 1000 * MiB, 1), "/other": LocalSample("/other", 0, 50 * MiB, 1),
              "/unreported": LocalSample("/unreported", 0, 1, 1)}
    assert list(foreign_dirs(latest, reported)) == ["/other"]


def watch(dirs, limit, woken):
    config = LocalWatchConfig(tuple(str(d) for d in dirs), timedelta(milliseconds=100))
    return LocalWatch(config, limit, lambda: woken.append(True), horizon=lambda: 1.0)


def test_a_readable_dir_with_room_is_watched_and_wakes_nobody(tmp_path):
    woken = []
    local = watch([tmp_path], StorageLimit(min_available_bytes=0), woken)
    assert local.sample() == [] and local.sample() == []
    [samples] = local.history().values()
    assert len(samples) == 2 and samples[-1].total_bytes > 0 and local.unreadable == {}


def test_a_dir_below_the_limit_is_in_danger_at_the_first_sample(tmp_path):
    local = watch([tmp_path], StorageLimit(min_available_ratio=1.0), [])
    assert local.sample() == [str(tmp_path)]


def test_an_unreadable_dir_is_said_once_and_the_others_are_watched(tmp_path, caplog):
    missing = tmp_path / "not-mounted"
    local = watch([missing, tmp_path], StorageLimit(min_available_bytes=0), [])
    with caplog.at_level(logging.WARNING, logger="quota_sidecar.observe.local_watch"):
        local.sample()
        local.sample()
    assert [r.message for r in caplog.records] == [
        f"not watching {missing} locally: cannot read it: No such file or directory; passes keep their interval"]
    assert list(local.history()) == [str(tmp_path)] and str(missing) in local.unreadable


def test_a_dir_not_made_yet_is_accepted_at_start_and_watched_from_when_it_appears(tmp_path):
    data = tmp_path / "data"  # a new volume: the broker (or its init container) makes the dir after the sidecar started
    check_host(cfg.from_properties({cfg.PREFIX + "kafka.admin.bootstrap.servers": "127.0.0.1:1",
                                    cfg.PREFIX + "storage.per.volume.limit.min.available.bytes": "1",
                                    cfg.PREFIX + "http.port": "0", cfg.PREFIX + "storage.local.log.dirs": str(data)}))
    local = watch([data], StorageLimit(min_available_ratio=1.0), [])
    assert local.sample() == [] and str(data) in local.unreadable
    data.mkdir()
    assert local.sample() == [str(data)] and local.unreadable == {}


def test_the_log_dirs_come_from_the_brokers_file_unless_a_key_names_them():
    base = {cfg.PREFIX + "kafka.admin.bootstrap.servers": "127.0.0.1:9092",
            cfg.PREFIX + "storage.per.volume.limit.min.available.bytes": "1"}
    from_file = cfg.from_properties({**base, "log.dirs": "/var/lib/kafka/a,/var/lib/kafka/b", "log.dir": "/x"})
    assert from_file.local_watch.log_dirs == ("/var/lib/kafka/a", "/var/lib/kafka/b")
    assert cfg.from_properties({**base, "log.dir": "/x"}).local_watch.log_dirs == ("/x",)
    named = cfg.from_properties({**base, "log.dirs": "/a", cfg.PREFIX + "storage.local.log.dirs": "/mnt/broker"})
    assert named.local_watch.log_dirs == ("/mnt/broker",) and named.local_watch.enabled
    assert named.local_watch.interval == timedelta(milliseconds=100)
    assert not cfg.from_properties(base).local_watch.enabled


def test_the_guard_zone_remembers_the_fastest_fill_of_the_peak_window():
    """A move held by the guard fills nothing: what lifting the guard would let through is the rate it had."""
    readings = iter([400, 300, 200] + [200] * 20)  # MiB free, a sample each 0.1 s; then held for 2 s
    clock = iter(i / 10 for i in range(100))
    config = LocalWatchConfig(("/data",), timedelta(milliseconds=100))
    woken = []
    local = LocalWatch(config, LIMIT, lambda: woken.append(True), horizon=lambda: 0.5,
                       read=lambda log_dir, at: LocalSample(log_dir, at, 1000 * MiB, next(readings) * MiB),
                       clock=lambda: next(clock), fill_window=60.0)
    rounds = [local.sample() for _ in range(23)]

    assert rounds[1] == ["/data"]  # 1000 MiB/s with 200 MiB free, 100 MiB above the limit: in danger
    assert local.guard_zone == ["/data"] and local.danger == []  # held for 2 s: no fill now, the peak kept
    assert rounds[-1] == []  # sample() says when a dir enters the zone, not every round after


def test_a_dir_that_leaves_the_danger_zone_wakes_the_loop_once():
    readings = iter([100, 100, 400, 400])  # MiB free: at the limit, then room again (records deleted)
    clock = iter(i / 10 for i in range(10))
    config = LocalWatchConfig(("/data",), timedelta(milliseconds=100))
    local = LocalWatch(config, LIMIT, lambda: None, horizon=lambda: 0.5,
                       read=lambda log_dir, at: LocalSample(log_dir, at, 1000 * MiB, next(readings) * MiB),
                       clock=lambda: next(clock))
    assert [local.sample() for _ in range(4)] == [["/data"], ["/data"], ["/data"], []]
    assert local.danger == []


def test_the_guard_zone_forgets_a_peak_older_than_its_window():
    readings = iter([400, 300, 300, 300])
    clock = iter([0.0, 0.1, 0.2, 30.0])
    config = LocalWatchConfig(("/data",), timedelta(milliseconds=100))
    local = LocalWatch(config, LIMIT, lambda: None, horizon=lambda: 0.5,
                       read=lambda log_dir, at: LocalSample(log_dir, at, 1000 * MiB, next(readings) * MiB),
                       clock=lambda: next(clock), fill_window=10.0)
    local.sample(), local.sample(), local.sample()
    assert local.guard_zone == ["/data"]
    local.sample()
    assert local.guard_zone == []


def test_the_running_watch_wakes_the_loop_for_a_dir_in_danger_until_stopped(tmp_path):
    woken = []
    local = watch([tmp_path], StorageLimit(min_available_ratio=1.0), woken).start()
    try:
        assert local.running
        eventually(lambda: len(woken) >= 2, timeout=5, every=0.05)
    finally:
        local.stop()
    assert not local.running


def test_a_round_that_fails_is_logged_with_its_traceback_and_ends_the_watch(caplog):
    def broken_read(log_dir, at):  # a fake: statvfs fails with OSError, which the watch says and goes on after
        raise RuntimeError("a bug in the watch")

    config = LocalWatchConfig(("/data",), timedelta(milliseconds=10))
    local = LocalWatch(config, LIMIT, lambda: None, horizon=lambda: 0.5, read=broken_read)
    with caplog.at_level(logging.ERROR, logger="quota_sidecar.observe.local_watch"):
        local.start()
        eventually(lambda: not local.running, timeout=5, every=0.05)
    [record] = caplog.records
    assert record.getMessage() == "the local watch failed; passes keep their interval"
    assert record.exc_info[0] is RuntimeError
