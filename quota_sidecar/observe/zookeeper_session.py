"""The sidecar's one ZooKeeper session (zookeeper.connect), shared by the znode volumes and the ZooKeeper store.

kazoo reconnects by itself; each call retries through KazooRetry within a deadline (the pass's, and at most
`retry_deadline`), then fails as a RetryableAdminError: a lost session is a failed poll, never a crash.
While the connection is down kazoo queues requests and its blocking calls wait for the reconnection,
however long: so every request goes through `wait`, which gives up at the deadline. Threads call side by
side (the loop, the HTTP thread, the znode publisher), each within its own deadline: a slow call of one
never holds up another.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry, RetryFailedError

from ..common import deadline
from ..common.errors import RetryableAdminError

T = TypeVar("T")


class ZooKeeperSession:
    """Connects on first use; `call` runs a function of the kazoo client with retries. Once closed it stays
    closed: a late call fails rather than start a session (and its ephemeral znodes) again."""

    def __init__(self, connect: str, session_timeout: float, retry_deadline: float = 5.0):
        self.connect = connect
        self._retry_deadline = retry_deadline
        self._retry = KazooRetry(max_tries=-1, max_delay=1.0, deadline=retry_deadline)  # copied per call
        self.client = KazooClient(hosts=connect, timeout=session_timeout, command_retry=self._retry,
                                  connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))  # reconnect while we run
        self._lock = threading.RLock()  # guards starting and stopping the client, not the calls
        self._started = self._closed = False
        self._on_connect: list[Callable[[KazooClient], None]] = []
        self._calls = threading.local()  # .until: the end of this thread's call in progress (monotonic seconds)

    def __repr__(self) -> str:
        return f"ZooKeeperSession(connect={self.connect!r})"

    def on_first_connect(self, setup: Callable[[KazooClient], None]) -> None:
        """`setup(client)` once connected (watches, paths), before the first call."""
        self._on_connect.append(setup)

    def call(self, what: str, function: Callable[..., T], *args) -> T:
        try:
            self._calls.until = float("inf")
            self._connect()
            retry = self._retry.copy()
            retry.deadline = self._left()
            self._calls.until = time.monotonic() + retry.deadline
            return retry(function, *args)
        except (KazooException, KazooTimeoutError, RetryFailedError) as error:
            raise RetryableAdminError(f"{what} in ZooKeeper at {self.connect} failed: "
                                      f"{type(error).__name__} {error}".rstrip()) from error
        finally:
            self._calls.until = float("inf")

    def wait(self, asynchronous):
        """The result of a kazoo *_async call, or KazooTimeoutError once the call's deadline has passed."""
        return asynchronous.get(timeout=self._left())

    def close(self) -> None:
        """End the session: its ephemeral znodes go at once."""
        with self._lock:
            self._closed = True
            if self._started:
                self.client.stop()
                self.client.close()
                self._started = False

    def _left(self) -> float:
        until = getattr(self._calls, "until", float("inf"))
        return max(0.01, min(until - time.monotonic(), deadline.left(self._retry_deadline) or self._retry_deadline))

    def _connect(self) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the session was closed")
            if not self._started:
                # start() gives up (and stops the client) when no server answers in time; the next call tries again.
                self.client.start(timeout=deadline.left(self._retry_deadline, "connecting to ZooKeeper"))
                self._started = True
            while self._on_connect:
                self._on_connect[0](self.client)
                self._on_connect.pop(0)
