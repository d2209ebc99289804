"""Volume records and the memory of brokers that left the cluster view."""

from datetime import datetime, timedelta, timezone

from quota_sidecar.common.observation import Volume
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.observe.volumes import by_broker, recorded, remember, with_history

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def vol(broker, available, at=T0, total=1000, error=None):
    return Volume(broker, f"/data-{broker}", total, available, at, error)


def test_offline_or_unsized_dirs_are_not_usable():
    assert vol(0, 10).usable
    assert not vol(0, -1, total=-1).usable
    assert not vol(0, 10, error="KAFKA_STORAGE_ERROR").usable


def test_ratio_and_margin():
    assert vol(0, 250).available_ratio == 0.25
    assert vol(0, 0, total=0).available_ratio == 0.0
    assert vol(0, 250).margin(StorageLimit(min_available_bytes=100)) == 150
    assert vol(0, 250).margin(StorageLimit(min_available_ratio=0.3)) < 0
    assert vol(0, -1, total=-1).margin(StorageLimit(min_available_bytes=1)) is None


def test_answering_brokers_replace_their_volumes():
    previous = {0: (vol(0, 10),)}
    fresh = {0: (vol(0, 900, at=T0 + MINUTE),)}
    assert remember(previous, fresh, T0 + MINUTE, 5 * MINUTE) == fresh


def test_absent_broker_is_kept_while_younger_than_validity():
    previous = {0: (vol(0, 10),), 1: (vol(1, 900),)}
    fresh = {1: (vol(1, 900, at=T0 + MINUTE / 2),)}
    assert 0 in remember(previous, fresh, T0 + MINUTE / 2, MINUTE)
    assert 0 not in remember(previous, fresh, T0 + MINUTE, MINUTE)


def test_by_broker_keeps_live_brokers_without_dirs():
    assert by_broker([1, 2], [vol(1, 5)]) == {1: (vol(1, 5),), 2: ()}


SECOND = timedelta(seconds=1)


def at(seconds, available, broker=0, total=1000, error=None):
    return vol(broker, available, T0 + seconds * SECOND, total, error)


def test_history_keeps_each_volumes_measurements_oldest_first():
    history = recorded({}, [at(0, 900), at(0, 500, broker=1)], T0, MINUTE)
    history = recorded(history, [at(10, 800), at(10, 450, broker=1)], T0 + 10 * SECOND, MINUTE)

    assert history == {(0, "/data-0"): (at(0, 900), at(10, 800)), (1, "/data-1"): (at(0, 500, broker=1),
                                                                                  at(10, 450, broker=1))}


def test_history_drops_what_is_older_than_the_window_and_keeps_its_edge():
    history = {(0, "/data-0"): (at(0, 900), at(10, 850), at(20, 800))}

    assert recorded(history, [at(70, 700)], T0 + 70 * SECOND, MINUTE) == {
        (0, "/data-0"): (at(10, 850), at(20, 800), at(70, 700))}  # 10 s is exactly a minute before 70 s: in
    assert recorded(history, [], T0 + 200 * SECOND, MINUTE) == {}  # nothing left: the volume drops out


def test_history_counts_a_moment_once_and_only_usable_volumes():
    history = recorded({}, [at(0, 900)], T0, MINUTE)
    history = recorded(history, [at(0, 900), at(10, -1, total=-1), at(10, 5, error="KAFKA_STORAGE_ERROR")],
                       T0 + 10 * SECOND, MINUTE)  # an absent broker's remembered volume comes back with its time

    assert history == {(0, "/data-0"): (at(0, 900),)}


def test_history_keeps_the_newest_measurement_of_each_twelfth_of_the_window():
    """The local watch samples ten a second, passes near the limit come several a second; the history goes into
    every observation, onto every broker's disk: all the samples would fill the disk the agent protects."""
    samples = [at(tenths / 10, 900 - tenths) for tenths in range(125)]  # 0.0 s … 12.4 s

    history = recorded({}, samples, T0 + 13 * SECOND, MINUTE)  # a twelfth of a minute: 5 s

    assert history == {(0, "/data-0"): (at(4.9, 851), at(9.9, 801), at(12.4, 776))}


def test_rows_are_each_volumes_history_at_times_relative_to_now():
    history = {(0, "/data-0"): (at(0, 900), at(10, 800)), (1, "/data-1"): (at(10, 7, broker=1),)}

    rows = with_history(history, [at(10, 800)], T0 + 10 * SECOND)

    assert rows == [{"broker_id": 0, "log_dir": "/data-0", "total_bytes": 1000, "available_bytes": 900,
                     "usable": True, "at_seconds": -10.0},
                    {"broker_id": 0, "log_dir": "/data-0", "total_bytes": 1000, "available_bytes": 800,
                     "usable": True, "at_seconds": 0.0}]


def test_one_measurement_is_one_row_and_a_volume_older_than_the_window_is_still_there():
    assert [row["at_seconds"] for row in with_history({}, [at(0, 900)], T0)] == [0.0]
    remembered = at(0, 800, broker=2)  # a broker absent for two minutes: its history is gone, its volume is not
    assert [row["at_seconds"] for row in with_history({}, [remembered], T0 + 2 * MINUTE)] == [-120.0]
