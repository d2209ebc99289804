"""Writes that change only what the sidecar owns, and hand back what it replaced, unless someone else changed it.

A target is anything the sidecar sets on the cluster: a client quota key of one entity, a dynamic config
key of one broker. The records (kept in the cluster, see cluster_store) say, for each target the sidecars
wrote, the value it replaced and the value they last wrote (`records.Owned`), so clean-up restores the
cluster even after a restart. A record is written before its value (after it when it names that value already:
`Write.named`), and keeps the value in force then: a value write that never happened (a crash, a timeout) leaves
that one in force, still the sidecars'.

Other tools and people write the same targets (`kafka-reassign-partitions --verify` removes every
throttle rate, an operator raises a quota by hand). A value in force that is no longer what the sidecars
wrote was changed by someone else: the sidecars leave it alone from then on, and when they let go of the
target they forget it instead of putting back what they once replaced. Except a value another sidecar wrote
moments ago (settle_races): two sidecars writing at once, each a record then the value, may interleave.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Mapping, TypeVar

from ..common.records import Owned, Records

Target = Hashable
# Before leaving a target to someone else, the writer reads again after this long: a broker answering a
# describe may lag the sidecars' last write by a moment, and another sidecar may have written since.
SECOND_LOOK_SECONDS = 0.5
Planned = TypeVar("Planned")


@dataclass(frozen=True)
class Write:
    target: Target
    old: float | None
    new: float | None          # None removes the value
    replaced: float | None     # what was there before the sidecar first wrote this target
    forget: bool = False       # the sidecar lets go of the target: drop its record
    left_alone: bool = False   # someone changed the value since the sidecar wrote `written`: nothing is written
    written: float | None = None  # with left_alone: the value the sidecar had written
    # The target's record names `new` already (as written, or as in force before its last write): the value may go
    # before the record, which stays true if the sidecar stops in between (the local verdict's write does not wait
    # for a records topic that stalls).
    named: bool = False

    @property
    def changes(self) -> bool:
        return not self.left_alone and not same(self.old, self.new)

    def record(self, seen_at: float | None = None) -> Owned:
        """What the record keeps once this write is done (for a write that does not forget); `seen_at`: when the
        writer looked at the cluster."""
        if self.left_alone:
            return Owned(self.replaced, self.written, yielded=True, seen_at=seen_at)
        return Owned(self.replaced, self.new, seen_at=seen_at, before=self.old, before_known=True)


def plan(wanted: Mapping[Target, float | None], in_force: Mapping[Target, float | None],
         owned: Mapping[Target, Owned]) -> list[Write]:
    """The writes that turn `in_force` into `wanted`, and nothing else.

    A target wanted as None ("nothing from the sidecar") is only touched when a record says the sidecar
    set it: it goes back to the value it replaced. A target someone changed after the sidecar's write is
    left alone, and forgotten once the sidecar lets go of it.
    """
    writes = []
    for target, new in wanted.items():
        old, mine = in_force.get(target), owned.get(target)
        if mine is not None and (mine.yielded or changed_by_others(mine, old)):
            if new is None:
                writes.append(_leave(target, old, mine, forget=True))
            elif not mine.yielded:
                writes.append(_leave(target, old, mine))
        elif new is not None and not same(old, new):
            writes.append(Write(target, old, new, old if mine is None else mine.replaced, named=names(mine, new)))
        elif new is None and mine is not None:
            writes.append(Write(target, old, mine.replaced, mine.replaced, forget=True))
    return writes


def restore(in_force: Mapping[Target, float | None], owned: Mapping[Target, Owned]) -> list[Write]:
    """Clean-up, in the order of `owned`: every target the sidecars set goes back to the value it replaced,
    except those someone changed since (only forgotten)."""
    return plan(dict.fromkeys(owned), in_force, owned)


def changed_by_others(mine: Owned, in_force: float | None) -> bool:
    """The value in force is neither the one the sidecars last wrote nor the one that write was to change, which
    is still in force when the write did not happen after its record (a crash, or a request that timed out: taking
    that for someone else's change would leave a flood unthrottled). Unknowable for an old record: trusted."""
    unfinished = mine.before_known and same(in_force, mine.before)
    return mine.written_known and not same(in_force, mine.written) and not unfinished


def names(mine: Owned | None, value: float | None) -> bool:
    """Whether the record says the sidecars wrote `value`, or had it in force before their last write."""
    return mine is not None and ((mine.written_known and same(value, mine.written))
                                 or (mine.before_known and same(value, mine.before)))


def settle_races(owned: Mapping[Target, Owned], in_force: Mapping[Target, float | None],
                 written_lately: Callable[[Target], list[dict]]) -> dict[Target, Owned]:
    """`owned`, with each target whose value in force a sidecar wrote moments ago (`written_lately`: its records
    of the last seconds, oldest first) known as the sidecars' again: two sidecars writing it at once (each a
    record, then the value) can leave one's value beside the other's record, and neither is someone else."""
    settled = dict(owned)
    for target, mine in owned.items():
        old = in_force.get(target)
        if not mine.yielded and changed_by_others(mine, old) and any(
                "written" in earlier and same(earlier["written"], old) for earlier in written_lately(target)):
            settled[target] = Owned(mine.replaced, old, seen_at=mine.seen_at)
    return settled


def recorded_again(settled: Mapping[Target, Owned], stored: Mapping[Target, Owned], writes: list[Write],
                   in_force: Mapping[Target, float | None]) -> list[Write]:
    """writes, and a record written again (the value unchanged) for each target settle_races gave back to the
    sidecars that no write records anew: its record still names the overtaken value, and once the race window
    has passed the next look would take the value in force for someone else's and leave the target alone."""
    planned = {write.target for write in writes}
    return writes + [Write(target, in_force.get(target), in_force.get(target), mine.replaced)
                     for target, mine in settled.items() if target not in planned and mine != stored.get(target)]


def _leave(target: Target, old: float | None, mine: Owned, forget: bool = False) -> Write:
    return Write(target, old, old, mine.replaced, forget=forget, left_alone=True, written=mine.written)


def carry_out(writes: list[Write], store, record_key: Callable[[Target], str],
              apply_one: Callable[[Target, float | None], None], on_change: Callable[[Write], None],
              force: bool = False) -> None:
    """Apply `writes`, keeping the records in `store` true; on_change(write) for each value changed or left
    alone. `force` writes even what reads back as done: clean-up must not trust a read that may lag the
    write before it."""
    for write in writes:
        key = record_key(write.target)
        if not write.forget and not write.named:
            # Recorded before the write: a crash in between still leaves the target known as ours. Also
            # when a record was read at the start of the pass: another sidecar's clean-up may have
            # deleted it since; the value written is the same.
            store.put(key, write.record().stored())
        if write.changes or (force and not write.left_alone):
            apply_one(write.target, write.new)
        if write.named:
            store.put(key, write.record().stored())
        if write.changes or write.left_alone:
            on_change(write)
        if write.forget:
            store.delete(key)


def carry_out_together(writes: list[Write], store, record_key: Callable[[Target], str],
                       apply_all: Callable[[list[Write]], None], on_change: Callable[[Write], None],
                       force: bool = False, seen_at: float | None = None) -> None:
    """carry_out in three round trips however many writes: every record first (but those whose value the record
    names already), then every value changed (one request, in the writes' order), then the records let go of and
    those of the values written first."""
    store.write_many({record_key(write.target): write.record(seen_at).stored()
                      for write in writes if not write.forget and not write.named})
    apply_all([write for write in writes if write.changes or (force and not write.left_alone)])
    for write in writes:
        if write.changes or write.left_alone:
            on_change(write)
    store.write_many({record_key(write.target): None if write.forget else write.record(seen_at).stored()
                      for write in writes if write.forget or write.named})


def left_alone_reason(write: Write, shown: Callable[[float | None], str]) -> str:
    """One line's end for a target left alone: what is in force, what the sidecar had written."""
    then = "forgotten" if write.forget else "left alone until the sidecar lets go of it"
    return (f"{shown(write.old)} in force, changed by someone else since the sidecar wrote "
            f"{shown(write.written)}: {then}")


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9)


def leaves_alone(writes: Iterable[Write]) -> bool:
    return any(write.left_alone for write in writes)


def with_second_look(plan: Callable[[Records], Planned], all_records: Records, read_records: Callable[[], Records],
                     yields: Callable[[Planned], bool] = leaves_alone,
                     sleep: Callable[[float], None] = time.sleep,
                     second: Callable[[Records], Planned] | None = None) -> Planned:
    """plan(all_records); when that leaves a target to someone else, planned once more SECOND_LOOK_SECONDS
    later on records read anew (the broker may not show the last write yet, or another sidecar wrote), by
    `second` when given."""
    planned = plan(all_records)
    if yields(planned):
        sleep(SECOND_LOOK_SECONDS)
        planned = (second or plan)(read_records())
    return planned
