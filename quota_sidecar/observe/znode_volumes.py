"""The sidecars' volumes in ZooKeeper: for brokers whose DescribeLogDirs carries no sizes (Kafka < 3.3, KIP-827).

Each sidecar publishes its own broker's log dirs, as it reads them locally with statvfs, in an ephemeral
znode `<chroot>/quota-sidecar/volumes/<broker id>` (JSON). Like a broker's registration under
/brokers/ids, the znode goes when the sidecar's session ends: at once on a clean stop, after the session
timeout when the sidecar dies. Every sidecar keeps the list of them with a children watch and reads their
data at each poll.

The znode follows the local watch's samples: each sample is offered, and a thread of its own writes it
when the dirs, their total or their available bytes differ from what the znode holds (under load at the
watch's cadence; on a quiet disk never), so the watch never waits for ZooKeeper. A pass writes on its own
thread what it read (without a running watch) or the watch's newest sample, when the znode does not hold it
yet. A znode that went (an expired session, a hand) is written again at the next sample or pass.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..common.errors import AdminError
from ..common.observation import Volume
from ..common.periodic import PeriodicWorker
from .volumes import with_published
from .zookeeper_session import ZooKeeperSession

log = logging.getLogger(__name__)

VOLUMES_PATH = "/quota-sidecar/volumes"
RETRY_PAUSE_SECONDS = 1.0  # between a failed write and the next try (each try waits up to the session's deadline)


class ZnodeVolumes:
    """Publishes this broker's volumes (when broker_id is known) and reads everyone's, through `session`."""

    def __init__(self, session: ZooKeeperSession, broker_id: int | None):
        self.session, self.broker_id = session, broker_id
        self._children: list[str] | None = None  # kept current by the children watch
        self._lock = threading.Lock()  # guards _written and _offered; never held over a ZooKeeper call
        self._writing = threading.Lock()  # one write at a time, in the order they are made
        self._written: tuple | None = None  # the content (_content) the znode holds; None: unknown or gone
        self._offered: tuple[Volume, ...] | None = None  # the newest sample not written yet
        # Started by the first sample offered; no interval: it writes when an offer wakes it.
        self._publisher = PeriodicWorker("znode-publisher", self._publish_offered, None)
        self._failing = False
        session.on_first_connect(self._watch_children)

    def __repr__(self) -> str:
        return f"ZnodeVolumes({self.session!r}, broker_id={self.broker_id})"

    def offer(self, volumes: Iterable[Volume]) -> None:
        """This broker's volumes as just sampled (the local watch's thread): the publishing thread writes them
        when they differ from what the znode holds. Never waits for ZooKeeper."""
        volumes = tuple(volumes)
        if self.broker_id is None or self._publisher.stopping:
            return
        with self._lock:
            self._offered = None if _content(volumes) == self._written else volumes
            if self._offered is None:
                return
            if not self._publisher.running:
                self._publisher.start()
        self._publisher.wake()

    def publish(self, volumes: Iterable[Volume]) -> None:
        """Write this broker's volumes to its ephemeral znode now, on the caller's thread, unless it holds
        them already (made again if its session's went)."""
        volumes = tuple(volumes)
        if self.broker_id is None:
            return
        with self._writing:
            if _content(volumes) == self._written:
                return
            data = json.dumps({"broker_id": self.broker_id, "volumes": [
                {"log_dir": v.log_dir, "total_bytes": v.total_bytes, "available_bytes": v.available_bytes,
                 "observed_at": v.observed_at.isoformat()} for v in volumes]}).encode()
            self.session.call(f"publishing broker {self.broker_id}'s volumes", self._write,
                              f"{VOLUMES_PATH}/{self.broker_id}", data)
            with self._lock:
                self._written = _content(volumes)
                if self._offered is not None and _content(self._offered) == self._written:
                    self._offered = None

    def read(self, now: datetime) -> dict[int, tuple[Volume, ...]]:
        """Every published broker's volumes as of `now`: a sidecar writes its znode whenever they change, so
        what a znode holds is current while it exists (its `observed_at` is when they last changed)."""
        published = self.session.call("reading the published volumes", self._read_all)
        return {broker: tuple(replace(v, observed_at=now) for v in volumes) for broker, volumes in published.items()}

    def exchange(self, brokers: Sequence[int], volumes: Sequence[Volume], now: datetime,
                 own: Callable[[], Iterable[Volume]] | None) -> tuple[tuple[int, ...], tuple[Volume, ...], dict]:
        """A poll's brokers and volumes with the published ones (volumes.with_published), and those published;
        `own` first, this broker's volumes to publish (None: publish nothing)."""
        if own is not None:
            self.publish(own())
        published = self.read(now)
        return (*with_published(brokers, volumes, published), published)

    def close(self) -> None:
        self._publisher.stop(timeout=0)
        self.session.close()

    # -------------------------------------------------------------- plumbing

    def _publish_offered(self) -> None:
        """The publishing thread's tick: the newest offered sample, written while the watch goes on sampling."""
        with self._lock:
            offered = self._offered
        if offered is None or self._publisher.stopping:
            return
        try:
            self.publish(offered)
        except AdminError as error:  # the passes fail on ZooKeeper too and say so; one line here
            if self._publisher.stopping:
                return
            if not self._failing:
                log.warning("%s; trying again with the next samples", error)
            self._failing = True
            self._publisher.wait(RETRY_PAUSE_SECONDS)  # a pause that new samples do not cut short
            self._publisher.wake()
            return
        if self._failing:
            log.info("broker %s's volumes published in ZooKeeper again", self.broker_id)
        self._failing = False

    def _watch_children(self, client: KazooClient) -> None:
        """A children watch needs its parent, which a reader must not make (`status --direct` writes nothing): it
        starts once the parent exists, made by the first sidecar that publishes (makepath)."""
        def parent_changed(data, stat) -> bool | None:
            if stat is None:
                return None  # not there yet: the data watch waits for it
            ChildrenWatch(client, VOLUMES_PATH, self._children_changed)
            return False  # the children watch follows it from now on

        DataWatch(client, VOLUMES_PATH, parent_changed)

    def _children_changed(self, children: list[str]) -> None:
        self._children = list(children)
        if self.broker_id is not None and str(self.broker_id) not in children:
            with self._lock:  # our znode went (an expired session): the next sample or pass writes it again
                self._written = None

    def _write(self, path: str, data: bytes) -> None:
        client, wait = self.session.client, self.session.wait
        try:
            wait(client.set_async(path, data))
        except NoNodeError:
            try:
                wait(client.create_async(path, data, ephemeral=True, makepath=True))
            except NodeExistsError:  # made in between by our own retry: the next write updates it
                pass
            # The watch hears of it a moment later; the read that follows this write must already see it.
            self._children = sorted({*(self._children or ()), path.rsplit("/", 1)[1]})

    def _read_all(self) -> dict[int, tuple[Volume, ...]]:
        published = {}
        for child in sorted(self._children or ()):
            try:
                data, _ = self.session.wait(self.session.client.get_async(f"{VOLUMES_PATH}/{child}"))
            except NoNodeError:  # its sidecar went since the watch fired
                continue
            try:
                published[int(child)] = _volumes(json.loads(data))
            except (ValueError, KeyError, TypeError) as error:
                log.warning("ignoring the znode %s/%s: not volumes as quota-sidecar writes them (%s)",
                            VOLUMES_PATH, child, error)
        return published


def _content(volumes: Iterable[Volume]) -> tuple:
    """What a reader takes from the znode, its time aside: a sample that changes none of it is not written."""
    return tuple((v.log_dir, v.total_bytes, v.available_bytes) for v in volumes)


def _volumes(document: dict) -> tuple[Volume, ...]:
    broker = int(document["broker_id"])
    return tuple(Volume(broker, v["log_dir"], int(v["total_bytes"]), int(v["available_bytes"]),
                        datetime.fromisoformat(v["observed_at"]).astimezone(timezone.utc))
                 for v in document["volumes"])


class NoZnodes:
    """Without zookeeper.connect: the brokers' own word on their volumes, nothing published."""

    def offer(self, volumes: Iterable[Volume]) -> None:
        pass

    def exchange(self, brokers: Sequence[int], volumes: Sequence[Volume], now: datetime,
                 own: Callable[[], Iterable[Volume]] | None) -> tuple[tuple[int, ...], tuple[Volume, ...], dict]:
        return tuple(brokers), tuple(volumes), {}

    def close(self) -> None:
        pass
