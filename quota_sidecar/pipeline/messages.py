"""The messages between the agents and the aggregator, in JSON on the pipeline's topics (topics.py), with the
fields schema.py spells.

An observation is what one agent asks in one pass: the rows of a rule as a batch run would judge them (its
volumes with their measurements in the fill window and the limits; or its broker's replication rows). A
decision is the aggregator's answer: under the same key (``<cluster id>/<agent's broker>``, so that one
agent's messages keep their order in one partition and compaction keeps each agent's latest), naming the
observation it answers. A heartbeat says an agent is alive.

Every message carries the version of its format. A reader reads the versions of READABLE, and one without a
version as version 1 (the format before readers checked it); another version it refuses, with one WARNING for
each sender and version, and skips: an agent and an aggregator of different releases meet during a rolling
upgrade.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Callable, Mapping

from . import schema

log = logging.getLogger(__name__)

VERSION = 1  # what this release writes
READABLE = (1,)  # what it reads
UNSAID = 1  # the version of a message that names none


def key(cluster: str, agent: int | None) -> str:
    return f"{cluster}/{'' if agent is None else agent}"


def observation(cluster: str, agent: int | None, at: datetime, volumes: list[dict] | None = None,
                limits: Mapping | None = None, replication: list[dict] | None = None) -> dict:
    """A new observation (its own id) with the volume rows and their limits, or the replication rows."""
    return schema.OBSERVATION.shape({
        "version": VERSION,
        "id": uuid.uuid4().hex,
        "cluster": cluster,
        "agent": agent,
        "observed_at": at.isoformat(),
        "volumes": None if volumes is None else {"rows": volumes, "limits": dict(limits or {})},
        "replication": None if replication is None else {"rows": replication},
    })


def heartbeat(cluster: str, agent: int, at: datetime, holding: bool = False) -> dict:
    """An agent saying it is alive (heartbeats.py), and whether its local verdict holds (the other agents
    then lift nothing: act/local_verdict.py); `at` for people reading the topic: readers time a beat by their own
    clock."""
    return schema.HEARTBEAT.shape({"version": VERSION, "cluster": cluster, "agent": agent, "at": at.isoformat(),
                                   "holding": holding})


def encode(message: Mapping) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def decode(value: bytes | None) -> dict | None:
    """A message's JSON object, or None for a tombstone or what is not a JSON object (its version unchecked:
    Reader.read checks it)."""
    if value is None:
        return None
    try:
        message = json.loads(value)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def version_of(message: Mapping) -> object:
    return message.get("version", UNSAID)


def readable(version: object) -> bool:
    return type(version) is int and version in READABLE


def from_agent(message: Mapping) -> str:
    """The sender of an observation or a heartbeat, as the message names it."""
    agent = message.get("agent")
    return f"{'an agent without a broker id' if agent is None else f'the agent of broker {agent}'} of cluster " \
           f"{message.get('cluster')}"


def from_aggregator(message: Mapping) -> str:
    """The sender of a decision, as the message names it."""
    return f"aggregator {message.get('aggregator')}"


def position(topic: str, partition: int, offset: int) -> str:
    return f"{topic}-{partition} offset {offset}"


class Reader:
    """Reads the messages of one kind (`what`: "a decision") for one reader (`reader`: "this agent"), and refuses
    those of a version it does not know: one WARNING for each sender and version, which names the version, the
    sender, where the message is and the versions read; the messages after it from that sender at that version
    are skipped quietly, and nothing else is."""

    def __init__(self, what: str, reader: str, sender: Callable[[Mapping], str]):
        self.what, self.reader, self.sender = what, reader, sender
        self._said: set[tuple[str, str]] = set()

    def read(self, record) -> dict | None:
        """A consumer record's message (kafka-python's: its topic, partition, offset and value), or None for a
        tombstone, what is not JSON, or a message of a version this reader refuses."""
        message = decode(record.value)
        if message is None:
            return None
        version = version_of(message)
        if readable(version):
            return message
        self.refuse(version, self.sender(message), position(record.topic, record.partition, record.offset))
        return None

    def refuse(self, version: object, sender: str, where: str) -> None:
        """Say that a message of `version` from `sender` at `where` is skipped, unless said for them already."""
        said = (sender, repr(version))
        if said in self._said:
            log.debug("skipped %s of version %r from %s at %s", self.what, version, sender, where)
            return
        self._said.add(said)
        log.warning("refused %s of version %r from %s at %s: %s reads version %s, and a message without one as "
                    "version %s; skipped (said once for this sender and version)",
                    self.what, version, sender, where, self.reader, ", ".join(map(str, READABLE)), UNSAID)
