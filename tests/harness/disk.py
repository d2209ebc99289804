"""A directory's free space, sampled the way Kafka measures it (statvfs usable bytes), in a thread."""

from __future__ import annotations

import os
import threading
import time


def free_bytes(path: str) -> int:
    """What DescribeLogDirs reports as usable bytes: statvfs f_bavail × f_frsize."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class DiskSampler:
    """Samples a directory's free bytes every `every` seconds from entering the block until leaving it:
    (time.monotonic(), free bytes)."""

    def __init__(self, path: str, every: float = 0.05):
        self.path, self.every = path, every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disk-sampler", daemon=True)

    def __enter__(self) -> DiskSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic(), free_bytes(self.path)))
            if self._stop.wait(self.every):
                return

    def crossed_at(self, limit: int) -> float | None:
        """The first sample at which free bytes <= limit."""
        return next((at for at, free in list(self.samples) if free <= limit), None)

    def lowest(self) -> int:
        return min(free for _, free in self.samples)
