"""The sidecar's HTTP endpoint: Prometheus metrics, status as JSON, health, throttle overrides. Bound to localhost
by default; its listeners are http_server.py's."""

from __future__ import annotations

import hmac
import ipaddress
import itertools
import logging
import math
import threading
import time
from typing import Callable

import psutil
from flask import Flask, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily
from werkzeug.exceptions import HTTPException

from ..act.snapshot import Snapshot, utcnow
from ..common import records
from . import status as status_view

log = logging.getLogger(__name__)


MAX_BODY_BYTES = 4096  # an override is a few dozen bytes
FIELDS = ("rate", "autoremove")  # an override's, as PUT takes them
AUDIT = ("by", "over", "at")  # kept with an override in the records: who set it, over http or https, when


def create_app(snapshot: Callable[[], Snapshot], store, api_token: str, registry, plain_changes: bool = False,
               refusals: Refusals | None = None) -> Flask:
    """The endpoint's app: `snapshot()` is the sidecar's last pass, `store` keeps the overrides; `plain_changes`
    takes override changes over plain HTTP from anywhere (else over https, or from this host)."""
    app = Flask("quota_sidecar")

    @app.get("/metrics")
    def metrics():
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    @app.get("/status")
    def status():
        return jsonify(status_view.build(snapshot(), utcnow(), mode="running"))

    @app.get("/healthz")
    def healthz():
        last = snapshot().decision
        return jsonify({"ok": True, "last_poll": None if last is None else last.at.isoformat()})

    @app.get("/readyz")
    def readyz():
        body, code = readiness(snapshot(), utcnow(), request.args.get("max_age"), request.args.get("strict"))
        return jsonify(body), code

    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES

    @app.errorhandler(HTTPException)
    def as_json(error: HTTPException):  # 404, 405, 413...: the same JSON shape as the routes' own errors
        if error.code == 413:
            return _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes: an override is a JSON object such as "
                               '{"rate": 50000000}')
        return _error(error.code or 500, error.description or error.name)

    refusals = refusals or Refusals()
    registry.register(refusals)
    add_override_routes(app, store, api_token, lambda: _brokers(snapshot()), plain_changes, refusals)
    return app


def _brokers(snapshot: Snapshot) -> set[int] | None:
    """The brokers the last pass saw (None before one): an override for another is a mistake."""
    decision = snapshot.decision
    return {volume.broker_id for volume in decision.volumes} if decision and decision.volumes else None


def readiness(snapshot: Snapshot, now, max_age: str | None, strict: str | None = None) -> tuple[dict, int]:
    """200 while the endpoint serves and the local watch runs (the local verdict needs nothing else; serving is
    enough without a watch), 503 when the watch has stopped. A stale pass, a missing decision or an unreachable
    cluster are status and alerts, not readiness: the sidecar is in the broker's pod, and a NotReady broker pod is
    an outage. With `strict` (1, true), also 503 before the first successful pass and once it is older than
    `max_age` seconds (by default the factor's validity: after it the fallback takes over). The body says the
    age and whether the decisions are stale either way."""
    strict_on = _flag(strict)
    if strict_on is None:
        return {"error": f"strict={strict!r}: expected 1 or 0 (true or false)"}, 400
    if max_age is None:
        limit = snapshot.config.validity.total_seconds()
    else:
        try:
            limit = float(max_age)
        except ValueError:
            limit = math.nan
        if not 0 <= limit < math.inf:
            return {"error": f"max_age={max_age!r}: expected seconds, a number >= 0"}, 400
    last = snapshot.factor.last_success_at
    age = None if last is None else (now - last).total_seconds()
    fresh = age is not None and age <= limit
    decided = snapshot.factor.decided_at
    watch = snapshot.local_watch
    watching = "off" if watch is None else "running" if watch.running else "stopped"
    ready = watching != "stopped" and (fresh or not strict_on)
    return {"ready": ready, "strict": strict_on, "local_watch": watching, "last_success_age_seconds": age,
            "max_age_seconds": limit,
            "decisions_stale": decided is not None and (now - decided).total_seconds() > limit}, 200 if ready else 503


def _flag(value: str | None) -> bool | None:
    """A query flag: absent or 0/false/no is off, 1/true/yes on; None for anything else."""
    if value is None:
        return False
    return {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}.get(value.lower())


def add_override_routes(app: Flask, store, token: str, known_brokers: Callable[[], set[int] | None],
                        plain_changes: bool, refusals: Refusals) -> None:
    """Replication throttle overrides, kept in the cluster so every sidecar applies them and they outlive
    restarts. Reading is open; setting and removing need `Authorization: Bearer <api.token>`, over https or from
    this host unless `plain_changes`; every change is logged and recorded with where it came from."""

    def refused():
        if not token:
            return refusals.refuse("read_only", 403, "overrides are read-only here: set "
                                   "client.quota.callback.static.api.token to allow changes")
        origin = request.remote_addr or "?"
        local = _on_this_host(origin)
        if request.scheme != "https" and not plain_changes and not local:
            return refusals.refuse("not_https", 403, "changes are taken over https (http.tls.cert.file and "
                                   "http.tls.key.file) or from this host; http.plain.changes=true takes them in clear "
                                   "text")
        wait = 0.0 if local else refusals.backoff.retry_after(origin)  # this host's clients are inside the pod
        if wait > 0:
            response = refusals.refuse("backoff", 429, f"too many wrong tokens from {origin}: retry in {wait:.0f} s")
            response[0].headers["Retry-After"] = str(math.ceil(wait))
            return response
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), f"Bearer {token}".encode()):
            failures = refusals.backoff.failed(origin)
            log.warning("override change refused: wrong or missing token from %s (%d in a row)", origin, failures)
            return refusals.refuse("token", 401, "a valid 'Authorization: Bearer <token>' header is required")
        refusals.backoff.succeeded(origin)
        return None

    def read(broker_id):
        value = store.read_all().get(records.override_key(broker_id)) or {}
        override = {key: value[key] for key in FIELDS if key in value} or None
        changed = {key: value[key] for key in AUDIT if key in value}
        return jsonify({"broker_id": broker_id, "override": override, **({"changed": changed} if changed else {})})

    def write(broker_id):
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return _error(400, 'expected a JSON object such as {"rate": 50000000}')
        unknown = sorted(set(body) - set(FIELDS))
        if unknown:
            return _error(400, f"unknown fields {unknown}: expected rate and, for the global override, autoremove")
        rate = body.get("rate")
        if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
            return _error(400, f"rate={rate!r}: expected a whole number of bytes/s > 0")
        autoremove = body.get("autoremove", False)
        if not isinstance(autoremove, bool) or (autoremove and broker_id is not None):
            return _error(400, "autoremove: true or false, and only for the global override")
        brokers = known_brokers()
        if broker_id is not None and brokers and broker_id not in brokers:
            return _error(404, f"broker {broker_id} is not in the cluster (brokers {', '.join(map(str, sorted(brokers)))})")
        value = {"rate": rate, "autoremove": autoremove} if broker_id is None else {"rate": rate}
        store.put(records.override_key(broker_id), {**value, **_origin()})
        log.info("throttle override set by %s: %s -> %s", _said_origin(), _whose(broker_id), value)
        return jsonify({"broker_id": broker_id, "override": value})

    def remove(broker_id):
        existed = store.read_all().get(records.override_key(broker_id))
        store.delete(records.override_key(broker_id))
        log.info("throttle override removed by %s: %s (was %s)", _said_origin(), _whose(broker_id), existed)
        return jsonify({"broker_id": broker_id, "removed": existed is not None})

    def route(broker_id=None):
        if request.method == "GET":
            return read(broker_id)
        return refused() or (write(broker_id) if request.method == "PUT" else remove(broker_id))

    app.add_url_rule("/throttle", "global_override", route, methods=["GET", "PUT", "DELETE"])
    app.add_url_rule("/throttle/<int:broker_id>", "broker_override", route, methods=["GET", "PUT", "DELETE"])


class BadTokenBackoff:
    """After a wrong token, changes from that address are refused (429) for a second, doubling with each wrong
    token in a row up to `longest`: guessing a token takes forever, and the log gets a line per try at most. A
    right token resets it. Not for this host's own clients (loopback: they are inside the pod already)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, longest: float = 60.0, remembered: int = 1024):
        self.clock, self.longest, self.remembered = clock, longest, remembered
        self.failures: dict[str, tuple[int, float]] = {}  # address -> (wrong tokens in a row, refused until)
        self.lock = threading.Lock()

    def retry_after(self, origin: str) -> float:
        with self.lock:
            return max(0.0, self.failures.get(origin, (0, 0.0))[1] - self.clock())

    def failed(self, origin: str) -> int:
        with self.lock:
            count = self.failures.pop(origin, (0, 0.0))[0] + 1
            self.failures[origin] = (count, self.clock() + min(self.longest, 2.0 ** (count - 1)))
            while len(self.failures) > self.remembered:  # many addresses: the oldest goes
                del self.failures[next(iter(self.failures))]
            return count

    def succeeded(self, origin: str) -> None:
        with self.lock:
            self.failures.pop(origin, None)


class Refusals:
    """Override changes refused, by reason (a Prometheus counter), and the wrong tokens' back-off."""

    def __init__(self, backoff: BadTokenBackoff | None = None):
        self.backoff = backoff or BadTokenBackoff()
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    def refuse(self, reason: str, code: int, message: str):
        with self.lock:
            self.counts[reason] = self.counts.get(reason, 0) + 1
        return _error(code, message)

    def collect(self):
        family = CounterMetricFamily("quota_sidecar_http_changes_refused", "Override changes the HTTP endpoint "
                                     "refused, by reason: token, backoff, not_https, read_only.", labels=["reason"])
        with self.lock:
            for reason, count in sorted(self.counts.items()):
                family.add_metric([reason], count)
        yield family


def _on_this_host(address: str) -> bool:
    """Loopback, or an address of this host's own interfaces (a client in the pod calling the pod's address)."""
    try:
        if ipaddress.ip_address(address).is_loopback:
            return True
    except ValueError:
        return False
    return address in {found.address.split("%")[0] for found in itertools.chain(*psutil.net_if_addrs().values())}


def _origin() -> dict:
    """Where a change came from, kept with it in the records: the audit trail."""
    return dict(zip(AUDIT, (request.remote_addr, request.scheme, utcnow().isoformat())))


def _said_origin() -> str:
    return f"{request.remote_addr} over {request.scheme}"


def _whose(broker_id: int | None) -> str:
    return "global" if broker_id is None else f"broker {broker_id}"


def _error(code: int, message: str):
    return jsonify({"error": message}), code
