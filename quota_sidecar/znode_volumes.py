"""The sidecars' volumes in ZooKeeper: for brokers whose DescribeLogDirs carries no sizes (Kafka < 3.3, KIP-827).

Each sidecar publishes its own broker's log dirs, as it reads them locally with statvfs, in an ephemeral
znode `<chroot>/quota-sidecar/volumes/<broker id>` (JSON). Like a broker's registration under
/brokers/ids, the znode goes when the sidecar's session ends: at once on a clean stop, after the session
timeout when the sidecar dies. Every sidecar keeps the list of them with a children watch and reads their
data at each poll.

kazoo reconnects by itself; each call retries through KazooRetry within a deadline (the pass's, and at
most `retry_deadline`), then fails as a RetryableAdminError: a lost session is a failed poll, never a crash.
A new session after an expired one publishes the znode again at the next write.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone
from typing import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch
from kazoo.retry import KazooRetry, RetryFailedError

from . import deadline
from .errors import RetryableAdminError
from .observation import Volume

log = logging.getLogger(__name__)

VOLUMES_PATH = "/quota-sidecar/volumes"


class ZnodeVolumes:
    """One ZooKeeper session: publishes this broker's volumes (when broker_id is known) and reads everyone's."""

    def __init__(self, connect: str, session_timeout: float, broker_id: int | None, retry_deadline: float = 5.0):
        self.connect, self.broker_id = connect, broker_id
        self._retry_deadline = retry_deadline
        self._retry = KazooRetry(max_tries=-1, max_delay=1.0, deadline=retry_deadline)  # copied per call
        self._client = KazooClient(hosts=connect, timeout=session_timeout, command_retry=self._retry,
                                   connection_retry=KazooRetry(max_tries=-1, max_delay=1.0))  # reconnect while we run
        self._lock = threading.Lock()  # the loop and the local watch's thread both publish
        self._started = False
        self._children: list[str] | None = None  # kept current by the children watch

    def __repr__(self) -> str:
        return f"ZnodeVolumes(connect={self.connect!r}, broker_id={self.broker_id})"

    def publish(self, volumes: Iterable[Volume]) -> None:
        """Write this broker's volumes to its ephemeral znode (made again if its session's went)."""
        if self.broker_id is None:
            return
        volumes = list(volumes)
        data = json.dumps({"broker_id": self.broker_id, "volumes": [
            {"log_dir": v.log_dir, "total_bytes": v.total_bytes, "available_bytes": v.available_bytes,
             "observed_at": v.observed_at.isoformat()} for v in volumes]}).encode()
        self._call(f"publishing broker {self.broker_id}'s volumes", self._write, f"{VOLUMES_PATH}/{self.broker_id}",
                   data)

    def read(self) -> dict[int, tuple[Volume, ...]]:
        """Every published broker's volumes, each at the time its sidecar read it."""
        return self._call("reading the published volumes", self._read_all)

    def close(self) -> None:
        """End the session: this broker's znode goes at once."""
        with self._lock:
            if self._started:
                self._client.stop()
                self._client.close()
                self._started = False

    # -------------------------------------------------------------- plumbing

    def _call(self, what: str, function, *args):
        with self._lock:
            try:
                self._connect()
                retry = self._retry.copy()
                retry.deadline = deadline.left(self._retry_deadline) or self._retry_deadline
                return retry(function, *args)
            except (KazooException, KazooTimeoutError, RetryFailedError) as error:
                raise RetryableAdminError(f"{what} in ZooKeeper at {self.connect} failed: "
                                          f"{type(error).__name__} {error}".rstrip()) from error

    def _connect(self) -> None:
        if not self._started:
            # start() gives up (and stops the client) when no server answers in time; the next call tries again.
            self._client.start(timeout=deadline.left(self._retry_deadline, "connecting to ZooKeeper"))
            self._started = True
        if self._children is None:
            self._client.ensure_path(VOLUMES_PATH)
            ChildrenWatch(self._client, VOLUMES_PATH, self._children_changed)

    def _children_changed(self, children: list[str]) -> None:
        self._children = list(children)

    def _write(self, path: str, data: bytes) -> None:
        try:
            self._client.set(path, data)
        except NoNodeError:
            try:
                self._client.create(path, data, ephemeral=True, makepath=True)
            except NodeExistsError:  # made in between by our own retry: the next write updates it
                pass

    def _read_all(self) -> dict[int, tuple[Volume, ...]]:
        published = {}
        for child in sorted(self._children or ()):
            try:
                data, _ = self._client.get(f"{VOLUMES_PATH}/{child}")
            except NoNodeError:  # its sidecar went since the watch fired
                continue
            try:
                published[int(child)] = _volumes(json.loads(data))
            except (ValueError, KeyError, TypeError) as error:
                log.warning("ignoring the znode %s/%s: not volumes as quota-sidecar writes them (%s)",
                            VOLUMES_PATH, child, error)
        return published


def _volumes(document: dict) -> tuple[Volume, ...]:
    broker = int(document["broker_id"])
    return tuple(Volume(broker, v["log_dir"], int(v["total_bytes"]), int(v["available_bytes"]),
                        datetime.fromisoformat(v["observed_at"]).astimezone(timezone.utc))
                 for v in document["volumes"])
