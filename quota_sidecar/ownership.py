"""Writes that change only what the sidecar owns, and put back what it replaced.

A target is anything the sidecar sets on the cluster: a client quota key of one entity, a dynamic config
key of one broker. `records` (kept in the cluster, see cluster_store) maps each target the sidecars wrote
to the value it replaced, so clean-up restores the cluster even after a restart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Hashable, Mapping

Target = Hashable


@dataclass(frozen=True)
class Write:
    target: Target
    old: float | None
    new: float | None          # None removes the value
    replaced: float | None     # what was there before the sidecar first wrote this target
    forget: bool = False       # the target is back to what the sidecar found: drop its record

    @property
    def changes(self) -> bool:
        return not same(self.old, self.new)


def plan(wanted: Mapping[Target, float | None], in_force: Mapping[Target, float | None],
         records: Mapping[Target, float | None]) -> list[Write]:
    """The writes that turn `in_force` into `wanted`, and nothing else.

    A target wanted as None ("nothing from the sidecar") is only touched when a record says the sidecar
    set it: it goes back to the value it replaced.
    """
    writes = []
    for target, new in wanted.items():
        old = in_force.get(target)
        if new is not None and not same(old, new):
            writes.append(Write(target, old, new, records.get(target, old)))
        elif new is None and target in records:
            writes.append(Write(target, old, records[target], records[target], forget=True))
    return writes


def restore(in_force: Mapping[Target, float | None], records: Mapping[Target, float | None]) -> list[Write]:
    """Clean-up, in the order of `records`: every target the sidecars set goes back to the value it replaced."""
    return [Write(target, in_force.get(target), original, original, forget=True)
            for target, original in records.items()]


def carry_out(writes: list[Write], store, record_key: Callable[[Target], str],
              apply_one: Callable[[Target, float | None], None], on_change: Callable[[Write], None],
              force: bool = False) -> None:
    """Apply `writes`, keeping the records in `store` true. `force` writes even what reads back as done:
    clean-up must not trust a read that may lag the write before it."""
    for write in writes:
        key = record_key(write.target)
        if not write.forget:
            # Recorded before the write: a crash in between still leaves the target known as ours. Also
            # when a record was read at the start of the pass: another sidecar's clean-up may have
            # deleted it since; the value written is the same.
            store.put(key, {"replaced": write.replaced})
        if write.changes or force:
            apply_one(write.target, write.new)
            on_change(write)
        if write.forget:
            store.delete(key)


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9)
