"""`quota-sidecar evaluate` (spark_jobs/commands.py): replays recorded observations through the decision path."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from ..common.observation import (BrokerLoad, Observation, Overrides, Reassignment, ReplicaSizes,
                                  ReplicationObservation, Volume)
from ..configuration import json_file
from ..configuration.settings import SidecarConfig
from ..observe.moves import MoveHistory
from .decider import Decider, VolumeJudge
from .throttles import RateJudge, ReplicationDecider


class SnapshotError(ValueError):
    """The snapshots file is not what `evaluate` reads; the message names the item and the field."""


def load_snapshots(path: str) -> list[dict]:
    items = json_file.load(path, "snapshots file", SnapshotError)
    if not isinstance(items, list):
        raise SnapshotError(f"snapshots file {path}: expected a JSON list of observations")
    return items


def observation(item: Any, index: int) -> Observation:
    where = f"snapshot #{index}"
    if not isinstance(item, dict) or "at" not in item:
        raise SnapshotError(f"{where}: expected an object with 'at'")
    at = parse_time(item["at"], where)
    if "error" in item:
        return Observation(at=at, error=str(item["error"]))
    try:
        brokers = tuple(int(b) for b in item.get("brokers", []))
        volumes = tuple(Volume(int(v["broker_id"]), str(v["log_dir"]), int(v["total_bytes"]),
                               int(v["available_bytes"]), at, v.get("error"))
                        for v in item.get("volumes", []))
    except (KeyError, TypeError, ValueError) as error:
        raise SnapshotError(f"{where}: bad broker or volume entry ({error!r})") from None
    return Observation(at=at, brokers=brokers, volumes=volumes, replication=replication(item, where))


def moves_seen(item: Any, index: int) -> tuple[dict[tuple[str, int], int], ReplicaSizes | None]:
    """(each moving partition's leader, the replica sizes read) of one snapshot; a reassignment's leader is
    its "leader", else its first source, as a sidecar reads it from the metadata."""
    where = f"snapshot #{index}"
    if not isinstance(item, dict) or "error" in item or "replica_sizes" not in item:
        return {}, None
    try:
        leaders = {(str(m["topic"]), int(m["partition"])): int(m["leader"])
                   for m in item.get("reassignments", []) if m.get("leader") is not None}
        sizes = {(str(r["topic"]), int(r["partition"]), int(r["broker"])): int(r["bytes"])
                 for r in item["replica_sizes"]}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SnapshotError(f"{where}: bad replica_sizes entry or reassignment leader ({error!r})") from None
    return leaders, ReplicaSizes(parse_time(item["at"], where).timestamp(), sizes)


def replication(item: dict, where: str) -> ReplicationObservation:
    try:
        moves = tuple(Reassignment(str(m["topic"]), int(m["partition"]), _ids(m["replicas"]),
                                   _ids(m.get("adding", ())), _ids(m.get("removing", ())))
                      for m in item.get("reassignments", []))
        loads = {int(b): BrokerLoad(float(v["tx_bytes_per_sec"]), float(v["rx_bytes_per_sec"]),
                                    _float(v.get("replication_tx_bytes_per_sec")),
                                    _float(v.get("replication_rx_bytes_per_sec")))
                 for b, v in item.get("broker_load", {}).items()}
        applied = {int(b): {key: _int(v.get(key)) for key in ("leader_rate", "follower_rate")}
                   for b, v in item.get("applied_rates", {}).items()}
        raw = item.get("overrides", {})
        overrides = Overrides(_int(raw.get("global_rate")), bool(raw.get("global_autoremove", False)),
                              {int(b): int(r) for b, r in raw.get("broker_rates", {}).items()})
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SnapshotError(f"{where}: bad reassignment, broker_load, applied_rates or overrides entry ({error!r})") from None
    return ReplicationObservation(moves, loads, applied, overrides)


def _ids(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _int(value):
    return None if value is None else int(value)


def _float(value):
    return None if value is None else float(value)


def parse_time(raw: Any, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(raw))
    except ValueError:
        raise SnapshotError(f"{where}: 'at'={raw!r} is not an ISO-8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def evaluate(config: SidecarConfig, items: list[dict], judge: VolumeJudge,
             rate_judge: RateJudge | None) -> list[dict]:
    """One decision per observation; every broker of the moves is decided, as if all sidecars ran here.
    The moves' history is kept here as a sidecar's runner keeps it between passes."""
    history = MoveHistory(config.replication.network_window, config.replication.stuck_after)
    observations = []
    for index, item in enumerate(items):
        seen = observation(item, index)
        leaders, sizes = moves_seen(item, index)
        if seen.replication is not None and sizes is not None:
            progress = history.record(seen.replication.reassignments, leaders, sizes)
            seen = dataclasses.replace(seen, replication=dataclasses.replace(seen.replication,
                                                                            moving_replicas=progress))
        observations.append(seen)
    replication = ReplicationDecider(config.replication, rate_judge) if config.replication.enabled else None
    decider = Decider(config, judge, replication)
    return [decider.decide(obs).to_json() for obs in observations]
