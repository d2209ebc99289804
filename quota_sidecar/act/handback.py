"""`quota-sidecar cleanup`: everything the sidecars set in the cluster handed back from one process, for every
broker the records name, as each agent's own clean-up does for its broker (ownership.py): a value put back where
the sidecars' is still in force, forgotten where someone changed it since.

Each part (the client quotas, each broker's replication throttles and cordons, the cancelled moves' and the
overrides' records) is tried whatever became of the others; what fails is said and left for a second run, which
finds only what the first could not do. The sidecars' topics go last, and only when everything else was handed
back: the state topic holds what is left to hand back.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from ..common import records
from ..common.errors import AdminError
from ..configuration.settings import SidecarConfig
from .cordoning import Cordoner
from .quota_writes import QuotaWriter
from .replication import ReplicationRunner
from .snapshot import Counters

log = logging.getLogger(__name__)

# The records that name a broker, the broker second: each its broker's sidecar wrote.
_OF_A_BROKER = (records.CONFIG, records.ENTRIES, records.CORDON, records.CANCELLED)


def brokers_named(all_records: records.Records) -> list[int]:
    """The brokers whose sidecars left a throttle rate, a list entry, a cordon or a cancelled move behind."""
    return sorted({record[1] for record in all_records if record[0] in _OF_A_BROKER})


def topics_of(config: SidecarConfig) -> list[tuple[str, str]]:
    """(cluster, topic) of every topic the sidecars make: the state topic (with state.store=topic) on the watched
    cluster, the pipeline's on the pipeline cluster."""
    pipeline = config.pipeline
    state = [("watched", records.TOPIC)] if config.state_store == "topic" else []
    return state + [("pipeline", topic) for topic in
                    (pipeline.observations_topic, pipeline.decisions_topic, pipeline.heartbeats_topic)]


class Handback:
    """One clean-up of the whole cluster; `failures` names each part that could not be done."""

    def __init__(self, config: SidecarConfig, admin, store, pipeline_admin: Callable[[], object] | None = None,
                 settle: float = 0.0, sleep: Callable[[float], None] = time.sleep):
        self.config, self.admin, self.store = config, admin, store
        self.settle, self.sleep = settle, sleep  # how long a pass under way may still write (poll.timeout)
        self.pipeline_admin = pipeline_admin or (lambda: admin)  # the pipeline's cluster, when another
        self.failures: list[str] = []

    def run(self, delete_topics: bool = False) -> None:
        try:  # a cluster where no sidecar ran has no state topic: none is made to find that out
            all_records = records.parse(self.store.read_all(create=False))
        except AdminError as error:
            self.failures.append(f"reading the sidecars' records: {error}")
            return
        if not set(all_records) - {(records.CLEANUP,)}:
            log.info("no record of the sidecars in the cluster: nothing to hand back")
        else:
            self._part("telling the agents still running", self._tell_running_agents)
            self._part("client quotas", lambda: QuotaWriter(self.config.quotas, self.admin, self.store,
                                                            Counters()).cleanup())
            for broker in brokers_named(all_records):
                runner = ReplicationRunner(self.config.replication, broker, self.admin, self.store, None, None)
                self._part(f"broker {broker}'s replication throttles", lambda: runner.cleanup(all_records))
                cordoner = Cordoner(broker, self.admin, self.store)
                self._part(f"broker {broker}'s cordoned log dirs", lambda: cordoner.cleanup(all_records))
            self._part("the records of cancelled moves and of overrides", lambda: self._forget(all_records))
        if delete_topics:
            if self.failures:
                log.warning("the sidecars' topics are kept: the state topic holds what is left to hand back")
            else:
                self._part("the sidecars' topics", self._delete_topics)

    def _tell_running_agents(self) -> None:
        """An agent still running reads this at its next pass and writes nothing more (loop.py); a pass already
        under way ends within poll.timeout, so the hand-back starts after it."""
        self.store.put(records.key(records.CLEANUP), {"at": time.time()})
        if self.settle:
            log.info("waiting %gs (poll.timeout) for the passes of agents still running to end", self.settle)
            self.sleep(self.settle)

    def _part(self, what: str, hand_back: Callable[[], object]) -> None:
        try:
            hand_back()
        except AdminError as error:
            self.failures.append(f"{what}: {error}")

    def _forget(self, all_records: records.Records) -> None:
        """The records that set nothing in the cluster by themselves: the moves the disk guard cancelled (their
        WARNINGs said so), the operators' replication overrides (their rates were handed back above), the descent's
        rate."""
        forgotten = {record: value for record, value in all_records.items()
                     if record[0] in (records.CANCELLED, records.OVERRIDE, records.DESCENT)}
        for record, value in forgotten.items():
            log.info("record %s forgotten (was %s)", "/".join(map(str, record)), value)
        if forgotten:
            self.store.write_many({records.key(*record): None for record in forgotten})

    def _delete_topics(self) -> None:
        for cluster, topic in topics_of(self.config):
            admin = self.admin if cluster == "watched" else self.pipeline_admin()
            if admin.delete_topic(topic):
                log.info("topic %s deleted", topic)


class DryRun:
    """An admin client or a store whose writes are said, not made; reads pass through (cleanup --dry-run)."""

    WRITES = frozenset({"alter_user_quotas", "incremental_alter_configs", "alter_reassignments",
                        "alter_replica_log_dirs", "create_topic", "put", "delete", "write_many"})

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name: str):
        if name in self.WRITES:
            return lambda *args, **kwargs: None
        return getattr(self._inner, name)

    def delete_topic(self, name: str) -> bool:
        """Whether there is a topic of that name to delete."""
        return bool(self._inner.describe_partitions([name]))
