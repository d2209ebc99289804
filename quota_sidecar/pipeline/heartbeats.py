"""The agents' heartbeats: each agent beats on a topic of the pipeline cluster and reads everyone's.

A beat is ~100 bytes, every `cover.after` / 4 seconds, into one partition that every agent reads (from a minute
back at its start: the agents there are): N agents write 4N/`cover.after` records a second, and each reads them
all. A beat counts from when this agent read it, on its own clock: the clocks of different hosts are never
compared. An agent whose own beats do not come back (the pipeline cluster unreachable) knows nothing of the
others (decide/cover.py).

A beat also says whether the agent's local verdict holds; it beats at once when that changes, so that the other
agents' passes lift nothing a verdict holds (act/local_verdict.py).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Mapping

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors

from ..common.errors import AdminError, PermanentAdminError
from ..common.failure_report import FailureReport
from ..common.periodic import PeriodicWorker
from ..kafka_clients.kafka_client import (CONSUMING, PRODUCING, admin_error, close_clients, for_frequent_polls,
                                          open_client)
from . import messages

log = logging.getLogger(__name__)

HISTORY_SECONDS = 60.0
PROMPT = 0.05  # s: how soon a change of the verdict is beaten, between two beats
# s: how often the beats fetched are read. Not at PROMPT: each poll of kafka-python 3.0's consumer hangs a callback on
# the fetch in flight, all kept while a fetch waits for its answer (kafka_client.FREQUENT_POLLS_REQUEST_TIMEOUT_MS).
READ_EVERY = 0.25
PERMANENT_BACKOFF = 10  # beat intervals between two tries after a failure retrying will not fix


class Heartbeats:
    def __init__(self, client_config: Mapping[str, object], cluster_id: Callable[[], str], agent: int, topic: str,
                 after: float, monotonic: Callable[[], float] = time.monotonic,
                 ensure_topic: Callable[[], None] | None = None, holding: Callable[[], bool] = lambda: False):
        self._client_config = dict(client_config)
        self._cluster_id, self.agent, self.topic, self.monotonic = cluster_id, agent, topic, monotonic
        self.after, self.every = after, after / 4  # an agent unheard for `after` is down (decide/cover.py)
        self._ensure_topic = ensure_topic  # creates the topic unless it exists, before the first beat
        self.reading_since = float("inf")  # when this agent started reading the beats: none heard before
        self._last_seen: dict[int, float] = {}  # agent -> when its newest beat was read
        self._holding: dict[int, bool] = {}  # agent -> whether its newest beat said its local verdict holds
        self.holding = holding  # whether this agent's own verdict holds, said in its beats
        self._lock = threading.Lock()
        self._report = FailureReport("heartbeat", "heartbeats", first_only=True)
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._beats = messages.Reader("a heartbeat", "this agent", messages.from_agent)
        # A beat reads until the next is due, so the next follows at once (interval 0).
        self._worker = PeriodicWorker("heartbeats", self._beat_round, 0.0, on_exit=self._close_clients)

    def __repr__(self) -> str:  # the client configuration holds passwords
        return f"Heartbeats(topic={self.topic!r})"

    def start(self) -> Heartbeats:
        self._worker.start()
        return self

    def stop(self) -> None:
        self._worker.stop()

    def last_seen(self) -> dict[int, float]:
        with self._lock:
            return dict(self._last_seen)

    def holding_agents(self) -> list[int]:
        """The other live agents (a beat read within `after`) whose newest beat said their local verdict holds."""
        now = self.monotonic()
        with self._lock:
            return sorted(agent for agent, holding in self._holding.items()
                          if holding and agent != self.agent and now - self._last_seen[agent] <= self.after)

    def _beat_round(self) -> float | None:
        """Connect unless connected, and beat; after a failure, the seconds until the next try."""
        try:
            if self._consumer is None:
                self._producer, self._consumer = self._connect()
            self._beat(self._producer, self._consumer)
            self._report.success()
        except (AdminError, Errors.KafkaError) as error:  # the pipeline cluster away: this agent covers none
            failure = admin_error(error, f"beating on {self.topic}", CONSUMING + PRODUCING)
            self._report.failure(str(failure))
            self._close_clients()
            # What retrying will not fix (a permission refused) is asked again less often.
            return self.every * (PERMANENT_BACKOFF if isinstance(failure, PermanentAdminError) else 1)
        return None

    def _close_clients(self) -> None:
        close_clients(self._consumer, self._producer, self.topic, self.every)
        self._producer = self._consumer = None

    def _connect(self) -> tuple[KafkaProducer, KafkaConsumer]:
        if self._ensure_topic is not None:
            self._ensure_topic()
        consumer = open_client(KafkaConsumer, for_frequent_polls({
            **self._client_config, "group_id": None, "enable_auto_commit": False, "allow_auto_create_topics": False}),
            10.0)
        try:
            partition = TopicPartition(self.topic, 0)
            consumer.assign([partition])
            # The last minute's beats: which agents there are (decide/cover.py covers only those that beat).
            since = int((time.time() - HISTORY_SECONDS) * 1000)
            found = consumer.offsets_for_times({partition: since}).get(partition)
            if found is None:
                consumer.seek_to_end(partition)
            else:
                consumer.seek(partition, found.offset)
            consumer.position(partition, timeout_ms=10000)
            producer = open_client(KafkaProducer, {**self._client_config, "acks": 1, "linger_ms": 0,
                                                   "allow_auto_create_topics": False}, 10.0)
        except BaseException:
            consumer.close(autocommit=False)
            raise
        self.reading_since = self.monotonic()
        return producer, consumer

    def _beat(self, producer: KafkaProducer, consumer: KafkaConsumer) -> None:
        """Send this agent's beat, then read beats until the next is due, or until this agent's verdict changes."""
        cluster = self._cluster_id()
        holding = self.holding()
        beat = messages.heartbeat(cluster, self.agent, datetime.now(timezone.utc), holding)
        producer.send(self.topic, key=messages.key(cluster, self.agent).encode(), value=messages.encode(beat))
        due, read_next = self.monotonic() + self.every, self.monotonic()
        while (left := due - self.monotonic()) > 0 and self.holding() == holding:
            if self.monotonic() >= read_next:
                self._read(consumer.poll(timeout_ms=0), cluster)  # what the consumer's IO thread fetched meanwhile
                read_next = self.monotonic() + READ_EVERY
            if self._worker.wait(min(left, PROMPT)):
                return

    def _read(self, records: Mapping[TopicPartition, list], cluster: str) -> None:
        read_at = self.monotonic()
        with self._lock:
            for batch in records.values():
                for record in batch:
                    message = self._beats.read(record) or {}
                    if message.get("cluster") == cluster and isinstance(message.get("agent"), int):
                        self._last_seen[message["agent"]] = read_at
                        self._holding[message["agent"]] = message.get("holding") is True
