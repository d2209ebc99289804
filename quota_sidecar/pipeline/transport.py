"""The pipeline's Kafka clients: the agent's end, which publishes an observation and reads the aggregator's
decision on it, and where a first aggregation starts reading.

Two topics of the pipeline cluster (topics.py): observations (kept by time) and decisions (compacted), created
by whichever process comes first. An agent writes under its key (messages.key) and reads the one partition of the
decisions topic that key goes to (Kafka's default partitioner, as the aggregator's sink uses it), from the end: a
decision answers the observation it names, and the agent waits for that one within the pass's deadline. No answer
in time is a failed decision, and the factor's timeline goes on (decide/decider.py).
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Callable, Mapping

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner.default import murmur2

from ..common import deadline
from ..common.errors import AdminError, DecisionFailed, RetryableAdminError
from ..configuration.keys import DECISIONS_TOPIC, OBSERVATIONS_TOPIC
from ..kafka_clients.admin import ClusterAdmin
from ..kafka_clients.kafka_client import (CONSUMING, PRODUCING, admin_error, close_clients, for_frequent_polls,
                                          open_client, with_cause)
from . import messages, topics

WHILE_WAITING_EVERY = 0.05  # s: how often a wait for a decision gives the agent's local verdict a turn
# Of a pass's whole deadline (poll.timeout), kept for its writes should no decision come: a share of the time left
# at the question can be next to nothing under load, too little for the fallback's write to the state topic.
WRITES_KEEP = 0.3


class Pipeline:
    def __init__(self, client_config: Mapping[str, object], cluster_id: Callable[[], str], agent: int | None,
                 timeout: float, observations_topic: str = OBSERVATIONS_TOPIC,
                 decisions_topic: str = DECISIONS_TOPIC, create_topics: bool = True,
                 while_waiting: Callable[[], None] | None = None):
        self._client_config = dict(client_config)
        self.create_topics = create_topics  # False for a look (status --direct) that must create nothing
        self.timeout = timeout  # at most this per question, within the pass's own deadline
        self._cluster_id = cluster_id
        self.agent = agent
        self.observations_topic, self.decisions_topic = observations_topic, decisions_topic
        self._admin = ClusterAdmin(self._client_config)
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._lock = threading.Lock()  # one question at a time: a consumer is not thread-safe
        self.last_decision: dict | None = None  # for status: its age, its aggregator
        self._ahead: tuple[dict, str] | None = None  # the rows of the question asked ahead, and its id
        # Called between polls while waiting for a decision (the agent's local verdict must not wait for it).
        self.while_waiting = while_waiting
        self._early: dict | None = None  # its decision, when read while waiting for another
        self._sent = None  # the last observation's send (kafka-python's future)
        self._decisions = messages.Reader("a decision", "this agent", messages.from_aggregator)

    def __repr__(self) -> str:  # the client configuration holds passwords
        return f"Pipeline(observations={self.observations_topic!r}, decisions={self.decisions_topic!r})"

    def ask(self, at: datetime, **rows) -> dict:
        """Publish an observation of `rows` (messages.observation) and return the decision on it.
        DecisionFailed when none comes before the pass's deadline, or the pipeline cannot be reached."""
        asking = f"asking the aggregator through {self.observations_topic}"
        with self._lock, deadline.within(self._budget(), asking):
            try:
                if self._ahead is not None and self._ahead[0] == rows:  # asked already: its answer is on its way
                    (_, asked), early = self._ahead, self._early
                    self._ahead = self._early = None
                else:
                    asked, early = self._publish(at, rows, asking), None
                self._producer.flush(timeout=deadline.left(doing=asking))
                if self._sent is not None and self._sent.failed():  # refused (WRITE), not waited for in vain
                    raise self._sent.exception
                decision = early or self._answer(asked)
            except (Errors.KafkaError, AdminError) as error:
                failure = error if isinstance(error, AdminError) else admin_error(error, asking, CONSUMING + PRODUCING)
                raise DecisionFailed(str(with_cause(failure, self._client_config))) from None
        self.last_decision = decision
        return decision

    def _budget(self) -> float:
        """How long a question may wait: `timeout`, and no more than what leaves the pass WRITES_KEEP of `timeout`
        for what it writes without a decision (the rate rule's own rates, a fallback factor); nothing when the pass
        has no more than that left."""
        left = deadline.time_left()
        return self.timeout if left is None else max(0.0, min(self.timeout, left - WRITES_KEEP * self.timeout))

    def _publish(self, at: datetime, rows: dict, doing: str) -> str:
        """Send an observation of `rows` (not flushed yet); its id."""
        self._connect(doing)
        observation = messages.observation(self._cluster_id(), self.agent, at, **rows)
        key = messages.key(self._cluster_id(), self.agent)
        self._sent = self._producer.send(self.observations_topic, key=key.encode(), value=messages.encode(observation))
        return observation["id"]

    def judge_volumes(self, rows: list[dict], limits: dict) -> tuple[float, list[dict]]:
        """decider.VolumeJudge, by the aggregator: the factor and every usable volume judged."""
        decided = self.ask(_now(), volumes=rows, limits=limits)["volumes"]
        return decided["factor"], decided["rows"]

    def judge_rates(self, rows: list[dict], params: dict | None = None) -> dict[str, list[dict]]:
        """throttles.RateJudge, by the aggregator: the rates, the moves and the destinations."""
        return self.ask(_now(), replication=[{**(params or {}), **row} for row in rows])["replication"]

    def ask_rates_ahead(self, rows: list[dict]) -> None:
        """judge_rates(rows)'s question, published now and sent with the next question: judge_rates of the same
        rows then waits for its answer instead of asking again (decider.Decider.ask_rates_ahead: both questions
        of a pass in one round trip). A failure here is left to judge_rates to meet and report."""
        asking = f"asking the aggregator ahead through {self.observations_topic}"
        question = {"replication": rows}
        with self._lock, deadline.within(self.timeout, asking):
            self._ahead = self._early = None
            try:
                self._ahead = question, self._publish(_now(), question, asking)
            except (Errors.KafkaError, AdminError):  # judge_rates publishes it again and reports what fails
                pass

    def connect(self) -> None:
        """Create the topics if absent and connect, before the first pass needs it."""
        with self._lock, deadline.within(self.timeout, "connecting to the pipeline"):
            self._connect("connecting to the pipeline")

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            close_clients(self._consumer, self._producer, self.observations_topic, timeout)
            self._producer = self._consumer = None
        self._admin.close()

    def _answer(self, observation_id: str) -> dict:
        """The decision answering `observation_id`; one answering the question asked ahead is kept (both may
        come in one poll, which moves the position past every record it returns)."""
        waiting = "waiting for the aggregator's decision"
        found = None
        every = 1.0 if self.while_waiting is None else WHILE_WAITING_EVERY
        while found is None:
            left = deadline.left(doing=waiting)  # raises once the deadline has passed
            for batch in self._consumer.poll(timeout_ms=max(1, int(min(left, every) * 1000))).values():
                for record in batch:
                    decision = self._decisions.read(record) or {}
                    if decision.get("answers") == observation_id:
                        found = decision
                    elif self._ahead is not None and decision.get("answers") == self._ahead[1]:
                        self._early = decision
            if found is None and self.while_waiting is not None:
                self.while_waiting()
        return found

    def _connect(self, doing: str) -> None:
        if self._consumer is not None:
            return
        if self.create_topics:
            topics.ensure_topics(self._admin, self.observations_topic, self.decisions_topic)
        consumer = open_client(KafkaConsumer, for_frequent_polls({
            **self._client_config, "group_id": None, "enable_auto_commit": False,
            "allow_auto_create_topics": False}), deadline.left(doing=doing))
        try:
            partitions = consumer.partitions_for_topic(self.decisions_topic)
            if not partitions:
                raise RetryableAdminError(f"{doing}: {self.decisions_topic} has no partitions yet")
            key = messages.key(self._cluster_id(), self.agent).encode()
            mine = TopicPartition(self.decisions_topic, (murmur2(key) & 0x7FFFFFFF) % len(partitions))
            consumer.assign([mine])
            consumer.seek_to_end(mine)
            # Resolved now: a decision written from here on is read.
            consumer.position(mine, timeout_ms=max(1, int(deadline.left(doing=doing) * 1000)))
            self._producer = open_client(KafkaProducer, {
                **self._client_config, "acks": 1, "linger_ms": 0, "allow_auto_create_topics": False,
                "compression_type": topics.COMPRESSION},
                deadline.left(doing=doing))
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer

    def ensure_heartbeats_topic(self, topic: str) -> None:
        """Create the heartbeats' topic unless it exists (cover.after), by the heartbeats' own thread: without CREATE
        on it the agent covers none and is covered, and still gets its decisions. One partition, which every agent
        reads."""
        topics.ensure_heartbeats_topic(self._admin, topic)


def end_offsets(client_config: Mapping[str, object], topic: str, timeout: float = 30.0) -> dict[int, int]:
    """{partition: its end offset now}: where a first aggregation starts, so that an observation published
    once it has started is decided (Spark resolves "latest" only when its first micro-batch runs)."""
    consumer = open_client(KafkaConsumer, {**client_config, "group_id": None, "enable_auto_commit": False}, timeout)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(partitions) if partitions else {}
    except Errors.KafkaError as error:
        raise admin_error(error, f"reading the end offsets of {topic}", CONSUMING[:2]) from error
    finally:
        consumer.close(autocommit=False)
    return {partition.partition: offset for partition, offset in ends.items()}


def _now() -> datetime:
    return datetime.now(timezone.utc)


class NoPipeline:
    """No aggregator asked (a decider given judges of its own): no decision read, nothing to connect."""

    last_decision = None

    def connect(self) -> None:
        pass

    def close(self, timeout: float = 5.0) -> None:
        pass
