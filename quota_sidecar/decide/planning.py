"""`quota-sidecar plan`: what a `kafka-reassign-partitions` plan will cost before it runs (KIP-73 Q&A 1).

Read-only. The plan file is checked first (one line names what is wrong); then the cluster is read: every
partition (for MoveRatio), and the sizes of the moving partitions' leader replicas twice, `measure` apart,
for their incoming rates. The arithmetic per broker is the Spark job spark_jobs/move_plan.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from ..common.observation import FOLLOWER, LEADER, Partition
from ..common.text import duration, size, table
from ..configuration import json_file
from ..configuration.settings import ReplicationConfig
from .throttles import FOLLOWER_RATE, LEADER_RATE


class PlanError(ValueError):
    """The plan file is not what kafka-reassign-partitions reads; the message names the entry and field."""


@dataclass(frozen=True)
class PlannedMove:
    topic: str
    partition: int
    replicas: tuple[int, ...]


def read_plan(path: str) -> list[PlannedMove]:
    raw = json_file.load(path, "reassignment file", PlanError)
    if not isinstance(raw, dict) or not isinstance(raw.get("partitions"), list):
        raise PlanError(f'reassignment file {path}: expected {{"version": 1, "partitions": [...]}}')
    if raw.get("version", 1) != 1:
        raise PlanError(f"reassignment file {path}: version={raw.get('version')!r}, only version 1 is known")
    moves, seen = [], set()
    for index, item in enumerate(raw["partitions"]):
        where = f"reassignment file {path}, partitions[{index}]"
        if not isinstance(item, dict):
            raise PlanError(f"{where}: expected an object with topic, partition and replicas")
        topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise PlanError(f"{where}: topic={topic!r}: expected a topic name")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise PlanError(f"{where}: partition={partition!r}: expected a partition number >= 0")
        if (not isinstance(replicas, list) or not replicas
                or any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in replicas)
                or len(set(replicas)) != len(replicas)):
            raise PlanError(f"{where}: replicas={replicas!r}: expected a non-empty list of distinct broker ids")
        if (topic, partition) in seen:
            raise PlanError(f"{where}: {topic}-{partition} is listed twice")
        seen.add((topic, partition))
        moves.append(PlannedMove(topic, partition, tuple(replicas)))
    return moves


@dataclass(frozen=True)
class ClusterReading:
    """What the plan needs from the cluster."""
    partitions: dict[tuple[str, int], Partition]        # every partition of the cluster
    sizes: dict[tuple[str, int], int]                   # the moving partitions' leader replica bytes, now
    growth: dict[tuple[str, int], float]                # ... and their growth in bytes/s over `measure`
    rates_in_force: dict[int, dict[str, int | None]]    # broker -> role -> throttled rate


def read_cluster(admin, plan: list[PlannedMove], measure: timedelta,
                 sleep: Callable[[float], None] = time.sleep) -> ClusterReading:
    partitions = admin.describe_partitions(None)
    missing = [f"{m.topic}-{m.partition}" for m in plan if (m.topic, m.partition) not in partitions]
    if missing:
        raise PlanError(f"the reassignment names partitions the cluster does not have: {', '.join(missing)}")
    by_leader: dict[int, dict[str, list[int]]] = {}
    for move in plan:
        leader = partitions[(move.topic, move.partition)].leader
        by_leader.setdefault(leader, {}).setdefault(move.topic, []).append(move.partition)

    def sizes() -> tuple[float, dict]:
        found = {}
        for leader, topics in by_leader.items():
            found.update(admin.describe_replica_sizes(leader, topics))
        return time.monotonic(), found

    first_at, first = sizes()
    sleep(measure.total_seconds())
    now_at, now = sizes()
    growth = {key: max(now[key] - first[key], 0) / (now_at - first_at) for key in now if key in first}
    brokers = sorted({b for m in plan for b in (*m.replicas, *partitions[(m.topic, m.partition)].replicas)})
    in_force = {}
    for broker in brokers:
        found = admin.describe_configs("broker", [broker], [LEADER_RATE, FOLLOWER_RATE]).get(str(broker), {})
        in_force[broker] = {LEADER: _int(found.get(LEADER_RATE)), FOLLOWER: _int(found.get(FOLLOWER_RATE))}
    return ClusterReading(partitions, now, growth, in_force)


def plan_rows(plan: list[PlannedMove], cluster: ClusterReading, config: ReplicationConfig,
              throttle: int | None, within: timedelta | None) -> list[dict]:
    """One row per moving partition and broker role for spark_jobs.move_plan (schemas.PLAN_SCHEMA)."""
    rows = []
    for move in plan:
        current = cluster.partitions[(move.topic, move.partition)]
        destinations = [b for b in move.replicas if b not in current.replicas]
        if not destinations:
            continue  # a reorder or a shrink moves no bytes
        size = cluster.sizes.get((move.topic, move.partition), 0)
        common = {"topic": move.topic, "partition": move.partition, "replication_factor": len(move.replicas),
                  "incoming_bytes_per_sec": cluster.growth.get((move.topic, move.partition)),
                  "within_seconds": None if within is None else within.total_seconds()}
        for broker in destinations:
            rows.append({**common, "broker_id": broker, "role": FOLLOWER, "bytes": size,
                         "capacity_bytes": config.capacity(broker),
                         "throttle": throttle if throttle or within else cluster.rates_in_force[broker][FOLLOWER]})
        rows.append({**common, "broker_id": current.leader, "role": LEADER, "bytes": size * len(destinations),
                     "capacity_bytes": config.capacity(current.leader),
                     "throttle": throttle if throttle or within else cluster.rates_in_force[current.leader][LEADER]})
    return rows


def summary(plan: list[PlannedMove], cluster: ClusterReading, brokers: list[dict], throttle: int | None,
            within: timedelta | None) -> dict:
    """The plan's figures; for `within`, the smallest throttle that ends in time, or why there is none."""
    moved = sum(1 for m in plan if set(m.replicas) - set(cluster.partitions[(m.topic, m.partition)].replicas))
    result = {"move_ratio": moved / len(cluster.partitions) if cluster.partitions else 0.0,
              "moved_partitions": moved, "total_partitions": len(cluster.partitions),
              "throttle": throttle, "brokers": brokers,
              "move_seconds": _slowest([b["move_seconds"] for b in brokers])}
    if within is not None:
        needed = max((b["needed_throttle"] for b in brokers), default=0.0)
        result["within_seconds"] = within.total_seconds()
        result["throttle"] = int(needed) + 1
        broken = [b for b in brokers if b["upper_bound"] is not None and needed >= b["upper_bound"]]
        result["refused"] = (None if not broken else
                             "the smallest throttle that ends in time, " f"{needed:,.0f} B/s, is not below N - IN/R "
                             "(KIP-73's upper bound) on broker(s) " + ", ".join(
                                 f"{b['broker_id']} ({b['upper_bound']:,.0f} B/s)" for b in broken)
                             + ": clients would lose bandwidth; move fewer partitions at once or allow longer")
        result["move_seconds"] = None if result["refused"] else within.total_seconds()
    return result


def render(result: dict) -> str:
    lines = [f"MoveRatio {result['move_ratio']:.3f} ({result['moved_partitions']} of {result['total_partitions']} "
             "partitions move)"]
    headers = ["broker", "receives", "sends", "IN B/s", "N B/s", "R", "bounds IN < T < N-IN/R", "T B/s", "MoveTime"]
    rows = [[b["broker_id"], size(b["receive_bytes"]), size(b["send_bytes"]), f"{b['in_bytes_per_sec']:,.0f}",
             "-" if b["capacity_bytes"] is None else f"{b['capacity_bytes']:,}", b["replication_factor"],
             f"{b['lower_bound']:,.0f} < T < " + ("?" if b["upper_bound"] is None else f"{b['upper_bound']:,.0f}"),
             "-" if b["throttle"] is None else f"{b['throttle']:,}",
             "never (T <= IN)" if b["move_seconds"] is None and b["throttle"] is not None else duration(b["move_seconds"])]
            for b in result["brokers"]]
    lines.append(table(headers, rows))
    if result.get("within_seconds") is not None:
        if result["refused"]:
            lines.append(f"refused: {result['refused']}")
        else:
            lines.append(f"to end within {duration(result['within_seconds'])}: throttle {result['throttle']:,} B/s")
    else:
        lines.append(f"MoveTime {duration(result['move_seconds'])}" if result["move_seconds"] is not None else
                     "MoveTime: no end at these throttles (T <= IN somewhere) or no throttle known; give --throttle")
    return "\n".join(lines)


def _slowest(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else max(values)


def _int(value) -> int | None:
    return None if value is None else int(float(value))
