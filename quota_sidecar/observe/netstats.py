"""This host's network use, measured with psutil and averaged over a window (autothrottle without Datadog)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import psutil

from ..common.periodic import PeriodicWorker


@dataclass(frozen=True)
class Sample:
    at: float          # monotonic seconds
    sent_bytes: int
    received_bytes: int


def read_counters(interface: str = "") -> Sample:
    """Cumulative bytes of one interface, or of every interface but loopback when none is named."""
    counters = psutil.net_io_counters(pernic=True)
    if interface:
        if interface not in counters:
            raise LookupError(f"network interface {interface!r} not found; this host has {sorted(counters)}")
        chosen = [counters[interface]]
    else:
        chosen = [c for name, c in counters.items() if name != "lo"]
    return Sample(time.monotonic(), sum(c.bytes_sent for c in chosen), sum(c.bytes_recv for c in chosen))


def host_interfaces() -> set[str]:
    """The names of this host's network interfaces."""
    return set(psutil.net_if_addrs()) | set(psutil.net_io_counters(pernic=True))


def average_rates(samples: list[Sample]) -> tuple[float, float] | None:
    """(sent, received) bytes/s between the oldest and newest sample; None without two samples."""
    if len(samples) < 2 or samples[-1].at <= samples[0].at:
        return None
    first, last = samples[0], samples[-1]
    elapsed = last.at - first.at
    return (last.sent_bytes - first.sent_bytes) / elapsed, (last.received_bytes - first.received_bytes) / elapsed


class NetworkSampler:
    """Samples the counters every `period` seconds in a daemon thread and keeps `window` seconds of them."""

    def __init__(self, interface: str, window: float, period: float = 1.0,
                 read: Callable[[str], Sample] = read_counters):
        self.interface, self.window, self.period, self.read = interface, window, period, read
        self.samples: deque[Sample] = deque()
        self.error: str | None = None
        self.lock = threading.Lock()
        self._worker = PeriodicWorker("network-sampler", self._sample, period, wait_first=False)

    def start(self) -> "NetworkSampler":
        self._worker.start()
        return self

    def stop(self) -> None:
        self._worker.stop()

    def counters(self) -> tuple[int, int] | None:
        """The link's (sent, received) byte counters now, or None when they cannot be read."""
        try:
            sample = self.read(self.interface)
        except (LookupError, OSError):
            return None
        return sample.sent_bytes, sample.received_bytes

    def rates(self) -> tuple[float, float] | None:
        """Average (tx, rx) bytes/s over the window, or None when the counters cannot be read."""
        with self.lock:
            return None if self.error else average_rates(list(self.samples))

    def _sample(self) -> None:
        try:
            sample = self.read(self.interface)
        except (LookupError, OSError) as error:
            with self.lock:
                self.error = str(error)
                self.samples.clear()
        else:
            with self.lock:
                self.error = None
                self.samples.append(sample)
                while self.samples and sample.at - self.samples[0].at > self.window:
                    self.samples.popleft()
