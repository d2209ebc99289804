"""The fields of the pipeline's messages, spelled once in plain Python.

The agent builds its messages from these (messages.py), spark_jobs/schemas.py turns them into Spark's
StructTypes, and spark_jobs/aggregation.py names the observation's and the decision's fields from them: a field
added here is read and written by both ends. Types are Spark SQL's names for them, so that the Spark side maps
each to its DataType and nothing here needs Spark (the agent never imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

from ..common import storage_rule

INT, LONG, DOUBLE, STRING, BOOLEAN = "int", "bigint", "double", "string", "boolean"


@dataclass(frozen=True)
class Array:
    element: Type


@dataclass(frozen=True)
class Field:
    name: str
    type: Type
    nullable: bool = True


@dataclass(frozen=True)
class Struct:
    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields)

    def __add__(self, other: Struct) -> Struct:
        return Struct(self.fields + other.fields)

    def without(self, *names: str) -> Struct:
        return Struct(tuple(field for field in self.fields if field.name not in names))

    def shape(self, values: Mapping[str, object]) -> dict:
        """{field: its value} in this struct's order, None for a field `values` leaves out; ValueError for a
        value of no field (a name spelled here differently)."""
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise ValueError(f"no field {', '.join(unknown)} in the message (its fields: {', '.join(self.names)})")
        return {name: values.get(name) for name in self.names}


Type = Union[str, Array, Struct]


def struct(*fields: Field) -> Struct:
    return Struct(fields)


# One log directory of one broker at one moment, as DescribeLogDirs reported it: the current poll's, or an
# earlier measurement within the fill window. at_seconds is that moment relative to the decision (0: now,
# -10: ten seconds before); a volume's newest row is its state now.
VOLUME = struct(
    Field("broker_id", INT, nullable=False),
    Field("log_dir", STRING, nullable=False),
    Field("total_bytes", LONG, nullable=False),
    Field("available_bytes", LONG, nullable=False),
    Field("usable", BOOLEAN, nullable=False),
    Field("at_seconds", DOUBLE, nullable=False),
)

# The limits of the volume rule, as columns of each volume row: the storage rule's (common/storage_rule.py).
LIMITS = struct(*(Field(name, {"BIGINT": LONG, "DOUBLE": DOUBLE}[kind])
                  for name, kind in storage_rule.LIMIT_TYPES.items()))

# One broker in one replication role ('leader' sends, 'follower' receives) with the settings of its rule.
BROKER_ROLE = struct(
    Field("broker_id", INT, nullable=False),
    Field("role", STRING, nullable=False),
    Field("capacity_bytes", LONG, nullable=False),
    Field("used_bytes_per_sec", DOUBLE),  # null: network figures unreadable
    Field("applied_rate", LONG),  # null: no throttle in force
    Field("measured_replication_bytes_per_sec", DOUBLE),
    Field("max_percent", DOUBLE, nullable=False),
    Field("min_rate", LONG, nullable=False),
    Field("change_threshold_percent", DOUBLE, nullable=False),
    Field("consecutive_failures", INT, nullable=False),
    Field("failure_threshold", INT, nullable=False),
)

# One adding replica of an in-flight move (quota_sidecar.common.observation.MovingReplica).
MOVING_REPLICA = struct(
    Field("topic", STRING, nullable=False),
    Field("partition", INT, nullable=False),
    Field("broker", INT, nullable=False),
    Field("leader", INT, nullable=False),
    Field("bytes_behind", LONG),
    Field("lag_seconds", DOUBLE),
    Field("behind_then", LONG),
    Field("replica_growth_bytes", LONG),
    Field("replica_growth_seconds", DOUBLE),
    Field("leader_growth_bytes", LONG),
    Field("leader_growth_seconds", DOUBLE),
)

# What one replication pass asks (decide/throttles.rate_inputs): each broker role with the settings of its rule,
# the moves' settings, and every adding replica of the cluster (the same on every row), from which the rule
# computes the moves' progress and the role's keep-up floor.
REPLICATION_PASS = BROKER_ROLE + struct(
    Field("stuck_after_seconds", DOUBLE, nullable=False),
    Field("keep_up_margin_percent", DOUBLE, nullable=False),
    Field("moving_replicas", Array(MOVING_REPLICA), nullable=False),
)

# Who asked and when: an observation's first fields, which the aggregator carries with each of its rows and its
# decision repeats (the id as `answers`).
ASKER = struct(
    Field("id", STRING),
    Field("cluster", STRING),
    Field("agent", INT),
    Field("observed_at", STRING),
)

# What an observation asks, one kind per observation: the volume rule's rows and limits, or the replication rows.
KINDS = struct(
    Field("volumes", struct(Field("rows", Array(VOLUME)), Field("limits", LIMITS))),
    Field("replication", struct(Field("rows", Array(REPLICATION_PASS)))),
)

# An agent's observation: the format's version, who asks, what it asks.
OBSERVATION = struct(Field("version", INT)) + ASKER + KINDS

# The aggregator's decision, as the agent reads it: the version, the observation it answers and who asked, when
# and by which aggregator it was decided, and each kind's answer (the rule's output, typed by Spark; null for the
# kind not asked).
DECISION = (struct(Field("version", INT), Field("answers", STRING)) + ASKER.without("id")
            + struct(Field("decided_at", STRING), Field("aggregator", STRING)))
DECISION_NAMES = DECISION.names + KINDS.names

# An agent saying it is alive, and whether its local verdict holds (heartbeats.py).
HEARTBEAT = struct(
    Field("version", INT),
    Field("cluster", STRING),
    Field("agent", INT),
    Field("at", STRING),
    Field("holding", BOOLEAN),
)
