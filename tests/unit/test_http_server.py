"""The HTTP endpoint's listeners (serve/http_server.py) on loopback: a stop with a request in flight answers it,
https with certificates the test makes (trustme: none is committed), read again when cert-manager would renew
them, and a plain-HTTP client on the TLS port turned away without a traceback."""

import hashlib
import logging
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
import trustme
from flask import Flask

from quota_sidecar.serve.http_server import HttpServer


@pytest.fixture
def no_thread_errors(monkeypatch):
    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    return errors


def test_stopping_with_a_request_in_flight_answers_it_and_reports_nothing(caplog, no_thread_errors):
    app = Flask("slow")
    arrived = threading.Event()

    @app.get("/slow")
    def slow():
        arrived.set()
        time.sleep(0.5)  # still being served when stop() comes
        return "done"

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
    assert no_thread_errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.fixture
def tls(tmp_path):
    """A CA, and the endpoint's certificate and key files as cert-manager lays them out."""
    ca = trustme.CA()
    files = {"ca": tmp_path / "ca.crt", "cert": tmp_path / "tls.crt", "key": tmp_path / "tls.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))

    def issue():
        leaf = ca.issue_cert("127.0.0.1", "localhost")
        for name, blob in (("cert", leaf.cert_chain_pems[0]), ("key", leaf.private_key_pem)):
            renewed = files[name].with_suffix(".new")  # written beside, then moved in: as a Secret volume swaps
            blob.write_to_path(str(renewed))
            os.replace(renewed, files[name])
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())).hexdigest()

    files["issue"] = issue
    return files


def served_certificate(port: int, ca_file) -> str:
    context = ssl.create_default_context(cafile=str(ca_file))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls_socket:
            return hashlib.sha256(tls_socket.getpeercert(binary_form=True)).hexdigest()


def hello_app() -> Flask:
    app = Flask("hello")
    app.get("/hello")(lambda: "hello")
    return app


def test_https_serves_the_certificate_and_a_renewed_one_from_the_next_connection(tls, caplog, no_thread_errors):
    caplog.set_level(logging.INFO, logger="quota_sidecar.serve.http_server")
    first = tls["issue"]()
    server = HttpServer(hello_app(), "127.0.0.1", 0, tls=(str(tls["cert"]), str(tls["key"]))).start()
    try:
        context = ssl.create_default_context(cafile=str(tls["ca"]))
        with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/hello", context=context, timeout=5) as answer:
            assert answer.read() == b"hello"
        assert served_certificate(server.port, tls["ca"]) == first

        renewed = tls["issue"]()
        assert renewed != first and served_certificate(server.port, tls["ca"]) == renewed
        assert any("reloaded" in record.getMessage() for record in caplog.records)
    finally:
        server.stop()
    assert no_thread_errors == []


def test_a_renewal_caught_half_written_keeps_the_pair_in_force_with_one_warning(tls, caplog):
    first = tls["issue"]()
    server = HttpServer(hello_app(), "127.0.0.1", 0, tls=(str(tls["cert"]), str(tls["key"]))).start()
    try:
        tls["key"].write_text("-----BEGIN PRIVATE KEY-----\n")  # the key's new file, not all written yet
        assert served_certificate(server.port, tls["ca"]) == first
        assert served_certificate(server.port, tls["ca"]) == first
    finally:
        server.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "does not load" in warnings[0] and "the previous pair stays" in warnings[0]
    assert "BEGIN PRIVATE KEY" not in warnings[0]


def test_plain_http_on_the_tls_port_is_turned_away_without_a_traceback(tls, caplog, no_thread_errors):
    tls["issue"]()
    server = HttpServer(hello_app(), "127.0.0.1", 0, tls=(str(tls["cert"]), str(tls["key"]))).start()
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/hello", timeout=5).read()
        assert not isinstance(refused.value, urllib.error.HTTPError) or refused.value.code == 400
    finally:
        server.stop()
    assert no_thread_errors == []
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]


def test_a_pair_that_does_not_load_stops_the_start_with_one_line_naming_the_files(tls, tmp_path):
    """Checked before anything starts (host_checks.check_host): an encrypted key, a file that is no key, a key of
    another certificate. Never a prompt for a password, never the key's content."""
    from cryptography.hazmat.primitives import serialization

    import builders
    from quota_sidecar.common.errors import ConfigError
    from quota_sidecar.observe.host_checks import check_host

    tls["issue"]()
    key = serialization.load_pem_private_key(tls["key"].read_bytes(), None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"secret")))
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key")
    other = tmp_path / "other.key"
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other))
    for key_file, says in ((encrypted, "the key is encrypted"), (garbage, "cannot load them"),
                           (other, "cannot load them")):
        config = builders.sidecar_config(**{"http.port": 0, "http.tls.cert.file": tls["cert"],
                                            "http.tls.key.file": key_file})
        with pytest.raises(ConfigError) as refused:
            check_host(config)
        message = str(refused.value)
        assert "\n" not in message and str(key_file) in message and says in message, message
        assert "PRIVATE KEY" not in message
