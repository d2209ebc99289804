"""SIGTERM and SIGINT stop the sidecar between passes: the pass in flight finishes its writes first."""

from __future__ import annotations

import signal
import threading


class GracefulShutdown:
    """Set by SIGTERM/SIGINT; the loop finishes its pass and stops."""

    def __init__(self):
        self.event = threading.Event()
        self._wakes: list[threading.Event] = []

    def install(self) -> "GracefulShutdown":
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.set())
        return self

    def set(self) -> None:
        self.event.set()
        for wake in self._wakes:
            wake.set()

    def also_wakes(self, wake: threading.Event) -> None:
        """A loop that sleeps on `wake` (set by others too) wakes at shutdown as well."""
        self._wakes.append(wake)
        if self.event.is_set():
            wake.set()
