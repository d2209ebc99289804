"""The HTTP endpoint stops cleanly with a request in flight: the request is answered, and neither waitress
nor its thread reports an error (`run` stops it on SIGTERM, often while a scrape is under way)."""

import logging
import threading
import time
import urllib.request

from flask import Flask

from quota_sidecar.serve.http_api import HttpServer


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


class _SlowToReturnEvent(threading.Event):
    """set() that returns late, as when the thread calling stop() loses the CPU right after it."""

    def set(self):
        super().set()
        time.sleep(0.3)


def test_a_stop_whose_loop_wakes_on_its_own_first_wakes_it_without_writing_to_a_closed_pipe(monkeypatch):
    thread_errors = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    server = HttpServer(Flask("idle"), "127.0.0.1", 0)
    server.stopping = _SlowToReturnEvent()
    server.server.adj.asyncore_loop_timeout = 0.01  # the loop sees `stopping` before stop() pulls the trigger
    server.start()

    server.stop()  # raised OSError EBADF: the loop had closed the trigger's pipe

    assert not server.thread.is_alive()
    assert thread_errors == []
