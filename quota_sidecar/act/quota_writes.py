"""The client quotas the sidecars write: recorded first, only what changed, handed back on clean-up.

What is in force for the sidecar's own entities, how many tenants it throttles, and the last resort in force
(last_resort.py) are kept for status and metrics (snapshot.py).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Mapping

from ..common import records
from ..configuration.settings import QuotaConfig
from ..decide import descent, quotas
from . import last_resort, ownership
from .snapshot import Counters, utcnow

log = logging.getLogger(__name__)


class QuotaWriter:
    def __init__(self, config: QuotaConfig, admin, store, counters: Counters):
        self.config, self.admin, self.store, self.counters = config, admin, store, counters
        self.in_force: dict = {}  # the sidecar's own entities
        self.tenants = quotas.TenantCount(0, 0)
        self.stopped = False  # `quota-sidecar cleanup` handed everything back: nothing is written again
        self.last_resort: last_resort.LastResort | None = None
        # What this process last wrote to each target, beside the records: another sidecar's clean-up may delete a
        # record while this one's value is on its way (SIGTERM to every agent at once), and the clean-up of this one
        # must still hand that value back.
        self._own_writes: dict[ownership.Target, records.Owned] = {}

    def apply(self, wanted: quotas.ClientQuotas, all_records: records.Records, tighten_only: bool = False,
              seen_at: datetime | None = None, named_only: bool = False, stepped_from: Mapping | None = None) -> None:
        """Write what differs from `wanted`, decided from a look at the cluster at `seen_at`. A quota another
        sidecar wrote from a later look (its local verdict while this pass waited for the aggregator, a lift
        after this sidecar's last valid decision) is left as it is: this decision did not see what that one saw.
        So is a producer quota the descent stepped down from another value than the one in force now
        (`stepped_from`, Decision's): the next pass steps from this one. The hard limit's 1 B/s is written anyway.
        `tighten_only`: a poll that could not decide knows nothing new, so it may keep a throttle (retrying a
        write that failed) but lifts none. `named_only`: only the writes whose value the records name already
        (ownership.Write.named), for records that may be stale: the others need records read now."""
        if self.stopped:
            return
        looked = None if seen_at is None else seen_at.timestamp()

        def planned(all_records: records.Records, settle: bool = False) -> tuple[dict, list[ownership.Write], dict]:
            stored = owned = records.owned(all_records, records.QUOTA)
            in_force = self.read(wanted, owned)
            if settle:
                owned = self._settled(owned, quotas.flatten(in_force))
            writes = ownership.recorded_again(
                owned, stored, ownership.plan(quotas.targets(wanted, in_force, owned), quotas.flatten(in_force), owned),
                quotas.flatten(in_force))
            return in_force, [write for write in writes if (not tighten_only or _tightens(write))
                              and (not named_only or write.named)
                              and not _seen_later(owned.get(write.target), looked, write)
                              and not _stepped_from_another(write, stepped_from or {})], owned

        # Races between sidecars are settled on the second look's fresh records only: the pass's may not show
        # the write that explains what is in force (another sidecar's verdict while this pass waited).
        in_force, writes, owned = ownership.with_second_look(
            planned, all_records, self._read_records, yields=lambda planned: ownership.leaves_alone(planned[1]),
            second=lambda fresh: planned(fresh, settle=True))
        ownership.carry_out_together(writes, self.store, self._record_key, self._alter_quotas, self._written,
                                     seen_at=looked)
        self._remember(writes, looked)
        in_force = quotas.after(in_force, writes)
        self.in_force = {entity: keys for entity, keys in in_force.items() if entity not in wanted.tenants}
        self.tenants = quotas.tenant_count(wanted, in_force)
        known = self.last_resort.entities if self.last_resort is not None else ()
        self._follow_last_resort(last_resort.written(in_force, owned, writes, looked, known), seen_at)

    def look(self, wanted: quotas.ClientQuotas, all_records: records.Records) -> None:
        """What is in force, and the last resort, read without writing (`status --direct`)."""
        owned = records.owned(all_records, records.QUOTA)
        self.in_force = self.read(wanted, owned)
        self.last_resort = last_resort.current(None, last_resort.written(self.in_force, owned), utcnow())

    def stop(self) -> None:
        """`quota-sidecar cleanup` handed back what the sidecars set, the last resort too: nothing is written
        again."""
        self.stopped = True
        self._follow_last_resort({}, None)

    def _follow_last_resort(self, found: dict, seen_at: datetime | None) -> None:
        previous = self.last_resort
        self.last_resort = last_resort.follow(previous, found, seen_at or utcnow())
        self.counters.last_resort_episodes += previous is None and self.last_resort is not None

    def read(self, wanted: quotas.ClientQuotas, owned) -> dict:
        """The quotas in force for every entity the sidecars want or once wrote."""
        entities = dict.fromkeys([*wanted.entities(), *(entity for entity, _ in owned)])
        return self.admin.describe_user_quotas(list(entities))

    def cleanup(self) -> records.Records:
        """Hand back every quota the sidecars set: the value it replaced, unless someone changed it since. The
        records as they were read, for the rest of the clean-up."""
        exemptions = {(None, self.config.sidecar_client_id), self.config.sidecar_entity}  # and one written before

        def planned(all_records: records.Records, settle: bool = False) -> tuple[records.Records, list]:
            owned = {**self._own_writes, **records.owned(all_records, records.QUOTA)}
            in_force = quotas.flatten(self.admin.describe_user_quotas(list(dict.fromkeys(e for e, _ in owned))))
            return all_records, ownership.restore(in_force, self._settled(owned, in_force) if settle else owned)

        all_records, writes = ownership.with_second_look(planned, self._read_records(), self._read_records,
                                                         yields=lambda planned: ownership.leaves_alone(planned[1]),
                                                         second=lambda fresh: planned(fresh, settle=True))
        # The sidecar's own exemption goes last: until then its record deletions must not be throttled.
        last = [write for write in writes if write.target[0] in exemptions]
        for batch in ([write for write in writes if write not in last], last):
            ownership.carry_out_together(batch, self.store, self._record_key, self._alter_quotas, self._written,
                                         force=True)
        return all_records

    def _remember(self, writes: list[ownership.Write], looked: float | None) -> None:
        for write in writes:
            if write.forget:
                self._own_writes.pop(write.target, None)
            else:
                self._own_writes[write.target] = write.record(looked)

    def _settled(self, owned: dict, in_force: dict) -> dict:
        """owned, with what two sidecars wrote at once known as theirs (ownership.settle_races)."""
        return ownership.settle_races(owned, in_force,
                                      lambda target: self.store.written_lately(self._record_key(target)))

    def _read_records(self) -> records.Records:
        return records.parse(self.store.read_all())

    def _written(self, write: ownership.Write) -> None:
        if write.left_alone:
            log.info("%s: %s", quotas.target_label(write.target), ownership.left_alone_reason(write, quotas.rate_text))
            return
        self.counters.writes += 1
        log.info("%s: %s -> %s", quotas.target_label(write.target), quotas.rate_text(write.old),
                 quotas.rate_text(write.new))

    @staticmethod
    def _record_key(target) -> str:
        return records.key(records.QUOTA, *target)

    def _alter_quotas(self, writes: list[ownership.Write]) -> None:
        """One AlterClientQuotas for all: a tenant more costs no round trip in the local verdict's path."""
        changes: dict = {}
        for write in writes:
            entity, key = write.target
            changes.setdefault(entity, {})[key] = write.new
        self.admin.alter_user_quotas(changes)


def _seen_later(mine: records.Owned | None, looked: float | None, write: ownership.Write) -> bool:
    """Whether the sidecar that last wrote this target had looked at the cluster after `looked`: then a change
    decided from that look is not made."""
    later = write.changes and mine is not None and mine.seen_at is not None and looked is not None \
        and mine.seen_at > looked
    if later:
        log.info("%s: %s kept, not %s: written by a sidecar that looked at the cluster %.1f s after this "
                 "decision's look", quotas.target_label(write.target), quotas.rate_text(write.old),
                 quotas.rate_text(write.new), mine.seen_at - looked)
    return later


def _tightens(write: ownership.Write) -> bool:
    """A lower rate than in force (None: no quota, unlimited), or no change at all."""
    if not write.changes:
        return True
    return write.new is not None and (write.old is None or write.new < write.old)


def _stepped_from_another(write: ownership.Write, stepped_from: Mapping) -> bool:
    """Whether the write lowers a producer quota (not to the hard limit's) that the decision knew at another value
    (another sidecar lifted it since, from a newer view of the volumes)."""
    entity, key = write.target
    if key != quotas.PRODUCE or entity not in stepped_from or stepped_from[entity] == write.old \
            or not write.changes or write.new is None or write.new <= descent.LAST_RESORT \
            or not descent.lower(write.new, write.old):
        return False
    log.info("%s: %s kept, not %s: the descent stepped from %s, which is no longer in force",
             quotas.target_label(write.target), quotas.rate_text(write.old), quotas.rate_text(write.new),
             quotas.rate_text(stepped_from[entity]))
    return True
