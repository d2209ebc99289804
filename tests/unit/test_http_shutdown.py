"""The HTTP endpoint stops cleanly with a request in flight: the request is answered, and neither waitress
nor its thread reports an error (`run` stops it on SIGTERM, often while a scrape is under way)."""

import logging
import threading
import time
import urllib.request

from flask import Flask

from quota_sidecar.http_api import HttpServer


def test_stopping_with_a_request_in_flight_answers_it_and_reports_nothing(caplog, monkeypatch):
    app = Flask("slow")
    arrived = threading.Event()

    @app.get("/slow")
    def slow():
        arrived.set()
        time.sleep(0.5)  # still being served when stop() comes
        return "done"

    thread_errors = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    server = HttpServer(app, "127.0.0.1", 0).start()
    answers = []
    client = threading.Thread(target=lambda: answers.append(
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/slow", timeout=10).read()))
    client.start()
    assert arrived.wait(10)

    server.stop()
    client.join(10)

    assert answers == [b"done"]
    assert not server.thread.is_alive()
    assert thread_errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
