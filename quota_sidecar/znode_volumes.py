"""The sidecars' volumes in ZooKeeper: for brokers whose DescribeLogDirs carries no sizes (Kafka < 3.3, KIP-827).

Each sidecar publishes its own broker's log dirs, as it reads them locally with statvfs, in an ephemeral
znode `<chroot>/quota-sidecar/volumes/<broker id>` (JSON). Like a broker's registration under
/brokers/ids, the znode goes when the sidecar's session ends: at once on a clean stop, after the session
timeout when the sidecar dies. Every sidecar keeps the list of them with a children watch and reads their
data at each poll. A new session after an expired one publishes the znode again at the next write.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from .observation import Volume
from .zookeeper_session import ZooKeeperSession

log = logging.getLogger(__name__)

VOLUMES_PATH = "/quota-sidecar/volumes"


class ZnodeVolumes:
    """Publishes this broker's volumes (when broker_id is known) and reads everyone's, through `session`."""

    def __init__(self, session: ZooKeeperSession, broker_id: int | None):
        self.session, self.broker_id = session, broker_id
        self._children: list[str] | None = None  # kept current by the children watch
        session.on_first_connect(self._watch_children)

    def __repr__(self) -> str:
        return f"ZnodeVolumes({self.session!r}, broker_id={self.broker_id})"

    def publish(self, volumes: Iterable[Volume]) -> None:
        """Write this broker's volumes to its ephemeral znode (made again if its session's went)."""
        if self.broker_id is None:
            return
        data = json.dumps({"broker_id": self.broker_id, "volumes": [
            {"log_dir": v.log_dir, "total_bytes": v.total_bytes, "available_bytes": v.available_bytes,
             "observed_at": v.observed_at.isoformat()} for v in volumes]}).encode()
        self.session.call(f"publishing broker {self.broker_id}'s volumes", self._write,
                          f"{VOLUMES_PATH}/{self.broker_id}", data)

    def read(self) -> dict[int, tuple[Volume, ...]]:
        """Every published broker's volumes, each at the time its sidecar read it."""
        return self.session.call("reading the published volumes", self._read_all)

    def close(self) -> None:
        self.session.close()

    # -------------------------------------------------------------- plumbing

    def _watch_children(self, client: KazooClient) -> None:
        self.session.wait(client.ensure_path_async(VOLUMES_PATH))
        ChildrenWatch(client, VOLUMES_PATH, self._children_changed)

    def _children_changed(self, children: list[str]) -> None:
        self._children = list(children)

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


def _volumes(document: dict) -> tuple[Volume, ...]:
    broker = int(document["broker_id"])
    return tuple(Volume(broker, v["log_dir"], int(v["total_bytes"]), int(v["available_bytes"]),
                        datetime.fromisoformat(v["observed_at"]).astimezone(timezone.utc))
                 for v in document["volumes"])
