"""`quota-sidecar status`: one plain data structure, rendered as a table for people or as JSON for machines."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .. import __version__
from ..act.cordoning import CordonView
from ..act.snapshot import ReplicationView, Snapshot
from ..common.observation import FOLLOWER, LEADER, Overrides
from ..common.text import duration, size, table
from ..decide import descent, quotas
from ..decide.decider import iso
from ..decide.throttle_factor import FactorState

VIOLATED, OK = "VIOLATED", "ok"


def build(snapshot: Snapshot, now: datetime, mode: str) -> dict:
    """Everything a person on call wants at a glance, from the sidecar's last pass."""
    config = snapshot.config
    decision = snapshot.decision
    factor = snapshot.factor
    judged = {(row["broker_id"], row["log_dir"]): row for row in decision.judged} if decision else {}
    status = {
        "sidecar": {"version": __version__, "mode": mode, "broker_id": config.broker_id,
                    "decided_by": _decided_by(snapshot, now)},
        "throttle": {
            "factor": factor.factor,
            "source": factor.source,
            "valid_from": iso(factor.valid_from),
            "age_seconds": _seconds(factor.age(now)),
            "last_success": iso(factor.last_success_at),
            "last_poll": iso(decision.at if decision else None),
            "last_error": decision.error if decision else None,
            "fallback_factor": config.fallback_factor,
            "validity_seconds": config.validity.total_seconds(),
            "fallback_applied": snapshot.counters.fallback_applied,
            "stale_since": _stale_since(factor, config.validity, now),
        },
        "limit": config.storage_limit.describe() if config.storage_limit else "storage check disabled",
        "volumes": [_volume(volume, config.storage_limit, judged.get((volume.broker_id, volume.log_dir)), decision.at)
                    | _published(volume, decision.published_volumes) for volume in decision.volumes] if decision else [],
        "quotas_in_force": [_quota_row(entity, keys) for entity, keys in
                            sorted(snapshot.quotas_in_force.items(), key=lambda item: quotas.entity_label(item[0]))],
        "tenants": snapshot.tenants._asdict(),
        "last_resort": None if snapshot.last_resort is None else {
            "entities": [quotas.entity_label(entity) for entity in snapshot.last_resort.entities],
            "who": snapshot.last_resort.who(), "since": iso(snapshot.last_resort.since)},
        "descent": _descent(decision, config.quotas),
        "own_clients": _own_clients(config.quotas),
    }
    if snapshot.replication is not None:
        status["replication"] = _replication(snapshot.replication)
    watch = snapshot.local_watch
    status["local_watch"] = None if watch is None else {
        "watched": [d for d in watch.watched if d not in watch.not_watched], "not_watched": dict(watch.not_watched),
        "near_the_limit": list(watch.near_the_limit), "every_seconds": config.local_watch.interval.total_seconds(),
        "passes_started": snapshot.counters.watch_passes}
    if snapshot.cover is not None:
        status["cover"] = {"covering": list(snapshot.cover.covering), "every_seconds": config.cover_interval.total_seconds(),
                           "agents_heard": {str(b): round(age, 1) for b, age in snapshot.cover.heard.items()},
                           "down_after_seconds": config.cover_after.total_seconds()}
    if snapshot.cordons is not None:
        status["cordoned"] = _cordoned(snapshot.cordons)
    if snapshot.cancelled_moves:
        status["cancelled_moves"] = [dict(move) for move in snapshot.cancelled_moves]
    status["refused"] = [{"permission": r.permission, "line": r.line, "times": r.times,
                          "last_at": iso(datetime.fromtimestamp(r.last_at, timezone.utc))} for r in snapshot.refused]
    return status


def _stale_since(factor: FactorState, validity: timedelta, now: datetime) -> str | None:
    """When the decisions went stale (no successful pass within the validity), None while they are not."""
    decided = factor.decided_at
    return iso(decided + validity) if decided is not None and now - decided > validity else None


def _cordoned(view: CordonView) -> dict:
    """This broker's cordoned.log.dirs (KIP-1066) as last read; log_dirs None: not read yet, or a broker
    older than 4.3 (unavailable)."""
    return {"broker_id": view.broker_id, "enabled": view.enabled, "unavailable": view.unavailable,
            "log_dirs": None if view.in_force is None else list(view.in_force), "by_sidecar": list(view.by_sidecar)}


def _replication(view: ReplicationView) -> dict:
    observation, decision, broker = view.observation, view.decision, view.broker_id
    rates = decision.brokers.get(broker) if decision else None
    load = observation.broker_load.get(broker) if observation else None
    moves = observation.reassignments if observation else ()
    own_roles = sorted({role for m in moves for role, brokers in ((LEADER, m.sources), (FOLLOWER, m.destinations))
                        if broker in brokers})
    return {
        "moves": [{"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas),
                   "adding": list(m.adding), "removing": list(m.removing)} for m in moves],
        "brokers": [{"broker_id": broker, "role": "+".join(own_roles) or "none",
                     "tx_bytes_per_sec": _rounded(load and load.tx_bytes_per_sec),
                     "rx_bytes_per_sec": _rounded(load and load.rx_bytes_per_sec),
                     "replication_tx_bytes_per_sec": _rounded(load and load.replication_tx_bytes_per_sec),
                     "replication_rx_bytes_per_sec": _rounded(load and load.replication_rx_bytes_per_sec),
                     "capacity": view.capacity,
                     "leader_rate": rates.leader_rate if rates else None,
                     "follower_rate": rates.follower_rate if rates else None,
                     "reason": (rates.reason if rates else None) or "no throttle",
                     "cannot_keep_up": list(rates.cannot_keep_up) if rates else []}],
        "overrides": _overrides(observation.overrides) if observation else None,
        "progress": [{key: value for key, value in move.items() if key != "leader"}
                     for move in (decision.moves if decision else ())],
        "destinations": [{"broker_id": b, **summary}
                         for b, summary in sorted((decision.destinations if decision else {}).items())],
    }


def _overrides(overrides: Overrides) -> dict:
    return {"global": None if overrides.global_rate is None else
            {"rate": overrides.global_rate, "autoremove": overrides.global_autoremove},
            "brokers": {str(b): r for b, r in sorted(overrides.broker_rates.items())}}


def _published(volume, published) -> dict:
    """With zookeeper.connect, beside what the decision used: what the broker's sidecar published (None: nothing)."""
    if not published:
        return {}
    same = [p for p in published if (p.broker_id, p.log_dir) == (volume.broker_id, volume.log_dir)]
    return {"published_available_bytes": same[0].available_bytes if same else None}


def _volume(volume, limit, judged: dict | None, decided_at) -> dict:
    """A volume as the last decision saw it; `judged` is its row from the Spark job (None: not judged)."""
    judged = judged or {}
    if not volume.usable:
        state = f"offline: {volume.error or 'no sizes reported'}"
    elif judged.get("violated"):
        state = VIOLATED + (" (predicted)" if judged["predicted"] else "")
    elif judged.get("throttle_factor", 1.0) < 1.0:
        state = f"soft zone: factor {judged['throttle_factor']:.2f}"
    elif judged.get("descending"):
        state = "descending"
    else:
        state = OK
    if volume.observed_at < decided_at:
        state += " (broker absent; last seen " + iso(volume.observed_at) + ")"
    margin = volume.margin(limit) if limit else None
    return {"broker_id": volume.broker_id, "log_dir": volume.log_dir, "total_bytes": volume.total_bytes,
            "available_bytes": volume.available_bytes, "available_ratio": volume.available_ratio,
            "margin": margin, "fill_bytes_per_sec": judged.get("fill_bytes_per_sec"),
            "seconds_to_limit": judged.get("seconds_to_limit"), "state": state}


def _descent(decision, config) -> dict | None:
    """While producer quotas come down in steps (decide/descent.py), or are held below proposal 047's value."""
    if decision is None or decision.written_quotas is None or not (
            decision.descending or descent.under_way(decision.written_quotas, decision.client_quotas)):
        return None
    return {"descending": decision.descending, "floor": config.floor, "ratio": config.descent_ratio,
            "step_seconds": config.descent_step.total_seconds(),
            "default_user": decision.written_quotas.default_user.get(quotas.PRODUCE)}


def _own_clients(config) -> str:
    """How the throttle tells the sidecar's own writes apart, and what that leaves open."""
    label = quotas.entity_label(config.sidecar_entity)
    if config.sidecar_principal:
        return f"exempt as {label}"
    return (f"exempt as {label} at {config.sidecar_produce:.0f} B/s: a client id is all that tells them apart (no "
            "principal of their own: SASL or sidecar.principal), and any client taking it shares that rate")


def _quota_row(entity, keys) -> dict:
    return {"entity": quotas.entity_label(entity),
            **{key: _rate(keys.get(key)) for key in quotas.QUOTA_KEYS}}


def render(status: dict) -> str:
    throttle = status["throttle"]
    lines = [
        f"quota-sidecar {status['sidecar']['version']} ({status['sidecar']['mode']}, "
        f"broker {status['sidecar']['broker_id']}, {_decider_line(status['sidecar']['decided_by'])})",
        f"throttle factor {throttle['factor']:.3f}  source {throttle['source']}  "
        f"age {_human_seconds(throttle['age_seconds'])}  last success {throttle['last_success'] or 'never'}",
        f"limit: {status['limit']}  fallback {throttle['fallback_factor']} after "
        f"{_human_seconds(throttle['validity_seconds'])}  (fallback applied {throttle['fallback_applied']}x)",
    ]
    if throttle.get("stale_since"):  # since the validity ran out: the fallback rules, and the local verdict if any
        held = "; the local watch's verdict still holds the limit" if status.get("local_watch") else ""
        lines.append(f"decisions STALE since {throttle['stale_since']}: no successful pass within "
                     f"{_human_seconds(throttle['validity_seconds'])}, fallback factor {throttle['fallback_factor']}"
                     f"{held}")
    if throttle["last_error"]:
        lines.append(f"last poll failed: {throttle['last_error']}")
    if status.get("last_resort"):
        lines.append(f"LAST RESORT: producers of {status['last_resort']['who']} at 1 B/s since "
                     f"{status['last_resort']['since']}; Java producers need a restart after the lift")
    if status.get("descent"):
        d = status["descent"]
        lines.append(f"DESCENT: producer quotas coming down in steps (at most {d['ratio']:g}x every "
                     f"{_human_seconds(d['step_seconds'])}) to {d['floor']:.0f} B/s"
                     + ("" if d["descending"] else ", held") + f"; the default user's now "
                     f"{quotas.rate_text(d['default_user'])}: producers keep sending, and send at full rate "
                     "again within seconds of the lift")
    lines += [f"refused by Kafka's authorizer ({r['times']}x, last at {r['last_at']}): {r['line']}"
              for r in status.get("refused", ())]
    lines += _render_watch(status.get("local_watch"))
    lines += _render_cover(status.get("cover"))
    znodes = any("published_available_bytes" in v for v in status["volumes"])  # side by side
    lines += ["", table(["broker", "log dir", "total", "available", *(["znode avail."] if znodes else []), "ratio",
                         "margin", "fill", "limit", "state"],
                        [[v["broker_id"], v["log_dir"], size(v["total_bytes"]), size(v["available_bytes"]),
                          *([size(v.get("published_available_bytes"))] if znodes else []),
                          _ratio(v["available_ratio"]), _margin(v["margin"]), _fill(v.get("fill_bytes_per_sec")),
                          _time_to_limit(v.get("seconds_to_limit")), v["state"]]
                         for v in status["volumes"]])]
    lines += ["", "client quotas in force (read back from the cluster):",
              table(["entity", *quotas.QUOTA_KEYS],
                    [[q["entity"], *(_shown_rate(q[key]) for key in quotas.QUOTA_KEYS)]
                     for q in status["quotas_in_force"]]),
              "tenants (entities above the default user with a producer rate of their own): "
              f"{status['tenants']['with_a_rate_of_their_own']}, throttled: {status['tenants']['throttled']}",
              *([f"the sidecar's own clients: {status['own_clients']}"] if "own_clients" in status else [])]
    if "cordoned" in status:
        lines += ["", _render_cordoned(status["cordoned"])]
    if "cancelled_moves" in status:
        lines += ["", "moves cancelled by the disk guard (run them again once the dir has room):",
                  table(["at", "topic", "partition", "to", "log dir", "why"],
                        [[m["at"], m["topic"], m["partition"], _cancelled_target(m), m["log_dir"], m["why"]]
                         for m in status["cancelled_moves"]])]
    if "replication" in status:
        lines += ["", _render_replication(status["replication"])]
    return "\n".join(lines)


def _cancelled_target(move: dict) -> str:
    brokers = ",".join(str(b) for b in move["replicas"] if b not in move["removing"])
    return f"{brokers} (from {move['from_log_dir']})" if "from_log_dir" in move else brokers


def _render_watch(watch: dict | None) -> list[str]:
    if watch is None:
        return ["local watch: off (no log dirs of this broker known, or storage.local.watch.interval=PT0S)"]
    lines = []
    if watch["watched"]:
        near = f"; near the limit: {', '.join(watch['near_the_limit'])}" if watch["near_the_limit"] else ""
        lines.append(f"local watch: {', '.join(watch['watched'])} every {watch['every_seconds']:g}s "
                     f"({watch['passes_started']} passes started early){near}")
    lines += [f"local watch: not watching {path}: {why}" for path, why in watch["not_watched"].items()]
    return lines


def _render_cover(cover: dict | None) -> list[str]:
    if cover is None:
        return []
    heard = ", ".join(f"{b} ({age:g}s ago)" for b, age in cover["agents_heard"].items()) or "none yet"
    covering = (f"covering broker {', '.join(map(str, cover['covering']))} (DescribeLogDirs every "
                f"{cover['every_seconds']:g}s)" if cover["covering"] else "covering no broker")
    return [f"agents heard: {heard}; down after {cover['down_after_seconds']:g}s silent; {covering}"]


def _render_cordoned(cordoned: dict) -> str:
    head = f"cordoned log dirs of broker {cordoned['broker_id']} (cordoned.log.dirs"
    head += ")" if cordoned["enabled"] else "; cordoning off)"
    if cordoned["unavailable"]:
        return f"{head}: unavailable, the broker does not know the key (Kafka < 4.3)"
    if cordoned["log_dirs"] is None:
        return f"{head}: not read yet"
    mine = set(cordoned["by_sidecar"])
    return f"{head}: " + (", ".join(d + (" (by the sidecar)" if d in mine else "") for d in cordoned["log_dirs"])
                          or "none")


def _render_replication(replication: dict) -> str:
    moves = replication.get("moves", [])
    return "\n".join([
        "replication throttles:",
        table(["topic", "partition", "replicas", "adding", "removing"],
              [[m["topic"], m["partition"], m["replicas"], m["adding"], m["removing"]] for m in moves]),
        table(["broker", "role", "tx B/s", "rx B/s", "replication tx B/s", "replication rx B/s", "capacity",
               "leader rate", "follower rate", "why"],
              [[b["broker_id"], b["role"], b.get("tx_bytes_per_sec"), b.get("rx_bytes_per_sec"),
                b.get("replication_tx_bytes_per_sec"), b.get("replication_rx_bytes_per_sec"),
                b.get("capacity"), b["leader_rate"], b["follower_rate"], b["reason"]]
               for b in replication.get("brokers", [])]),
        *(f"  broker {b['broker_id']}: even its highest {' and '.join(b['cannot_keep_up'])} rate is below what "
          "its moves take in (KIP-73's upper bound): they may never end"
          for b in replication.get("brokers", []) if b.get("cannot_keep_up")),
        "moving replicas:",
        _progress(replication),
        *(destination_line(d) for d in replication.get("destinations", [])),
    ])


def _progress(replication: dict) -> str:
    progress = replication.get("progress", [])
    if not progress and replication.get("moves") and all(b["role"] == "none" for b in replication.get("brokers", [])):
        # (its pass decides nothing, and runs no Spark job)
        return "  measured by the sidecars of the moves' sources and destinations, not this broker's"
    return table(["topic", "partition", "broker", "behind", "lag", "catch-up", "incoming", "eta", "state"],
                 [[m["topic"], m["partition"], m["broker"], size(m["bytes_behind"]), duration(m["lag_seconds"]),
                   _per_second(m["catch_up_bytes_per_sec"]), _per_second(m["incoming_bytes_per_sec"]),
                   duration(m["eta_seconds"]), m["state"] + (f" ({m['stuck_reason']})" if m["stuck_reason"] else "")]
                  for m in progress])


def destination_line(summary: dict) -> str:
    """One line per destination broker: "broker 3: 2 replicas, 1.2 GiB behind, done in ~4m10s"."""
    count = summary["replicas"]
    head = (f"  broker {summary['broker_id']}: {count} replica{'s' if count != 1 else ''}, "
            f"{size(summary['sum_replica_lag_bytes'])} behind")
    if summary["eta_seconds"] == 0:
        return f"{head}, caught up"
    if summary["eta_seconds"] is None:
        stuck = f", {summary['stuck']} stuck" if summary["stuck"] else ""
        return f"{head}{stuck}, no end in sight at the present rates"
    return f"{head}, done in ~{duration(summary['eta_seconds'])}"


def _per_second(value) -> str:
    return "-" if value is None else size(value) + "/s"


def _rate(value):
    if value is None:
        return None
    return "unlimited" if value >= quotas.UNLIMITED else value


def _shown_rate(value) -> str:
    return "-" if value is None else value if isinstance(value, str) else f"{value:,.0f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2%}"


def _margin(value) -> str:
    if value is None:
        return "-"
    return f"{value:+.2%}" if isinstance(value, float) else f"{value:+,} B"


def _fill(value) -> str:
    """Bytes/s a volume fills; negative while it frees space."""
    return "-" if value is None else ("-" if value < 0 else "") + size(abs(value)) + "/s"


def _time_to_limit(seconds) -> str:
    if seconds is None:
        return "-"  # not filling, or no fill rate yet
    if seconds <= 0:
        return "reached"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"fills in {days}d{hours:02d}h"
    if hours:
        return f"fills in {hours}h{minutes:02d}m"
    if minutes:
        return f"fills in {minutes}m{secs:02d}s"
    return f"fills in {secs}s" if whole else "fills in <1s"


def _human_seconds(value) -> str:
    return "-" if value is None else f"{value:.0f}s"


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)


def _decided_by(snapshot: Snapshot, now: datetime) -> dict:
    """Who decides: the aggregator of the pipeline, with the age of its last decision and the pipeline's lag
    (observed -> decided)."""
    config = snapshot.config
    last = snapshot.last_aggregation or {}
    decided = _moment(last.get("decided_at"))
    observed = _moment(last.get("observed_at"))
    return {"pipeline": config.pipeline.bootstrap_servers, "aggregator": last.get("aggregator"),
            "decided_at": last.get("decided_at"),
            "decision_age_seconds": _seconds(now - decided) if decided else None,
            "lag_seconds": _seconds(decided - observed) if decided and observed else None}


def _decider_line(decided_by: dict) -> str:
    if decided_by["aggregator"] is None:
        return f"aggregator on {decided_by['pipeline']}: no decision yet"
    lag = decided_by["lag_seconds"]
    return (f"aggregator {decided_by['aggregator']}: last decision {_human_seconds(decided_by['decision_age_seconds'])} "
            f"ago{'' if lag is None else f', {lag:.2f}s after its observation'}")


def _moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _seconds(delta):
    return None if delta is None else delta.total_seconds()
