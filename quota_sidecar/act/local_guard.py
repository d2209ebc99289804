"""The disk guard on the local verdict's path: a move or a catch-up cannot fill this broker's disk either.

A move on a fast network crosses a margin of hundreds of MiB in a second, faster than a pass (DescribeLogDirs
of every broker, the aggregator's decision) sees it. When the local watch shows a dir of this broker at the limit, or
reaching it within the trigger horizon, the sidecar writes the guard at once (ReplicationRunner.write_the_guard),
and every pass keeps it while that lasts (ReplicationObservation.guarded). A copy between the broker's own log
dirs (AlterReplicaLogDirs, JBOD) into such a dir is held the same way, by the broker's copy rate
(ReplicationRunner.guard_dir_copies): Kafka copies one partition a fetch, up to `replica.fetch.max.bytes`.

A guarded follower still fetches now and then: Kafka's follower quota lets a fetch through whenever the rate
over its window (`replication.quota.window.num` x `replication.quota.window.size.seconds`) is under the quota,
and each brings up to `replica.fetch.max.bytes` per partition, at most `replica.fetch.response.max.bytes` per
source broker. When the free space keeps falling under the guard by more than that (`cancel_below`), the moves
adding replicas to the dir, and the copies into it, are cancelled (`storage.cancel.moves.at.limit`): recorded
first, one WARNING naming each partition and why; the operator runs them again once the dir has room.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Callable, Mapping, Sequence

from ..common import deadline, records
from ..common.errors import AdminError
from ..common.failure_report import FailureReport
from ..common.observation import Reassignment
from ..common.vocabulary import StorageLimit
from ..observe.local_watch import LocalWatch, NoWatch
from ..observe.volumes import LocalSample
from .snapshot import Counters

log = logging.getLogger(__name__)

FETCH_MAX_BYTES, RESPONSE_MAX_BYTES = "replica.fetch.max.bytes", "replica.fetch.response.max.bytes"
KAFKA_DEFAULTS = {FETCH_MAX_BYTES: 1 << 20, RESPONSE_MAX_BYTES: 10 << 20}


def fetch_allowance(sources: Sequence[int], fetch_sizes: Mapping[str, float]) -> int:
    """What one round of a broker's fetches can bring for its guarded replicas, given the source broker of each
    (the broker itself for a copy between its dirs): each partition up to `replica.fetch.max.bytes`, each
    source's response up to `replica.fetch.response.max.bytes`."""
    per_partition = int(fetch_sizes.get(FETCH_MAX_BYTES, KAFKA_DEFAULTS[FETCH_MAX_BYTES]))
    per_response = max(int(fetch_sizes.get(RESPONSE_MAX_BYTES, KAFKA_DEFAULTS[RESPONSE_MAX_BYTES])), per_partition)
    return min(len(sources) * per_partition, len(set(sources)) * per_response)


def cancel_below(available_when_guarded: int, limit: float, allowance: int) -> float:
    """The free space under which the guard does not hold: below both the limit and what the dir had when the
    guard went in, by more than two rounds of fetches (the one in flight then, and the first the quota lets
    through); and, whatever the limit, when no more than one round is left."""
    return max(min(available_when_guarded, limit) - 2 * allowance, allowance)


class LocalGuard:
    """Writes this broker's guard while a dir of it is at risk, and cancels the moves onto a dir it cannot hold."""

    def __init__(self, runner, admin, store, limit: StorageLimit, cancel_moves: bool, counters: Counters,
                 watch: LocalWatch | NoWatch | None = None):
        self.runner, self.admin, self.store, self.limit, self.counters = runner, admin, store, limit, counters
        self.broker_id: int = runner.broker_id
        self.cancel_moves = cancel_moves
        self.watch = watch or NoWatch()  # without it: hold() only, with the dirs at risk given
        self.report = FailureReport("disk guard write", "disk guard writes")
        self.since: dict[str, int] = {}  # dir at risk -> its free space when the guard went in
        self.moves: list[dict] = []  # the moves onto this broker its sidecar cancelled, as recorded
        self._checked: tuple[set[str], float] = (set(), 0.0)  # the dirs at risk at the last check between passes
        self._fetch_sizes: dict[str, float] | None = None

    def at_risk(self) -> dict[str, LocalSample]:
        """This broker's dirs in the watch's guard zone (at or near the limit at their peak fill rate), with their
        last sample. Unlike the producers' local verdict, which stops every producer of the cluster, the guard
        does not wait for a pass to confirm the dir is the broker's (a broker back from a restart catches up
        before that): a dir found foreign is no longer watched."""
        latest = {sample.log_dir: sample for sample in self.watch.latest()}
        return {d: latest[d] for d in self.watch.guard_zone if d in latest}

    def keep(self, all_records: records.Records, now: datetime) -> bool:
        """hold() for the dirs at risk now, its failures reported once (each pass's replication decision guards
        too). Whether anything was done."""
        try:
            held = self.hold(self.at_risk(), all_records, now)
        except AdminError as error:
            self.report.failure(str(error))
            return False
        self.report.success()
        return held

    def keep_between_passes(self, read_records: Callable[[], records.Records], clock: Callable[[], datetime],
                            timeout: float) -> None:
        """keep() as soon as a dir enters the guard zone, and once a second while it is there: a move at full speed
        crosses the limit before the next pass, or while a pass waits for the crossing (loop.Sidecar._held)."""
        at_risk = set(self.at_risk())
        dirs, checked_at = self._checked
        if not at_risk or (at_risk <= dirs and time.monotonic() - checked_at < 1.0):
            return
        self._checked = at_risk, time.monotonic()
        try:
            with deadline.within(timeout, "the disk guard"):
                self.keep(read_records(), clock())
        except AdminError as error:
            self.report.failure(f"reading the sidecars' records: {error}")

    def hold(self, at_risk: Mapping[str, LocalSample], all_records: records.Records, now: datetime) -> bool:
        """at_risk: this broker's dirs at or near the limit, each with its newest sample. Whether anything was
        done (then the records changed)."""
        self.since = {log_dir: self.since.get(log_dir, sample.available_bytes) for log_dir, sample in at_risk.items()}
        self.moves = [move for move in records.cancelled_moves(all_records) if move["broker"] == self.broker_id]
        if not at_risk:
            return False
        incoming, leaders = self.runner.write_the_guard(all_records)
        copies = self.runner.guard_dir_copies(all_records, at_risk)
        if self.cancel_moves and (incoming or copies):
            sources = [*leaders.values(), *[self.broker_id] * len(copies)]
            allowance = fetch_allowance(sources, self._fetch_settings())
            for log_dir, sample in at_risk.items():
                below = cancel_below(self.since[log_dir], self.limit.limit_bytes(sample.total_bytes), allowance)
                if sample.available_bytes < below:
                    self._cancel(log_dir, sample, below, incoming, copies, now)
        return True

    def cleanup(self, all_records: records.Records) -> None:
        """Forget the moves this broker's sidecar cancelled: their WARNINGs said it; the cluster holds nothing of it."""
        self.store.write_many({records.key(records.CANCELLED, self.broker_id, move["topic"], move["partition"]): None
                               for move in records.cancelled_moves(all_records) if move["broker"] == self.broker_id})

    def _fetch_settings(self) -> dict[str, float]:
        """The broker's fetch sizes in force (the first of its layers: dynamic, static, default), read once."""
        if self._fetch_sizes is None:
            found = self.admin.describe_config_layers(self.broker_id, list(KAFKA_DEFAULTS))
            self._fetch_sizes = {key: float(value) for key, layers in found.items()
                                 if (value := next(iter(layers.values()), None)) is not None}
        return self._fetch_sizes

    def _cancel(self, log_dir: str, sample: LocalSample, below: float, incoming: tuple[Reassignment, ...],
                copies: Mapping[tuple[str, int], tuple[str, str]], now: datetime) -> None:
        """Cancel the moves whose adding replica of this broker is in `log_dir` (a replica not created yet is in
        no dir: cordoning keeps it off this one), and the copies into `log_dir` from another dir of the broker (back
        to the dir they are in: Kafka drops the copy)."""
        partitions: dict[str, list[int]] = {}
        for move in incoming:
            partitions.setdefault(move.topic, []).append(move.partition)
        dirs = self.admin.describe_replicas(self.broker_id, partitions) if partitions else {}
        onto = [move for move in incoming if dirs.get((move.topic, move.partition), ("",))[0] == log_dir]
        back = {partition: from_dir for partition, (to_dir, from_dir) in copies.items() if to_dir == log_dir}
        if not onto and not back:
            return
        why = (f"its free space fell to {sample.available_bytes} B under the disk guard "
               f"({self.since[log_dir]} B when the guard went in), below {below:.0f} B")
        recorded = {(move.topic, move.partition): {"replicas": list(move.replicas), "adding": list(move.adding),
                                                   "removing": list(move.removing)} for move in onto}
        recorded.update({partition: {"replicas": [self.broker_id], "adding": [], "removing": [], "from_log_dir": dir_}
                         for partition, dir_ in back.items()})
        recorded = {partition: {"at": now.isoformat(), "log_dir": log_dir, **value, "why": why}
                    for partition, value in recorded.items()}
        self.store.write_many({records.key(records.CANCELLED, self.broker_id, *partition): value
                               for partition, value in recorded.items()})  # recorded first, as every write
        self.moves += [{"broker": self.broker_id, "topic": topic, "partition": partition, **value}
                       for (topic, partition), value in recorded.items()]
        self.admin.alter_reassignments({(move.topic, move.partition): None for move in onto})
        self.admin.alter_replica_log_dirs(self.broker_id, back)
        self.counters.moves_cancelled += len(recorded)
        log.warning("cancelled the moves adding replicas to %s of broker %d: %s: %s; run them again once the dir "
                    "has room", log_dir, self.broker_id, why,
                    ", ".join([f"{move.topic}-{move.partition} (to {_target(move)})" for move in onto]
                              + [f"{topic}-{partition} (from {dir_})" for (topic, partition), dir_ in back.items()]))


def _target(move: Reassignment) -> list[int]:
    return [broker for broker in move.replicas if broker not in move.removing]


class NoGuard:
    """Without replication throttles or the local watch: no move throttled or cancelled for a dir near the limit."""

    moves: list[dict] = []

    def at_risk(self) -> dict[str, LocalSample]:
        return {}

    def keep(self, all_records: records.Records, now: datetime) -> bool:
        return False

    def keep_between_passes(self, read_records: Callable[[], records.Records], clock: Callable[[], datetime],
                            timeout: float) -> None:
        pass

    def cleanup(self, all_records: records.Records) -> None:
        pass
