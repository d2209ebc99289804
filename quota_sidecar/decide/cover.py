"""Which brokers have no live agent, and whether this agent is the one that covers them.

The whole fast path (the local watch, the local verdict) lives in the agent beside a broker: while it is
stopped (a long pause, an OOM kill, a restart), its broker's disk is seen only at the other agents' passes, a
minute apart by default, and a producer fills a disk in seconds. So the live agent of the lowest broker id
watches the volumes of the brokers whose agent is down (observe/cover_watch.py) until it is back.

Liveness is read from the agents' heartbeats (pipeline/heartbeats.py), timed on this agent's own clock.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from ..pipeline.heartbeats import Heartbeats

log = logging.getLogger(__name__)


def live(last_seen: Mapping[int, float], now: float, after: float) -> set[int]:
    """The agents whose heartbeat this agent read within `after` seconds."""
    return {agent for agent, seen in last_seen.items() if now - seen <= after}


def to_cover(own: int, brokers: Iterable[int], last_seen: Mapping[int, float], now: float, after: float,
             reading_since: float) -> list[int]:
    """The brokers this agent covers: none unless it reads its own heartbeat (else it knows nothing of the
    others, and every agent covering every broker would flood the cluster with requests) and is the live agent
    of the lowest broker id; then those of `brokers` whose agent beat and has gone silent, once it has read beats
    for `after` seconds (an agent that just started has not heard the others yet). A broker whose agent never
    beat (none runs beside it) is not covered: covering is for an agent that goes down."""
    alive = live(last_seen, now, after)
    if own not in alive or own != min(alive) or now - reading_since < after:
        return []
    return sorted(set(brokers) & set(last_seen) - alive)


class Cover:
    """to_cover on the heartbeats read so far, saying when a broker starts or stops being covered."""

    def __init__(self, heartbeats: Heartbeats, own: int, after: float, interval: float):
        self.heartbeats, self.own, self.after, self.interval = heartbeats, own, after, interval
        self.covered: list[int] = []

    def targets(self, brokers: Iterable[int], now: float) -> list[int]:
        last_seen = self.heartbeats.last_seen()
        covered = to_cover(self.own, brokers, last_seen, now, self.after, self.heartbeats.reading_since)
        for broker in sorted(set(covered) - set(self.covered)):
            log.warning("covering broker %d: no heartbeat from its agent for %.1fs; its volumes every %gs with "
                        "DescribeLogDirs until it is back", broker, now - last_seen[broker], self.interval)
        for broker in sorted(set(self.covered) - set(covered)):
            log.info("not covering broker %d any more: its agent beats again, or another agent covers it", broker)
        self.covered = covered
        return covered
