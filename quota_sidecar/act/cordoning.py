"""Cordoned log dirs at run time: read this broker's `cordoned.log.dirs`, write what cordons.py decided.

Each sidecar cordons only its own broker's dirs. Every entry it adds is recorded in the cluster first
(records.py), so a restarted sidecar knows its own entries, removes them when the dirs recover, and
`--cleanup` removes them. On a broker that does not know the key (Kafka < 4.3) it says so once and goes
on; a dir the broker refuses to cordon is said once and not tried again until it recovers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..common import records
from ..common.errors import AdminError, PermanentAdminError
from ..decide import cordons
from . import ownership

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CordonView:
    """What status shows: this broker's cordoned dirs as last read, and which of them its sidecar added."""
    broker_id: int
    enabled: bool
    in_force: tuple[str, ...] | None = None  # None: not read yet, or unknown to the broker
    by_sidecar: tuple[str, ...] = ()
    unavailable: bool = False  # the broker does not know cordoned.log.dirs (Kafka < 4.3)


class Cordoner:
    def __init__(self, broker_id: int, admin, store, enabled: bool = True):
        self.broker_id = broker_id
        self.admin = admin
        self.store = store
        self.enabled = enabled
        self.refused: set[str] = set()  # dirs the broker refused to cordon, until they recover
        self.view = CordonView(broker_id, enabled)

    def read(self) -> cordons.InForce | None:
        """This broker's cordoned.log.dirs; None (said once) when the broker does not know the key."""
        layers = self.admin.describe_config_layers(self.broker_id, [cordons.KEY]).get(cordons.KEY)
        if layers is None:
            if not self.view.unavailable:
                log.warning("broker %d does not know %s (KIP-1066, Kafka >= 4.3): its log dirs are not cordoned; "
                            "disk protection goes on", self.broker_id, cordons.KEY)
            self.view = CordonView(self.broker_id, self.enabled, unavailable=True)
            return None
        in_force = cordons.InForce.from_layers(layers)
        self.view = CordonView(self.broker_id, self.enabled, in_force.entries, self.view.by_sidecar)
        return in_force

    def apply(self, violations: Iterable[Mapping], all_records: records.Records) -> None:
        """Cordon this broker's violating dirs and uncordon its recovered ones (only the sidecar's entries)."""
        wanted = cordons.wanted(violations, self.broker_id, self.enabled)
        self.refused &= wanted  # a dir that recovered may be tried again when it violates next
        if not self.enabled and not records.cordoned(all_records, self.broker_id):
            return
        try:
            self._change(wanted - self.refused, all_records,
                         "recovered" if self.enabled else "cordoning is off: storage.cordon.log.dirs=false")
        except AdminError as error:  # the next pass tries again; quotas and throttles are not held up
            log.warning("broker %d %s: not changed this pass: %s", self.broker_id, cordons.KEY, error)

    def cleanup(self, all_records: records.Records) -> None:
        """Remove every entry this broker's sidecar added (--cleanup), and forget its records."""
        if records.cordoned(all_records, self.broker_id):
            self._change(frozenset(), all_records, "clean-up", force=True)

    def _change(self, wanted: frozenset[str], all_records: records.Records, why: str, force: bool = False) -> None:
        def planned(all_records: records.Records):
            in_force = self.read()
            if in_force is None:
                return None
            return in_force, cordons.change(wanted, in_force, records.cordoned(all_records, self.broker_id), force)

        found = ownership.with_second_look(planned, all_records, lambda: records.parse(self.store.read_all()),
                                           yields=lambda found: found is not None and found[1].yielded)
        if found is not None:
            in_force, change = found
            self._write(change, in_force, why)

    def _write(self, change: cordons.CordonChange, in_force: cordons.InForce, why: str) -> None:
        def key(log_dir: str) -> str:
            return records.key(records.CORDON, self.broker_id, log_dir)

        if change.add_op is not None:
            for log_dir in sorted(change.add):  # recorded before the write: a crash still leaves them known
                self.store.put(key(log_dir), {"yielded": False})
            try:
                self.admin.incremental_alter_configs("broker", self.broker_id, {cordons.KEY: change.add_op})
            except PermanentAdminError as error:  # e.g. a path not written as in log.dirs (KAFKA-20901)
                for log_dir in sorted(change.add):
                    self.store.delete(key(log_dir))
                self.refused |= change.add
                log.warning("broker %d %s: the broker refused %s, not tried again until it recovers: %s",
                            self.broker_id, cordons.KEY, ",".join(sorted(change.add)), error)
                return
            log.info("broker %d %s: added %s (below the storage limit: no new replicas there)",
                     self.broker_id, cordons.KEY, ",".join(sorted(change.add)))
        if change.remove_op is not None:
            self.admin.incremental_alter_configs("broker", self.broker_id, {cordons.KEY: change.remove_op})
            log.info("broker %d %s: removed %s (%s)", self.broker_id, cordons.KEY, ",".join(sorted(change.remove)),
                     why)
        for log_dir in sorted(change.yielded):
            self.store.put(key(log_dir), {"yielded": True})
            log.info("broker %d %s: %s, added by the sidecar, was removed by someone else: left out until the "
                     "dir recovers", self.broker_id, cordons.KEY, log_dir)
        for log_dir in sorted(change.forgotten):
            self.store.delete(key(log_dir))
        mine = tuple(sorted(log_dir for log_dir, yielded in change.recorded.items() if not yielded))
        self.view = CordonView(self.broker_id, self.enabled, change.entries_after(in_force), mine)


class NoCordoner:
    """Without this sidecar's broker known: no dir cordoned, none handed back."""

    view = None

    def read(self) -> None:
        return None

    def apply(self, violations: Iterable[Mapping], all_records: records.Records) -> None:
        pass

    def cleanup(self, all_records: records.Records) -> None:
        pass
