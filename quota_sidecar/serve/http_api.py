"""The sidecar's HTTP endpoint: Prometheus metrics, status as JSON, health. Bound to localhost by default."""

from __future__ import annotations

import hmac
import logging
import threading
from typing import Callable

from flask import Flask, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from waitress import wasyncore
from waitress.server import create_server

from ..act.snapshot import Snapshot, utcnow
from ..common import records
from . import status as status_view

log = logging.getLogger(__name__)


def create_app(snapshot: Callable[[], Snapshot], store, api_token: str, registry) -> Flask:
    """The endpoint's app: `snapshot()` is the sidecar's last pass, `store` keeps the overrides."""
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
        body, code = readiness(snapshot(), utcnow(), request.args.get("max_age"))
        return jsonify(body), code

    add_override_routes(app, store, api_token)
    return app


def readiness(snapshot: Snapshot, now, max_age: str | None) -> tuple[dict, int]:
    """200 while the last successful pass is at most `max_age` seconds old (by default the factor's validity:
    after it the fallback takes over), 503 before the first one and after; the body says the age either way."""
    if max_age is None:
        limit = snapshot.config.validity.total_seconds()
    else:
        try:
            limit = float(max_age)
        except ValueError:
            return {"error": f"max_age={max_age!r}: expected seconds, a number"}, 400
    last = snapshot.factor.last_success_at
    age = None if last is None else (now - last).total_seconds()
    ready = age is not None and age <= limit
    return {"ready": ready, "last_success_age_seconds": age, "max_age_seconds": limit}, 200 if ready else 503


def add_override_routes(app: Flask, store, token: str) -> None:
    """Replication throttle overrides, kept in the cluster so every sidecar applies them and they outlive
    restarts. Reading is open; setting and removing need `Authorization: Bearer <api.token>`."""

    def refused():
        if not token:
            return _error(403, "overrides are read-only here: set client.quota.callback.static.api.token to allow changes")
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return _error(401, "a valid 'Authorization: Bearer <token>' header is required")
        return None

    def read(broker_id):
        value = store.read_all().get(records.override_key(broker_id))
        return jsonify({"broker_id": broker_id, "override": value})

    def write(broker_id):
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return _error(400, 'expected a JSON object such as {"rate": 50000000}')
        rate = body.get("rate")
        if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
            return _error(400, f"rate={rate!r}: expected a whole number of bytes/s > 0")
        autoremove = body.get("autoremove", False)
        if not isinstance(autoremove, bool) or (autoremove and broker_id is not None):
            return _error(400, "autoremove: true or false, and only for the global override")
        value = {"rate": rate, "autoremove": autoremove} if broker_id is None else {"rate": rate}
        store.put(records.override_key(broker_id), value)
        log.info("throttle override set: %s -> %s", "global" if broker_id is None else f"broker {broker_id}", value)
        return jsonify({"broker_id": broker_id, "override": value})

    def remove(broker_id):
        existed = records.override_key(broker_id) in store.read_all()
        store.delete(records.override_key(broker_id))
        log.info("throttle override removed: %s", "global" if broker_id is None else f"broker {broker_id}")
        return jsonify({"broker_id": broker_id, "removed": existed})

    def route(broker_id=None):
        if request.method == "GET":
            return read(broker_id)
        return refused() or (write(broker_id) if request.method == "PUT" else remove(broker_id))

    app.add_url_rule("/throttle", "global_override", route, methods=["GET", "PUT", "DELETE"])
    app.add_url_rule("/throttle/<int:broker_id>", "broker_override", route, methods=["GET", "PUT", "DELETE"])


def _error(code: int, message: str):
    return jsonify({"error": message}), code


class HttpServer:
    """waitress serving the app in a daemon thread; `port` is the bound one (a free one when 0 was asked)."""

    def __init__(self, app: Flask, host: str, port: int):
        self.server = create_server(app, host=host, port=port, threads=4, _start=True)
        self.host, self.port = host, int(self.server.effective_port)
        self.stopping = threading.Event()
        self.waking = threading.Lock()  # the loop closes the trigger only after stop() has pulled it
        self.thread = threading.Thread(target=self._serve, name="http", daemon=True)

    def start(self) -> "HttpServer":
        self.thread.start()
        log.info("HTTP endpoint on http://%s:%d (/metrics, /status, /healthz, /readyz, /throttle)", self.host, self.port)
        return self

    def stop(self) -> None:
        with self.waking:  # a loop that wakes by itself in between must not close the pipe under this write
            self.stopping.set()
            self.server.pull_trigger()  # wakes the loop from its poll
        self.thread.join(timeout=10)

    def _serve(self) -> None:
        """waitress's loop one poll at a time until stop(); then, in this thread, the requests in flight finish
        and the sockets close. (Closed from another thread while it polls, waitress failed with EBADF
        tracebacks, and a request in flight with an ERROR; a stop() whose wake-up came after the loop had seen
        `stopping` on its own wrote to a closed pipe: EBADF, seen once in CI.)"""
        adj = self.server.adj
        while not self.stopping.is_set():
            wasyncore.loop(timeout=adj.asyncore_loop_timeout, map=self.server._map, use_poll=adj.asyncore_use_poll,
                           count=1)
        self.server.task_dispatcher.shutdown()
        with self.waking:
            wasyncore.close_all(self.server._map)
