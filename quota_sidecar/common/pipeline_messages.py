"""The two messages between the agents and the aggregator, in JSON on two topics of the pipeline cluster, and
the agents' heartbeats on a third.

An observation is what one agent asks in one pass: the rows of a rule as a batch run would judge them (its
volumes with their measurements in the fill window and the limits; or its broker's replication rows). A
decision is the aggregator's answer: under the same key (``<cluster id>/<agent's broker>``, so that one
agent's messages keep their order in one partition and compaction keeps each agent's latest), naming the
observation it answers. spark_jobs/aggregation.py reads and writes the same fields.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Mapping

VERSION = 1
OBSERVATIONS_TOPIC = "__quota_sidecar_observations"
DECISIONS_TOPIC = "__quota_sidecar_decisions"
HEARTBEATS_TOPIC = "__quota_sidecar_heartbeats"
MiB = 1 << 20
# The pipeline's topics live on every broker's disk, a full one's too, and the sidecars' own clients are exempt
# from the quotas they set: each topic's size has a bound, whatever the pace (an agent near the limit publishes
# several observations a second). Kafka deletes or compacts only rolled segments, hence segment.ms and
# segment.bytes (the broker's defaults, 7 days and 1 GiB, would keep everything). Observations are kept for a
# restarted aggregator and for history: an hour at most, 8 MiB a partition; the decisions topic is compacted (each
# agent's latest decision); a heartbeat matters for seconds.
SMALL_SEGMENTS = {"segment.bytes": str(MiB), "segment.ms": str(10 * 60 * 1000)}
OBSERVATIONS_TOPIC_CONFIG = {"retention.ms": str(3600 * 1000), "retention.bytes": str(8 * MiB), **SMALL_SEGMENTS}
DECISIONS_TOPIC_CONFIG = {"cleanup.policy": "compact", **SMALL_SEGMENTS}
HEARTBEATS_TOPIC_CONFIG = {"retention.ms": str(10 * 60 * 1000), "retention.bytes": str(MiB), **SMALL_SEGMENTS,
                           "segment.ms": str(60 * 1000)}
# Observations and decisions are JSON of many alike rows: gzip (in Python's standard library, which every Kafka
# client reads) makes them a fraction of their size.
COMPRESSION = "gzip"


def key(cluster: str, agent: int | None) -> str:
    return f"{cluster}/{'' if agent is None else agent}"


def observation(cluster: str, agent: int | None, at: datetime, volumes: list[dict] | None = None,
                limits: Mapping | None = None, replication: list[dict] | None = None) -> dict:
    """A new observation (its own id) with the volume rows and their limits, or the replication rows."""
    return {
        "version": VERSION,
        "id": uuid.uuid4().hex,
        "cluster": cluster,
        "agent": agent,
        "observed_at": at.isoformat(),
        "volumes": None if volumes is None else {"rows": volumes, "limits": dict(limits or {})},
        "replication": None if replication is None else {"rows": replication},
    }


def heartbeat(cluster: str, agent: int, at: datetime, holding: bool = False) -> dict:
    """An agent saying it is alive (observe/heartbeats.py), and whether its local verdict holds (the other agents
    then lift nothing: act/local_verdict.py); `at` for people reading the topic: readers time a beat by their own
    clock."""
    return {"version": VERSION, "cluster": cluster, "agent": agent, "at": at.isoformat(), "holding": holding}


def encode(message: Mapping) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def decode(value: bytes | None) -> dict | None:
    """A decision, or None for one this agent cannot read (another version, a tombstone, not JSON)."""
    if value is None:
        return None
    try:
        message = json.loads(value)
    except ValueError:
        return None
    return message if isinstance(message, dict) and message.get("version") == VERSION else None
