"""A directory's free space, sampled the way Kafka measures it (statvfs usable bytes), and a replica's bytes on
disk, each in a thread."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.periodic import Periodic


def free_bytes(path: str) -> int:
    """What DescribeLogDirs reports as usable bytes: statvfs f_bavail × f_frsize."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class DiskSampler(Periodic):
    """Samples a directory's free bytes every `every` seconds from entering the block until leaving it:
    (time.monotonic(), free bytes)."""

    def __init__(self, path: str, every: float = 0.05):
        super().__init__(every)
        self.path = path
        self.samples: list[tuple[float, int]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), free_bytes(self.path)))

    def crossed_at(self, limit: int) -> float | None:
        """The first sample at which free bytes <= limit."""
        return next((at for at, free in list(self.samples) if free <= limit), None)

    def lowest(self) -> int:
        return min(free for _, free in self.samples)

    def free_at(self, moment: float) -> int:
        """The free bytes of the last sample at or before `moment` (the first sample's before it)."""
        samples = list(self.samples)
        return next((free for at, free in reversed(samples) if at <= moment), samples[0][1])


def replica_bytes(log_dir: str, topic: str, partition: int) -> int:
    """The bytes of a replica's segments on disk: its .log files (the indexes are preallocated, and a segment
    deleted while they are listed counts as gone)."""
    total = 0
    for segment in Path(log_dir, f"{topic}-{partition}").glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:
            pass
    return total


class ReplicaSampler(Periodic):
    """Samples a replica's bytes on disk every `every` seconds from entering the block until leaving it, on the
    test's own clock: no admin request, so a broker that does not answer yet cannot delay a sample."""

    def __init__(self, log_dir: str, topic: str, partition: int, every: float = 0.1):
        super().__init__(every)
        self.replica = (log_dir, topic, partition)
        self.samples: list[tuple[float, int]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), replica_bytes(*self.replica)))

    def growth(self) -> list[tuple[float, int]]:
        """(seconds since the first sample that grew, bytes) from that sample to the first at the final size."""
        samples = list(self.samples)
        start, final = samples[0][1], samples[-1][1]
        grown = [index for index, (_, size) in enumerate(samples) if size > start]
        if not grown:
            return []
        end = next(index for index, (_, size) in enumerate(samples) if size == final)
        first_at = samples[grown[0]][0]
        return [(at - first_at, size) for at, size in samples[grown[0]:end + 1]]


def what_uses(path: str) -> str:
    """One line: the bytes each entry of `path` allocates (largest first), beside what statvfs counts used. A gap
    between the two is files deleted but still open."""
    usage = os.statvfs(path)
    used = (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    sizes = {}
    for top in os.scandir(path):
        walked = os.walk(top.path) if top.is_dir(follow_symlinks=False) else [(path, [], [top.name])]
        sizes[top.name] = sum(_allocated(os.path.join(root, name)) for root, _, files in walked for name in files)
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:8]
    return (f"statvfs used {used >> 20} MiB, files {sum(sizes.values()) >> 20} MiB: "
            + ", ".join(f"{name} {size >> 20} MiB" for name, size in largest))


def _allocated(file: str) -> int:
    try:
        return os.lstat(file).st_blocks * 512
    except OSError:  # deleted meanwhile
        return 0
