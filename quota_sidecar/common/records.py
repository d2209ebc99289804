"""The records the sidecars keep in the cluster (cluster_store.py): their kinds, keys and how they read.

A key is a JSON list, the record's kind first, then what it is about:

- `["quota", entity, key]` -> `{"replaced", "written"[, "yielded"][, "seen_at"]}`: a client quota the sidecars set,
  the value it replaced, the value they last wrote and when the sidecar that wrote it had looked (`Owned`);
- `["config", broker, key]` -> the same for a dynamic config of one broker its sidecar set;
- `["entries", broker, topic, role]` -> `{"entries": [...]}`: the throttled-replica entries a broker's sidecar added;
- `["cordon", broker, log dir]` -> `{"yielded"}`: a log dir a broker's sidecar added to its `cordoned.log.dirs`
  (yielded: someone removed it since, and the sidecar leaves it out until the dir recovers);
- `["cancelled", broker, topic, partition]` -> `{"at", "log_dir", "replicas", "adding", "removing", "why"}`: a move
  onto a dir of that broker its sidecar cancelled (local_guard.py), kept until the sidecar's clean-up;
- `["override", "global"]` -> `{"rate", "autoremove"}` and `["override", "broker", id]` -> `{"rate"}`: operators'
  replication throttle overrides;
- `["cleanup"]` -> `{"at"}`: `quota-sidecar cleanup` handed everything back then (epoch seconds); an agent running
  since before writes nothing more (loop.py);
- `["descent"]` -> `{"rate"}`: while producer quotas come down in steps, the fastest fill since the descent began
  (bytes/s), which every agent judges the horizon at (decide/descent.py), a restarted one too.

Every sidecar reads them all once a pass (`parse`), so a restarted sidecar knows what is its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from .observation import Overrides

# The compacted topic that holds them (state.store=topic, the default).
TOPIC = "__quota_sidecar_state"
QUOTA, CONFIG, ENTRIES, CORDON, OVERRIDE, CANCELLED, CLEANUP, DESCENT = (
    "quota", "config", "entries", "cordon", "override", "cancelled", "cleanup", "descent")
Records = Mapping[tuple, dict]


def key(kind: str, *about) -> str:
    """The store key of a record; an entity such as (None, client id) becomes a JSON list."""
    return json.dumps([kind, *about])


def override_key(broker_id: int | None) -> str:
    """The global override's key (None), or one broker's."""
    return key(OVERRIDE, "global") if broker_id is None else key(OVERRIDE, "broker", broker_id)


def parse(stored: Mapping[str, dict]) -> dict[tuple, dict]:
    """The store's key -> value map with each key read back as a tuple (lists inside become tuples too)."""
    return {_hashable(json.loads(raw)): value for raw, value in stored.items()}


@dataclass(frozen=True)
class Owned:
    """What the sidecars know of a target they wrote (a quota key of an entity, a config key of a broker)."""

    replaced: float | None  # the value in force before they first wrote it: what a hand-back puts back
    written: float | None = None  # the value they last wrote
    written_known: bool = True  # False for a record of a version that kept only `replaced`
    yielded: bool = False  # someone changed the value after their write: they leave it alone
    # When the sidecar that last wrote it had looked at the cluster (epoch seconds; None: unknown): a sidecar
    # whose decision rests on an older look changes none of it (quota_writes.py).
    seen_at: float | None = None
    # The value in force when they recorded `written`, before writing it: still in force, that write did not happen
    # (a crash or a timeout between the record and the value), and the target is still theirs (ownership.py).
    before: float | None = None
    before_known: bool = False  # False for a record of a version that did not keep it

    def stored(self) -> dict:
        return {"replaced": self.replaced, "written": self.written, **({"yielded": True} if self.yielded else {}),
                **({"seen_at": self.seen_at} if self.seen_at is not None else {}),
                **({"before": self.before} if self.before_known else {})}

    @classmethod
    def read(cls, value: dict) -> Owned:
        return cls(value["replaced"], value.get("written"), "written" in value, bool(value.get("yielded")),
                   value.get("seen_at"), value.get("before"), "before" in value)


def owned(records: Records, kind: str) -> dict[tuple, Owned]:
    """target -> what the sidecars know of it, for every target of this kind (quota or config) they wrote."""
    return {record[1:]: Owned.read(value) for record, value in records.items() if record[0] == kind}


def owned_configs(records: Records, broker: int) -> dict[str, Owned]:
    """config key -> what its sidecar knows of it, for every config of this broker its sidecar set."""
    return {target[1]: value for target, value in owned(records, CONFIG).items() if target[0] == broker}


def owned_entries(records: Records, broker: int) -> dict[tuple[str, str], set[str]]:
    """(topic, role) -> the throttled-replica entries this broker's sidecar added."""
    return {record[2:]: set(value["entries"]) for record, value in records.items()
            if record[0] == ENTRIES and record[1] == broker}


def cordoned(records: Records, broker: int) -> dict[str, bool]:
    """log dir -> yielded, for every log dir of this broker its sidecar cordoned."""
    return {record[2]: bool(value.get("yielded")) for record, value in records.items()
            if record[0] == CORDON and record[1] == broker}


def cancelled_moves(records: Records) -> list[dict]:
    """Every move the sidecars cancelled, oldest first, each with its broker, topic and partition."""
    found = [{"broker": record[1], "topic": record[2], "partition": record[3], **value}
             for record, value in records.items() if record[0] == CANCELLED]
    return sorted(found, key=lambda move: move["at"])


def overrides(records: Records) -> Overrides:
    global_record = records.get((OVERRIDE, "global"))
    brokers = {record[2]: value["rate"] for record, value in records.items()
               if record[0] == OVERRIDE and record[1] == "broker"}
    return Overrides(global_rate=global_record["rate"] if global_record else None,
                     global_autoremove=bool(global_record and global_record.get("autoremove")),
                     broker_rates=brokers)


def handed_back_at(records: Records) -> float | None:
    """When `quota-sidecar cleanup` last handed everything back (epoch seconds), if it did."""
    found = records.get((CLEANUP,))
    return None if found is None else found["at"]


def descent_rate(records: Records) -> float | None:
    """The rate the descent under way began from (bytes/s), None when none is."""
    found = records.get((DESCENT,))
    return None if found is None else found["rate"]


def _hashable(value):
    return tuple(_hashable(item) for item in value) if isinstance(value, list) else value
