"""The sidecars' volumes in ZooKeeper: which volumes count (volumes.with_published), and when a sidecar writes
its znode (znode_volumes.ZnodeVolumes, fed by the local watch)."""

import json
import threading
from datetime import datetime, timedelta, timezone

from harness.waiting import eventually
from quota_sidecar.common.observation import Volume
from quota_sidecar.common.vocabulary import StorageLimit
from quota_sidecar.configuration.settings import LocalWatchConfig
from quota_sidecar.observe.local_watch import LocalWatch, as_volumes
from quota_sidecar.observe.volumes import LocalSample, with_published
from quota_sidecar.observe.znode_volumes import VOLUMES_PATH, NoZnodes, ZnodeVolumes

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def sized(broker: int, available: int = 50) -> Volume:
    return Volume(broker, f"/data/{broker}", 100, available, NOW)


def unsized(broker: int) -> Volume:  # DescribeLogDirs below v4 (Kafka < 3.3)
    return Volume(broker, f"/data/{broker}", -1, -1, NOW)


def test_a_broker_reporting_sizes_keeps_them_over_its_znode():
    assert with_published([1], [sized(1, 50)], {1: (sized(1, 7),)}) == ((1,), (sized(1, 50),))


def test_a_broker_without_sizes_takes_its_published_volumes():
    assert with_published([1, 2], [sized(1), unsized(2)], {2: (sized(2, 3),)}) == ((1, 2), (sized(1), sized(2, 3)))


def test_a_broker_without_sizes_and_without_znode_is_absent():
    assert with_published([1, 2], [sized(1), unsized(2)], {}) == ((1,), (sized(1),))


def test_an_offline_dir_is_not_a_missing_size():
    offline = Volume(1, "/data/1", -1, -1, NOW, "KAFKA_STORAGE_ERROR")
    assert with_published([1], [offline], {}) == ((1,), (offline,))


def test_znodes_of_brokers_not_in_the_cluster_are_ignored():
    assert with_published([1], [sized(1)], {9: (sized(9),)}) == ((1,), (sized(1),))


class Published(ZnodeVolumes):
    """The znodes as read: `published`; what the pass publishes and reads, in order."""

    def __init__(self, published):
        super().__init__(RecordingSession(), broker_id=3)
        self.published, self.order = published, []

    def publish(self, volumes):
        self.order.append(("publish", tuple(volumes)))

    def read(self, now):
        self.order.append("read")
        return self.published


def test_a_pass_publishes_its_own_volumes_before_it_reads_the_others():
    znodes = Published({2: (sized(2, 3),)})
    exchanged = znodes.exchange([1, 2], [sized(1), unsized(2)], NOW, lambda: [sized(3, 9)])
    assert znodes.order == [("publish", (sized(3, 9),)), "read"]
    assert exchanged == ((1, 2), (sized(1), sized(2, 3)), {2: (sized(2, 3),)})


def test_a_look_that_publishes_nothing_still_reads_the_others():
    znodes = Published({})
    assert znodes.exchange([1], [sized(1)], NOW, None) == ((1,), (sized(1),), {}) and znodes.order == ["read"]


def test_without_zookeeper_a_broker_without_sizes_keeps_what_it_reported():
    def own():
        raise AssertionError("nothing is published without zookeeper.connect")

    assert NoZnodes().exchange([1, 2], [sized(1), unsized(2)], NOW, own) == ((1, 2), (sized(1), unsized(2)), {})


# ---------------------------------------------------------------- the znode's cadence (znode_volumes.ZnodeVolumes)


class RecordingSession:
    """Stands in for the ZooKeeper session: records the znode writes; with `gate` each write waits for it
    (a ZooKeeper that is slow to answer)."""

    def __init__(self, gate: threading.Event | None = None):
        self.gate, self.writes = gate, []

    def on_first_connect(self, setup):
        pass

    def call(self, what, function, path, data):
        if self.gate is not None:
            self.gate.wait()
        self.writes.append((path, json.loads(data)))

    def close(self):
        pass

    def available(self) -> list[int]:
        return [document["volumes"][0]["available_bytes"] for _, document in self.writes]


def scripted(values: list[int], reads: list[float]):
    """A statvfs stand-in for LocalWatch: the next of `values` at each read (the last one from then on)."""
    def read(log_dir: str, at: float) -> LocalSample:
        reads.append(at)
        return LocalSample(log_dir, at, 1000, values[min(len(reads), len(values)) - 1])
    return read


def watched_into(znodes: ZnodeVolumes, read) -> LocalWatch:
    config = LocalWatchConfig(("/data",), timedelta(milliseconds=5))
    return LocalWatch(config, StorageLimit(min_available_bytes=0), lambda: None, horizon=lambda: 1.0, read=read,
                      on_sample=lambda samples: znodes.offer(as_volumes(3, samples, NOW)))


def test_the_znode_follows_the_watchs_samples_and_a_sample_that_changes_nothing_is_not_written():
    session, reads = RecordingSession(), []
    znodes = ZnodeVolumes(session, broker_id=3)
    values = [900, 900, 900, 800, 800, 800, 700]
    watch = watched_into(znodes, scripted(values, reads)).start()
    try:
        eventually(lambda: len(reads) >= 3 * len(values) and session.available()[-1:] == [700], 10, "the samples")
    finally:
        watch.stop()
        znodes.close()
    written = session.available()
    assert written[0] == 900 and written[-1] == 700, written  # the first sample, and the newest
    assert len(written) <= 3 and all(a != b for a, b in zip(written, written[1:])), written  # changes only
    assert {path for path, _ in session.writes} == {f"{VOLUMES_PATH}/3"}


def test_the_watch_keeps_sampling_while_zookeeper_is_slow_and_the_newest_sample_is_written_then():
    gate, reads = threading.Event(), []
    session = RecordingSession(gate)
    znodes = ZnodeVolumes(session, broker_id=3)
    watch = watched_into(znodes, scripted(list(range(1000, 0, -1)), reads)).start()
    try:
        eventually(lambda: len(reads) >= 60, 10, "the watch sampling while the first write waits")
        assert session.writes == []
        gate.set()  # ZooKeeper answers again
        eventually(lambda: len(session.writes) >= 2, 10, "the writes after the wait")
    finally:
        watch.stop()
        znodes.close()
    first, then = session.available()[:2]
    # The write that waited took the newest sample when its thread woke: one of the first (a busy machine wakes
    # it a few 5 ms samples late); then the newest after the wait, not the sample right after the first.
    assert first >= 1000 - 20, first
    assert then <= first - 30, (first, then)


def test_a_pass_writes_the_znode_only_when_it_does_not_hold_its_volumes_yet():
    session = RecordingSession()
    znodes = ZnodeVolumes(session, broker_id=3)
    znodes.publish([sized(3, 50)])
    znodes.publish([Volume(3, "/data/3", 100, 50, NOW + timedelta(seconds=5))])  # the same, read later
    znodes.publish([sized(3, 40)])
    assert session.available() == [50, 40]
