"""How far each move is: the readings of the moving replicas' sizes kept between passes (KIP-73's
SumReplicaLag, KAFKA-1546's lag in time); the progress rule's vocabulary is vocabulary.py's.

The history is what the I/O side keeps (the runner in a sidecar, `evaluate` in a replay): every reading of
the leaders' and the adding replicas' sizes over the network window or `replication.stuck.after`, whichever
is longer, and since when each replica has been behind. From it `record` makes the inputs of the rule,
which is Spark's (spark_jobs/move_progress.py): rates, ETA, state, per-destination sums, keep_up floors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Iterable, Mapping

from ..common.observation import MovingReplica, Reassignment, ReplicaSizes
from ..common.vocabulary import STUCK

Replica = tuple[str, int, int]  # (topic, partition, broker)

log = logging.getLogger(__name__)


def leader_of(move: Reassignment, leaders: Mapping[tuple[str, int], int]) -> int | None:
    """The partition's leader as the metadata shows it; a move's first source while none is known."""
    leader = leaders.get((move.topic, move.partition), -1)
    if leader >= 0:
        return leader
    return move.sources[0] if move.sources else None


def replicas_to_read(moves: Iterable[Reassignment], leaders: Mapping[tuple[str, int], int]) -> set[Replica]:
    """The replicas whose sizes tell every move's progress: each partition's leader and its adding replicas."""
    found: set[Replica] = set()
    for move in moves:
        leader = leader_of(move, leaders)
        if leader is not None:
            found.add((move.topic, move.partition, leader))
        found.update((move.topic, move.partition, broker) for broker in move.destinations)
    return found


def within(readings: list[ReplicaSizes], now: float, window: float) -> list[ReplicaSizes]:
    """The readings inside the window before `now` (oldest first), or the latest one when none is: the
    readings `throttles.growth_rate` measures from."""
    return [r for r in readings if now - r.at <= window and r.at < now] or [r for r in readings if r.at < now][-1:]


def growth(earlier: list[ReplicaSizes], now: ReplicaSizes, replica: Replica) -> tuple[int | None, float | None]:
    """(bytes grown, seconds) since the oldest earlier reading that has the replica (or had no move adding it
    yet); (None, None) before one."""
    return now.grown_since(earlier, replica) or (None, None)


@dataclass
class MoveHistory:
    """The readings of past passes and since when each adding replica has been behind."""
    window: timedelta
    stuck_after: timedelta
    readings: list[ReplicaSizes] = field(default_factory=list)         # oldest first, the latest is now
    behind: list[tuple[float, dict[Replica, int]]] = field(default_factory=list)  # bytes behind per reading
    lag_begins: dict[Replica, float] = field(default_factory=dict)

    def record(self, moves: Iterable[Reassignment], leaders: Mapping[tuple[str, int], int],
               now: ReplicaSizes) -> tuple[MovingReplica, ...]:
        """Add this pass's reading; every adding replica of the moves with its inputs for the rule."""
        moves = list(moves)
        window, stuck_after = self.window.total_seconds(), self.stuck_after.total_seconds()
        earlier = within(self.readings, now.at, window)
        then = next((behind for at, behind in reversed(self.behind) if at <= now.at - stuck_after), {})
        found, behind_now, begins = [], {}, {}
        for move in moves:
            leader = leader_of(move, leaders)
            for broker in move.destinations:
                replica = (move.topic, move.partition, broker)
                led = (move.topic, move.partition, leader)
                behind = None
                if replica in now.sizes and led in now.sizes and leader is not None:
                    behind = max(now.sizes[led] - now.sizes[replica], 0)
                    behind_now[replica] = behind
                lag = None
                if behind == 0:
                    lag = 0.0
                elif behind is not None:
                    begins[replica] = self.lag_begins.get(replica, now.at)  # KAFKA-1546: reset when caught up
                    lag = now.at - begins[replica]
                elif replica in self.lag_begins:  # a size unread this time does not end the run
                    begins[replica] = self.lag_begins[replica]
                replica_growth, replica_seconds = growth(earlier, now, replica)
                leader_growth, leader_seconds = growth(earlier, now, led)
                found.append(MovingReplica(move.topic, move.partition, broker, -1 if leader is None else leader,
                                           behind, lag, then.get(replica), replica_growth, replica_seconds,
                                           leader_growth, leader_seconds))
        self.lag_begins = begins
        keep = max(window, stuck_after)
        self.readings = _kept(self.readings, now.at, keep) + [now]
        self.behind = _kept(self.behind, now.at, keep, at=lambda item: item[0]) + [(now.at, behind_now)]
        return tuple(sorted(found, key=lambda m: m.key))


def _kept(items: list, now: float, keep: float, at=lambda item: item.at) -> list:
    """The items inside `keep` seconds before now, and the latest one before that (the reading at or before
    now - stuck.after that `no_progress` compares with)."""
    inside = [item for item in items if now - at(item) <= keep]
    before = [item for item in items if now - at(item) > keep][-1:]
    return before + inside


class MoveLog:
    """The log lines of the moves into one broker: one when a replica becomes stuck, one when its move ends
    (with how long it was seen), one per move when even the cap cannot keep up (KIP-73's upper bound)."""

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.seen: dict[Replica, float] = {}  # first seen, in the runner's clock
        self.stuck: set[Replica] = set()
        self.warned: set[Replica] = set()

    def after(self, moves: Iterable[Mapping], cannot_keep_up: Iterable[str], now: float) -> None:
        ours = {(m["topic"], m["partition"], m["broker"]): m for m in moves if m["broker"] == self.broker_id}
        for replica in sorted(set(self.seen) - set(ours)):
            log.info("move of %s-%d to broker %d ended after %.0f s", *replica, now - self.seen.pop(replica))
        for replica, move in sorted(ours.items()):
            self.seen.setdefault(replica, now)
            if move["state"] == STUCK and replica not in self.stuck:
                log.warning("move of %s-%d to broker %d is stuck (%s): %s bytes behind for %s s, catch-up %s B/s, "
                            "incoming %s B/s", *replica, move["stuck_reason"], move["bytes_behind"],
                            _whole(move["lag_seconds"]), _whole(move["catch_up_bytes_per_sec"]),
                            _whole(move["incoming_bytes_per_sec"]))
        self.stuck = {replica for replica, move in ours.items() if move["state"] == STUCK}
        if "follower" in cannot_keep_up:
            for replica in sorted(set(ours) - self.warned):
                log.warning("move of %s-%d to broker %d: even the highest follower rate the rule allows is below "
                            "what its partitions take in with the keep_up margin (KIP-73's upper bound): it may "
                            "never end; raise the capacity, lower the produce rate or move fewer partitions at once",
                            *replica)
            self.warned |= set(ours)
        self.warned &= set(ours)


def _whole(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"
