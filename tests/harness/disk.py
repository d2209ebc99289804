"""A directory's free space, sampled the way Kafka measures it (statvfs usable bytes), in a thread."""

from __future__ import annotations

import os
import time

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
