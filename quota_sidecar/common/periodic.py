"""A daemon thread that runs one tick of work over and over until stopped: the agent's watches and samplers.

The owner keeps only what a tick does; the worker owns the thread, the stop, the wait between ticks, an early
wake-up and what a tick that raises does to the thread. Standard library only: APScheduler's jobs log a failure
and go on, and none can be woken early.
"""

from __future__ import annotations

import threading
from typing import Callable


class PeriodicWorker:
    """Calls `tick` in a daemon thread named `name`, `interval` seconds after the previous tick ended (a tick may
    return the seconds to wait this once instead; an interval of None waits for `wake`), until `stop`.

    The first tick comes an interval after `start`, or at once with `wait_first=False`. `wake` cuts the current wait
    short. A tick that raises ends the thread: `on_failure`, when given, is called inside the except clause (so that
    `log.exception` has the traceback); otherwise the exception goes to threading.excepthook. `on_exit` runs on the
    thread as it ends, however it ends (clients it opened, closed)."""

    def __init__(self, name: str, tick: Callable[[], float | None], interval: float | None, *,
                 wait_first: bool = True, on_failure: Callable[[], None] | None = None,
                 on_exit: Callable[[], None] | None = None):
        self.tick, self.interval, self.wait_first = tick, interval, wait_first
        self.on_failure, self.on_exit = on_failure, on_exit
        self._stopping = threading.Event()
        self._woken = threading.Event()  # set by wake and by stop: the wait between ticks ends at either
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> PeriodicWorker:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """No tick starts after this; waits up to `timeout` seconds for one under way to end (0: not at all, None: as
        long as it takes)."""
        self._stopping.set()
        self._woken.set()
        if timeout != 0 and self._thread.is_alive():
            self._thread.join(timeout)

    def wake(self) -> None:
        """The next tick now, or as soon as the one under way ends."""
        self._woken.set()

    def wait(self, seconds: float) -> bool:
        """For a tick that waits within itself: up to `seconds`, cut short by `stop` only; whether it was."""
        return self._stopping.wait(seconds)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _run(self) -> None:
        try:
            wait = self.interval if self.wait_first else 0.0
            while not self._stopped_after(wait):
                try:
                    asked = self.tick()
                except Exception:
                    if self.on_failure is None:
                        raise
                    self.on_failure()
                    return
                wait = self.interval if asked is None else asked
        finally:
            if self.on_exit is not None:
                self.on_exit()

    def _stopped_after(self, seconds: float | None) -> bool:
        """Waits `seconds` (None: until woken), or less when woken; whether `stop` was called meanwhile."""
        self._woken.wait(seconds)
        self._woken.clear()
        return self._stopping.is_set()
