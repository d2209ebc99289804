"""The sidecars' records and overrides in ZooKeeper (`state.store=zookeeper`), instead of the compacted topic.

The same key -> JSON store as cluster_store.ClusterStore, for ZooKeeper-era clusters whose operators would
rather not add a topic: one persistent znode `<chroot>/quota-sidecar/state` holding every record as one JSON
object. Each write reads the znode with its version and sets it at that version; when another sidecar wrote
in between, ZooKeeper refuses (BadVersion) and the write starts again from what is there now, so two
sidecars never lose each other's updates. A znode holds up to 1 MiB (jute.maxbuffer): thousands of records.
"""

from __future__ import annotations

import json
from typing import Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..common.text import writing
from ..observe.zookeeper_session import ZooKeeperSession

STATE_PATH = "/quota-sidecar/state"


class ZooKeeperStore:
    def __init__(self, session: ZooKeeperSession):
        self.session = session

    def __repr__(self) -> str:
        return f"ZooKeeperStore({self.session!r}, path={STATE_PATH!r})"

    def read_all(self, create: bool = True) -> dict[str, dict]:
        """Every record; {} while no sidecar wrote one (nothing is created by reading)."""
        return self.session.call(f"reading {STATE_PATH}", self._read)[0]

    def written_lately(self, key: str) -> list[dict]:
        """Nothing: the znode keeps each record's last value only (cluster_store.ClusterStore.written_lately)."""
        return []

    def put(self, key: str, value: dict) -> None:
        self.write_many({key: value})

    def delete(self, key: str) -> None:
        self.write_many({key: None})

    def write_many(self, changes: Mapping[str, dict | None]) -> None:
        """put (a value) or delete (None) each key, in one compare-and-set of the znode."""
        if not changes:
            return
        stored = json.loads(json.dumps(changes, sort_keys=True))  # what a reader gets back, as the topic store

        def change(records: dict) -> None:
            for key, value in stored.items():
                if value is None:
                    records.pop(key, None)
                else:
                    records[key] = value
        self.session.call(writing(list(changes), STATE_PATH), self._update, change)

    def connect(self) -> None:
        """Nothing to do: the session is connected before the store is made."""

    def close(self) -> None:
        self.session.close()

    def _read(self) -> tuple[dict[str, dict], int | None]:
        """The records and the znode's version (None: no znode yet)."""
        try:
            data, stat = self.session.wait(self.session.client.get_async(STATE_PATH))
        except NoNodeError:
            return {}, None
        return (json.loads(data) if data else {}), stat.version

    def _update(self, change) -> None:
        """Compare-and-set: read, change, write at the version read; from the start again when it moved."""
        client, wait = self.session.client, self.session.wait
        while True:
            records, version = self._read()
            change(records)
            data = json.dumps(records, sort_keys=True).encode()
            try:
                if version is None:
                    wait(client.create_async(STATE_PATH, data, makepath=True))
                else:
                    wait(client.set_async(STATE_PATH, data, version=version))
                return
            except (BadVersionError, NodeExistsError):  # another sidecar wrote first: apply ours to theirs
                continue
