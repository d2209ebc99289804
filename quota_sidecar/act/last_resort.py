"""The last resort: the hard limit's producer quota of 1 B/s, said plainly while it is in force.

Kafka throttles a producer over its quota for (observed - quota) / quota x window, bounded by nothing, and a Java
producer keeps that wait through reconnects and after the quota is lifted: after 1 B/s it stays silent for hours to
weeks, until restarted (librdkafka ~60 s after the lift, kafka-python 3.x up to ~9 min;
docs/research/throttle-recovery.md). Which producer quotas the sidecars wrote are the last resort is decided here,
once, for the log, the metric and status.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping

from ..common.observation import Entity
from ..common.records import Owned
from ..decide.descent import LAST_RESORT
from ..decide.quotas import PRODUCE, entity_label
from .ownership import Write, same

log = logging.getLogger(__name__)

AFTER_THE_LIFT = ("Java producers of these principals stay silent until restarted even after the throttle lifts "
                  "(librdkafka ~60 s, kafka-python 3.x up to ~9 min)")


@dataclass(frozen=True)
class LastResort:
    """The entities whose producer quota in force is the 1 B/s the sidecars wrote, and since when."""
    entities: tuple[Entity, ...]  # in the order of their labels
    since: datetime

    def who(self) -> str:
        return who(self.entities)


def written(in_force: Mapping[Entity, Mapping[str, float]], owned: Mapping[tuple[Entity, str], Owned],
            writes: Iterable[Write] = (), looked: float | None = None,
            known: Iterable[Entity] = ()) -> dict[Entity, float | None]:
    """Each entity whose producer quota in force (`writes` carried out) is the last resort and the sidecars' own,
    with when its writer looked at the cluster (epoch seconds; None: unknown): written by `writes` (from a look at
    `looked`), recorded as written by a sidecar (`owned`), or `known` as such before and still at 1 B/s. The last
    keeps it while the records are older than its write (the local verdict's write ahead plans on the last pass's
    records), unless they say that someone else changed it since."""
    now_written = {write.target[0] for write in writes
                   if write.target[1] == PRODUCE and write.changes and same(write.new, LAST_RESORT)}
    known = set(known)
    found = {}
    for entity, keys in in_force.items():
        if not same(keys.get(PRODUCE), LAST_RESORT):
            continue
        mine = owned.get((entity, PRODUCE))
        if entity in now_written:
            found[entity] = looked
        elif mine is not None and not mine.yielded and mine.written_known and same(mine.written, LAST_RESORT):
            found[entity] = mine.seen_at
        elif entity in known and not (mine is not None and mine.yielded):
            found[entity] = None
    return found


def current(previous: LastResort | None, found: Mapping[Entity, float | None], now: datetime) -> LastResort | None:
    """The last resort in force, from what `written` found: since the earliest write known when it began (else
    `now`), kept while it lasts."""
    if not found:
        return None
    entities = tuple(sorted(found, key=entity_label))
    if previous is not None:
        return LastResort(entities, previous.since)
    known = [seen_at for seen_at in found.values() if seen_at is not None]
    return LastResort(entities, datetime.fromtimestamp(min(known), timezone.utc) if known else now)


def follow(previous: LastResort | None, found: Mapping[Entity, float | None], now: datetime) -> LastResort | None:
    """current(...), saying in one line each change: a WARNING when the last resort goes in force, naming whose
    producers will need a restart; an INFO line when the entities change, and when it is no longer in force."""
    result = current(previous, found, now)
    if previous is None and result is not None:
        log.warning("the hard limit: producer quota 1 B/s on %s; %s: restart them once room is back",
                    result.who(), AFTER_THE_LIFT)
    elif previous is not None and result is None:
        log.info("the hard limit's producer quota of 1 B/s is no longer in force (on %s since %s): restart the Java "
                 "producers of these principals that have not sent since", previous.who(), _shown(previous.since))
    elif previous is not None and result.entities != previous.entities:
        log.info("the hard limit's producer quota of 1 B/s now on %s (was on %s): restart their Java producers once "
                 "room is back", result.who(), previous.who())
    return result


def who(entities: Iterable[Entity]) -> str:
    """"<default user> (every principal without a quota of its own), User:alice"."""
    return ", ".join(entity_label(entity) + (" (every principal without a quota of its own)" if entity is None else "")
                     for entity in entities)


def _shown(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
