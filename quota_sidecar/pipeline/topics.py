"""The pipeline's topics: their settings, and their creation by whichever process comes first.

Three topics of the pipeline cluster (the watched cluster itself unless pipeline.bootstrap.servers names another):
the agents' observations (kept by time), the aggregator's decisions (compacted) and the agents' heartbeats. Their
names are settings (pipeline.*.topic), whose defaults configuration/keys.py holds.
"""

from __future__ import annotations

from typing import Mapping, Protocol

PARTITIONS = 6  # the observations' and the decisions' (the heartbeats' topic has one, which every agent reads)
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


class TopicAdmin(Protocol):
    """What creating the topics needs of an admin client (kafka_clients/admin.ClusterAdmin)."""

    def live_broker_ids(self) -> list[int]: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None = None) -> bool: ...


def ensure_topics(admin: TopicAdmin, observations_topic: str, decisions_topic: str) -> None:
    """Create the observations' and decisions' topics unless they exist (whichever agent or aggregator comes
    first); a broker would otherwise auto-create the decisions topic uncompacted."""
    replication_factor = _replication_factor(admin)
    admin.create_topic(observations_topic, PARTITIONS, replication_factor, OBSERVATIONS_TOPIC_CONFIG)
    admin.create_topic(decisions_topic, PARTITIONS, replication_factor, DECISIONS_TOPIC_CONFIG)


def ensure_heartbeats_topic(admin: TopicAdmin, topic: str) -> None:
    """Create the heartbeats' topic unless it exists: one partition, which every agent reads."""
    admin.create_topic(topic, 1, _replication_factor(admin), HEARTBEATS_TOPIC_CONFIG)


def _replication_factor(admin: TopicAdmin) -> int:
    return min(3, len(admin.live_broker_ids()))
