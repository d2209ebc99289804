"""`quota-sidecar evaluate`: replays recorded observations through the decision path, Spark included."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from .decider import Decider, Observation, VolumeJudge
from .config import SidecarConfig
from .volumes import Volume


class SnapshotError(ValueError):
    """The snapshots file is not what `evaluate` reads; the message names the item and the field."""


def load_snapshots(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            items = json.load(handle)
    except OSError as error:
        raise SnapshotError(f"cannot read snapshots file {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise SnapshotError(f"snapshots file {path} is not JSON: {error}") from None
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
    return Observation(at=at, brokers=brokers, volumes=volumes)


def parse_time(raw: Any, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(raw))
    except ValueError:
        raise SnapshotError(f"{where}: 'at'={raw!r} is not an ISO-8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def evaluate(config: SidecarConfig, items: list[dict], judge: VolumeJudge) -> list[dict]:
    observations = [observation(item, index) for index, item in enumerate(items)]
    decider = Decider(config, judge)
    return [decider.decide(obs).to_json() for obs in observations]
