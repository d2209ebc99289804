"""Something sampled every few seconds in a daemon thread, from entering a with block until leaving it."""

from __future__ import annotations

import threading


class Periodic:
    """Calls sample() every `every` seconds in a daemon thread, from entering the block until leaving it, and
    once more as it leaves: what happened just before the block's end is in the samples too."""

    def __init__(self, every: float):
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every):
                self.sample()
                return

    def sample(self) -> None:
        raise NotImplementedError
