"""The sidecar's HTTP endpoint: Prometheus metrics, status as JSON, health. Bound to localhost by default."""

from __future__ import annotations

import logging
import threading

from flask import Flask, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from waitress.server import create_server

from . import status as status_view
from .loop import utcnow

log = logging.getLogger(__name__)


def create_app(sidecar, registry) -> Flask:
    app = Flask("quota_sidecar")

    @app.get("/metrics")
    def metrics():
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    @app.get("/status")
    def status():
        with sidecar.lock:
            return jsonify(status_view.build(sidecar, utcnow(), mode="running"))

    @app.get("/healthz")
    def healthz():
        last = sidecar.decider.last
        return jsonify({"ok": True, "last_poll": None if last is None else last.at.isoformat()})

    extend = getattr(sidecar, "extend_http", None)
    if extend is not None:
        extend(app)
    return app


class HttpServer:
    """waitress serving the app in a daemon thread; `port` is the bound one (a free one when 0 was asked)."""

    def __init__(self, app: Flask, host: str, port: int):
        self.server = create_server(app, host=host, port=port, threads=4, _start=True)
        self.host, self.port = host, self.server.effective_port
        self.thread = threading.Thread(target=self.server.run, name="http", daemon=True)

    def start(self) -> "HttpServer":
        self.thread.start()
        log.info("HTTP endpoint on http://%s:%d (/metrics, /status)", self.host, self.port)
        return self

    def stop(self) -> None:
        self.server.close()
        self.thread.join(timeout=5)
