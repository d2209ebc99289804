"""Cordoned log dirs (KIP-1066, Kafka >= 4.3), decided: which of its broker's log dirs a sidecar cordons,
and the change of the broker's `cordoned.log.dirs` that gets there. No I/O.

While a log dir violates the storage limit, its broker's sidecar adds it to `cordoned.log.dirs`, so that
Kafka places no new replica there; once it recovers, the sidecar removes it again. Only its own entries
(rule 4): a dir someone else cordoned stays as it is, and an entry of the sidecar's that someone removed
while the dir still violated is left out (yielded) until the dir recovers. An entry is the path exactly as
DescribeLogDirs reports it (KAFKA-20901: the broker compares entries with `log.dirs` as written).

APPEND and SUBTRACT change the broker's dynamic value only, which replaces a static one (server.properties)
as a whole: a first entry over a static list is SET on top of that list, and a dynamic value that would
end up equal to the static one is deleted, so no static entry is ever hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

KEY = "cordoned.log.dirs"
ALL = "*"  # every log dir of the broker; the broker refuses it beside other entries


@dataclass(frozen=True)
class InForce:
    """`cordoned.log.dirs` of one broker: its dynamic value (None: not set) and its static one."""
    dynamic: tuple[str, ...] | None
    static: tuple[str, ...] = ()

    @classmethod
    def from_layers(cls, layers: Mapping[str, str | None]) -> InForce:
        """From admin.describe_config_layers' {source: value} of the key."""
        dynamic = layers.get("DYNAMIC_BROKER_CONFIG")
        return cls(None if dynamic is None else _entries(dynamic), _entries(layers.get("STATIC_BROKER_CONFIG")))

    @property
    def entries(self) -> tuple[str, ...]:
        """The entries the broker applies."""
        return self.static if self.dynamic is None else self.dynamic


@dataclass(frozen=True)
class CordonChange:
    add: frozenset[str] = frozenset()
    remove: frozenset[str] = frozenset()
    add_op: tuple[str, str] | None = None            # ("APPEND", dirs), or ("SET", static + dirs)
    remove_op: tuple[str, str | None] | None = None  # ("SUBTRACT", dirs), or ("DELETE", None)
    recorded: Mapping[str, bool] = field(default_factory=dict)  # log dir -> yielded, afterwards
    yielded: frozenset[str] = frozenset()           # entries of the sidecar's someone removed: left out now
    forgotten: frozenset[str] = frozenset()         # records dropped: the dir recovered, or the entry is gone

    def entries_after(self, in_force: InForce) -> tuple[str, ...]:
        """The entries the broker applies once the change is written."""
        return tuple(sorted((set(in_force.entries) | self.add) - self.remove))


def wanted(violations: Iterable[Mapping], broker_id: int, enabled: bool = True) -> frozenset[str]:
    """This broker's violating log dirs (decider.Decision.violations); none when cordoning is off."""
    if not enabled:
        return frozenset()
    return frozenset(v["log_dir"] for v in violations if v["broker_id"] == broker_id)


def change(wanted: frozenset[str], in_force: InForce, recorded: Mapping[str, bool],
           force: bool = False) -> CordonChange:
    """What turns `in_force` towards `wanted`, touching only the sidecar's own entries (`recorded`: log dir
    -> yielded). `force` (clean-up) removes every recorded entry of the dynamic value without trusting
    a read that may lag the last write."""
    present = set(in_force.entries)
    dynamic = None if in_force.dynamic is None else set(in_force.dynamic)
    add, remove, after, yielded = set(), set(), {}, set()
    for log_dir in sorted(wanted | set(recorded)):
        mine = recorded.get(log_dir)  # None: not the sidecar's; False: its entry; True: yielded
        if log_dir in wanted:
            if mine is None and log_dir not in present and ALL not in present:
                add.add(log_dir)
                after[log_dir] = False
            elif mine is False and log_dir not in present:  # someone removed it: theirs to decide now
                yielded.add(log_dir)
                after[log_dir] = True
            elif mine is not None:
                after[log_dir] = mine
        elif mine is False and dynamic is not None and (log_dir in dynamic or force):
            remove.add(log_dir)
    return CordonChange(frozenset(add), frozenset(remove), _add_op(add, in_force), _remove_op(remove, add, in_force),
                        after, frozenset(yielded), frozenset(recorded) - frozenset(after))


def _add_op(add: set[str], in_force: InForce) -> tuple[str, str] | None:
    if not add:
        return None
    if in_force.dynamic is None and in_force.static:  # an APPEND would start from "" and hide the static list
        return "SET", ",".join([*in_force.static, *sorted(add)])
    return "APPEND", ",".join(sorted(add))


def _remove_op(remove: set[str], add: set[str], in_force: InForce) -> tuple[str, str | None] | None:
    if not remove:
        return None
    left = (set(in_force.entries) | add) - remove
    if left == set(in_force.static):  # Kafka would keep '' (or a copy of the static list) as the dynamic value
        return "DELETE", None
    return "SUBTRACT", ",".join(sorted(remove))


def _entries(raw: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (raw or "").split(",") if item.strip())
