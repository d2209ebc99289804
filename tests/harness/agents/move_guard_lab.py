"""The lab of "a move cannot fill a disk either": broker 3's only log dir a small filesystem, data on brokers 1
and 2 larger than its free space, one `quota-sidecar run` beside each broker at the default intervals with
replication throttles on, and the small volume's free space read every 2 ms. The integration test
(tests/integration/replication_throttles/test_move_guard.py) and benchmarks/move_guard.py run in it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.cluster.kafka_tools import producer_performance
from harness.periodic import Periodic
from harness.agents.replication_checks import sidecar_properties
from harness.agents.sidecar_process import SidecarFleet
from quota_sidecar.configuration.properties import PREFIX

MiB = 1 << 20
VOLUME, LIMIT = 512 * MiB, 128 * MiB  # the issue's: a move on loopback crosses the 384 MiB between in a second
SMALL = {(3, 0): VOLUME}  # LocalKafkaCluster(small_log_dirs=...)
# A guard rate for an operator who wants moves slowed rather than held: it does not hold, and the move is cancelled
# (benchmarks/move_guard.py's slow_guard uses 5 MB/s: cancelled after ~54 s).
SLOW_GUARD = 20_000_000
# Deleted replicas go in a second rather than Kafka's minute: the test runs a cancelled move again soon after.
BROKER_PROPERTIES = {"log.segment.delete.delay.ms": "1000"}  # a cancelled replica's space back in 1 s, not 60
# The defaults (a storage pass a minute, a replication pass every 10 s), a 1 GB/s network: no throttle in the way.
SETTINGS = {"storage.check.interval": "PT1M", "replication.check.interval": "PT10S",
            "storage.per.volume.limit.min.available.bytes": str(LIMIT),
            "replication.capacity.bytes.per.second": "1000000000",
            "replication.min.rate.bytes.per.second": "10000000", "replication.network.window": "PT30S"}


def guard_fleet(cluster, pipeline: dict, work_dir: Path, **settings: str) -> SidecarFleet:
    """One sidecar per broker, each watching its broker's log dirs (read from `log.dirs`, as from the broker's
    own properties file); `settings` (keys with dots, no prefix) change SETTINGS."""
    return SidecarFleet(cluster.broker_ids, work_dir, lambda broker: {
        **sidecar_properties(cluster, broker, pipeline, {}),
        **{PREFIX + key: value for key, value in {**SETTINGS, **settings}.items()},
        "log.dirs": ",".join(cluster.log_dirs(broker))})


def start_guard_fleet(cluster, pipeline: dict, work_dir: Path, report, fleets: list, **settings: str) -> SidecarFleet:
    """guard_fleet() in a dir of its own, started, its logs in a failed test's report, kept in `fleets` for the
    test's teardown to stop."""
    work_dir.mkdir()
    fleet = guard_fleet(cluster, pipeline, work_dir, **settings)
    report.sources += list(fleet)
    fleets.append(fleet)
    return fleet.start()


def fill(cluster, topic: str, total_bytes: int, log_file: Path, record_size: int = 1_000_000) -> None:
    """`total_bytes` into `topic` with Kafka's own producer at full speed, before any sidecar runs."""
    producer = producer_performance(cluster.bootstrap_servers, topic, total_bytes // record_size, record_size, -1,
                                    log_file, acks="1")
    assert producer.wait(300) == 0, log_file.read_text()


def cancelled_in_status(sidecar) -> list[dict]:
    shown = sidecar.status().get("cancelled_moves")
    assert shown, "no cancelled move in status yet: it is published at the end of the pass that cancelled"
    return shown


class FreeSpace(Periodic):
    """A volume's free space (statvfs, as Kafka reads it) every 2 ms while the block runs: its lowest, and when
    it first fell to the limit (time.monotonic())."""

    def __init__(self, path: str, limit: int = LIMIT):
        super().__init__(0.002)
        self.path, self.limit = path, limit
        self.lowest: int | None = None
        self.crossed_at: float | None = None

    def sample(self) -> None:
        found = os.statvfs(self.path)
        available = found.f_bavail * found.f_frsize
        self.lowest = available if self.lowest is None else min(self.lowest, available)
        if self.crossed_at is None and available <= self.limit:
            self.crossed_at = time.monotonic()
