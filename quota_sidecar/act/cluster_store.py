"""A small key -> JSON store in a compacted topic of the cluster itself.

Every sidecar of the cluster reads and writes the same records, and they survive restarts. It holds what
the sidecars wrote to the cluster and the value they replaced (so clean-up restores the cluster) and the
operators' throttle overrides. One partition keeps all writes in one order; a tombstone deletes a key.
Every read and write ends within the pass's deadline (deadline.py), and within the request timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from contextlib import contextmanager
from typing import Mapping

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..common import deadline, text
from ..common.errors import AdminError, PermanentAdminError, RetryableAdminError
from ..common.records import TOPIC
from ..observe.admin import ClusterAdmin
from ..observe.kafka_client import CONSUMING, PRODUCING, admin_error, close_clients, open_client, with_cause

DEFAULT_TOPIC = TOPIC
DEFAULT_TIMEOUT_MS = 30_000
METADATA_MAX_AGE_MS = 2_000  # the reader's: how long a moved leader can keep it waiting
# Two sidecars writing one target within this long of each other may interleave (a record, then the value): a
# pass's writes end within its deadline, poll.timeout (PT10S by default).
RACE_SECONDS = 10.0
# A read that meets one of these starts over: the position it had is not in the log the leader has now.
_READ_CUT_SHORT = (Errors.OffsetOutOfRangeError, Errors.LogTruncationError, Errors.NoOffsetForPartitionError)

log = logging.getLogger(__name__)


class ClusterStore:
    """Creates its topic on first use: compacted, one partition, replication factor min(3, live brokers)."""

    def __init__(self, client_config: Mapping[str, object], topic: str = DEFAULT_TOPIC):
        self._client_config = dict(client_config)
        self.topic = topic
        self._partition = TopicPartition(topic, 0)
        self._timeout_ms = int(self._client_config.get("request_timeout_ms", DEFAULT_TIMEOUT_MS))
        self._admin = ClusterAdmin(self._client_config)
        self._topic_ready = False
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._lock = threading.Lock()  # the loop and the HTTP thread share one store; a consumer is not thread-safe
        self._lately: dict[str, list[dict]] = {}  # key -> its values in the last read's newest RACE_SECONDS of log

    def __repr__(self) -> str:  # the client configuration holds passwords
        return f"ClusterStore(topic={self.topic!r})"

    def __enter__(self) -> ClusterStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def read_all(self, create: bool = True) -> dict[str, dict]:
        """Every live record: the topic read from its beginning up to the end offset seen at the start.

        With create=False a cluster without the topic (no sidecar ran there yet) has no records, and keeps
        no topic either: a reader such as `status --direct` writes nothing. A topic found there is read
        without a CreateTopics, which Kafka's authorizer refuses without CREATE even when the topic exists.
        """
        if not create and not self._topic_ready:
            if not self._admin.describe_partitions([self.topic]):
                return {}
            self._topic_ready = True
        reading = f"reading {self.topic}"
        with self._lock, deadline.within(self._timeout_ms / 1000, reading), self._naming_the_cause():
            consumer = self._ready_consumer()
            try:
                end = consumer.end_offsets([self._partition], timeout_ms=_ms(reading))[self._partition]
                while True:
                    try:
                        records, self._lately = self._read_from_the_beginning(consumer, end, reading)
                        return records
                    except _READ_CUT_SHORT as error:  # a leader with a shorter log: what was read may be gone
                        if deadline.expired():
                            raise
                        log.info("%s again from the beginning: %s", reading, type(error).__name__)
            except Errors.KafkaError as error:
                raise admin_error(error, reading, CONSUMING) from error

    def _read_from_the_beginning(self, consumer: KafkaConsumer, end: int, reading: str):
        """(every live record, each key's values of the last RACE_SECONDS) from the topic's start up to `end`."""
        consumer.seek_to_beginning(self._partition)
        records: dict[str, dict] = {}
        lately: dict[str, list[dict]] = {}
        since_ms = (time.time() - RACE_SECONDS) * 1000
        while consumer.position(self._partition, timeout_ms=_ms(reading)) < end:
            if deadline.expired():
                raise RetryableAdminError(f"{reading} timed out before offset {end}")
            for batch in consumer.poll(timeout_ms=_ms(reading, at_most=0.5)).values():
                for record in batch:
                    key = record.key.decode()
                    _apply(records, key, record.value)
                    if record.value is not None and record.timestamp >= since_ms:
                        lately.setdefault(key, []).append(json.loads(record.value))
        return records, lately

    def written_lately(self, key: str) -> list[dict]:
        """The values `key` was given within RACE_SECONDS before the last read_all, oldest first, as the log keeps
        every write in order: a value written by one sidecar and overwritten by another a moment later is still
        known to be the sidecars'."""
        return self._lately.get(key, [])

    def put(self, key: str, value: dict) -> None:
        """Write `value` under `key`; returns once every in-sync replica has it (acks=all)."""
        self.write_many({key: value})

    def delete(self, key: str) -> None:
        """Write a tombstone: the key disappears from read_all and, after compaction, from the topic."""
        self.write_many({key: None})

    def write_many(self, changes: Mapping[str, dict | None]) -> None:
        """put (a value) or delete (None) each key; one wait for all of them, not one per key."""
        self._write(*[(key, None if value is None else json.dumps(value, sort_keys=True).encode())
                      for key, value in changes.items()])

    def connect(self) -> None:
        """Connect the writer before the first write, which may be the local verdict's: its connection and
        the topic's metadata would otherwise cost that write a few round trips."""
        connecting = f"connecting a producer for {self.topic}"
        with self._lock, deadline.within(self._timeout_ms / 1000, connecting), self._naming_the_cause():
            try:
                self._ready_producer().partitions_for(self.topic)
            except Errors.KafkaError as error:
                raise admin_error(error, connecting, PRODUCING[:1]) from error

    def close(self, timeout: float = 10.0) -> None:
        """Bounded: a write stuck behind a throttle must not keep a stopping sidecar alive."""
        with self._lock:
            close_clients(self._consumer, self._producer, self.topic, timeout)
            self._producer = self._consumer = None
        self._admin.close()

    def _write(self, *records: tuple[str, bytes | None]) -> None:
        if not records:
            return
        writing = text.writing([key for key, _ in records], self.topic)
        with self._lock:
            producer = self._ready_producer()
        with deadline.within(self._timeout_ms / 1000, writing), self._naming_the_cause():
            try:
                producer.config["max_block_ms"] = _ms(writing)  # read by each send: waiting for metadata
                producer.partitions_for(self.topic)  # the metadata first: its refusal is not Produce's
            except Errors.KafkaError as error:
                raise admin_error(error, writing, PRODUCING[:1]) from error
            try:
                sent = [producer.send(self.topic, key=key.encode(), value=value, partition=0)
                        for key, value in records]
                for each in sent:
                    each.get(timeout=deadline.left(doing=writing))
            except Errors.KafkaError as error:
                failure = admin_error(error, writing, PRODUCING[1:])
                if isinstance(failure, PermanentAdminError):  # kafka-python's idempotent producer stays failed
                    with self._lock:                          # (a refused WRITE): a new one once it is granted
                        close_clients(None, self._producer, self.topic, 1.0)
                        self._producer = None
                raise failure from error

    @contextmanager
    def _naming_the_cause(self):
        """A read or write that failed because no broker can be reached says so (kafka_client.with_cause)."""
        try:
            yield
        except AdminError as error:
            raise with_cause(error, self._client_config) from error

    def _ready_producer(self) -> KafkaProducer:
        self._ensure_topic()
        if self._producer is None:
            self._producer = open_client(KafkaProducer, {
                **self._client_config, "acks": "all", "max_block_ms": self._timeout_ms,
                "allow_auto_create_topics": False}, deadline.left(doing=f"connecting a producer for {self.topic}"))
        return self._producer

    def _ready_consumer(self) -> KafkaConsumer:
        self._ensure_topic()
        if self._consumer is None:
            # No group: nothing is committed, every read starts from the beginning. No reset policy: kafka-python's
            # default jumps to the end when a fetch is out of range or the log was truncated (KIP-320), which ends
            # the read early, with a record read and the tombstone after it not (a removed override came back).
            # Metadata every 2 s, not 5 min: kafka-python asks ListOffsets of the leader it knew again and again
            # without a refresh, so after the topic's leader moved every read waited out its deadline, and the local
            # verdict could not write while a flood filled the disk.
            self._consumer = open_client(KafkaConsumer, {
                **self._client_config, "group_id": None, "enable_auto_commit": False, "auto_offset_reset": "none",
                "metadata_max_age_ms": METADATA_MAX_AGE_MS, "allow_auto_create_topics": False},
                deadline.left(doing=f"connecting a consumer for {self.topic}"))
            self._consumer.assign([self._partition])
        return self._consumer

    def _ensure_topic(self) -> None:
        """Create the topic unless it exists; brokers would otherwise auto-create it uncompacted."""
        if not self._topic_ready:
            replication_factor = min(3, len(self._admin.live_broker_ids()))
            self._admin.create_topic(self.topic, partitions=1, replication_factor=replication_factor,
                                     configs={"cleanup.policy": "compact"})
            self._topic_ready = True


def _ms(doing: str, at_most: float | None = None) -> int:
    """The time left in the pass as kafka-python's timeout_ms (at least 1: 0 would mean 'do not wait')."""
    return max(1, int(deadline.left(at_most, doing) * 1000))


def _apply(records: dict[str, dict], key: str, value: bytes | None) -> None:
    if value is None:
        records.pop(key, None)
    else:
        records[key] = json.loads(value)
