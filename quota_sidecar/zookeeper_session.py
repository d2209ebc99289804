"""The sidecar's one ZooKeeper session (zookeeper.connect), shared by the znode volumes and the ZooKeeper store.

kazoo reconnects by itself; each call retries through KazooRetry within a deadline (the pass's, and at most
`retry_deadline`), then fails as a RetryableAdminError: a lost session is a failed poll, never a crash.
While the connection is down kazoo queues requests and its blocking calls wait for the reconnection,
however long: so every request goes through `wait`, which gives up at the deadline.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry, RetryFailedError

from . import deadline
from .errors import RetryableAdminError

T = TypeVar("T")


class ZooKeeperSession:
    """Connects on first use; `call` runs a function of the kazoo client with retries, one call at a time."""

    def __init__(self, connect: str, session_timeout: float, retry_deadline: float = 5.0):
        self.connect = connect
        self._retry_deadline = retry_deadline
        self._retry = KazooRetry(max_tries=-1, max_delay=1.0, deadline=retry_deadline)  # copied per call
        self.client = KazooClient(hosts=connect, timeout=session_timeout, command_retry=self._retry,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))  # reconnect while we run
        self._lock = threading.RLock()  # the loop and the HTTP thread share the session
        self._started = False
        self._on_connect: list[Callable[[KazooClient], None]] = []
        self._until = float("inf")  # the end of the call in progress (monotonic seconds)

    def __repr__(self) -> str:
        return f"ZooKeeperSession(connect={self.connect!r})"

    def on_first_connect(self, setup: Callable[[KazooClient], None]) -> None:
        """`setup(client)` once connected (watches, paths), before the first call."""
        self._on_connect.append(setup)

    def call(self, what: str, function: Callable[..., T], *args) -> T:
        with self._lock:
            try:
                self._until = float("inf")
                self._connect()
                retry = self._retry.copy()
                retry.deadline = self._left()
                self._until = time.monotonic() + retry.deadline
                return retry(function, *args)
            except (KazooException, KazooTimeoutError, RetryFailedError) as error:
                raise RetryableAdminError(f"{what} in ZooKeeper at {self.connect} failed: "
                                          f"{type(error).__name__} {error}".rstrip()) from error

    def wait(self, asynchronous):
        """The result of a kazoo *_async call, or KazooTimeoutError once the call's deadline has passed."""
        return asynchronous.get(timeout=self._left())

    def close(self) -> None:
        """End the session: its ephemeral znodes go at once."""
        with self._lock:
            if self._started:
                self.client.stop()
                self.client.close()
                self._started = False

    def _left(self) -> float:
        return max(0.01, min(self._until - time.monotonic(), deadline.left(self._retry_deadline) or self._retry_deadline))

    def _connect(self) -> None:
        if not self._started:
            # start() gives up (and stops the client) when no server answers in time; the next call tries again.
            self.client.start(timeout=deadline.left(self._retry_deadline, "connecting to ZooKeeper"))
            self._started = True
        while self._on_connect:
            self._on_connect[0](self.client)
            self._on_connect.pop(0)
