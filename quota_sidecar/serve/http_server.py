"""The HTTP endpoint's listeners: cheroot serving the app, over plain HTTP or TLS, each in a daemon thread.

TLS: the certificate and key (PEM) are read again when either file changes, as cert-manager renews them in
place (a Secret volume swaps a symlink): a connection after the change gets the new certificate, one before it
kept the old. Files that do not load (caught half-written) leave the old pair in force, with one WARNING.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter

log = logging.getLogger(__name__)

NO_PASSWORD = b""  # an encrypted key fails to load (one line) rather than OpenSSL prompting on a terminal


class ReloadingTls(BuiltinSSLAdapter):
    """cheroot's adapter for Python's ssl, which loads the pair again before a handshake once a file changed."""

    def __init__(self, cert_file: str, key_file: str):
        super().__init__(cert_file, key_file, private_key_password=NO_PASSWORD)
        self.loaded = self._stamp()
        self.refused: tuple | None = None  # the files' stamp whose loading failed (warned once)
        self.lock = threading.Lock()

    def wrap(self, sock):
        self.reload_if_changed()
        return super().wrap(sock)

    def reload_if_changed(self) -> None:
        try:
            stamp = self._stamp()
        except OSError as error:
            stamp = ("unreadable", str(error))
        if stamp in (self.loaded, self.refused):
            return
        with self.lock:
            try:
                self.context.load_cert_chain(self.certificate, self.private_key, password=NO_PASSWORD)
            except (OSError, ssl.SSLError) as error:
                self.refused = stamp
                log.warning("TLS certificate %s or key %s changed but does not load (%s): the previous pair stays "
                            "in force", self.certificate, self.private_key, error)
                return
            self.loaded = stamp
            log.info("TLS certificate %s and key %s reloaded", self.certificate, self.private_key)

    def _stamp(self) -> tuple:
        """What changes when a file is replaced or rewritten: each one's inode, size and modification time."""
        return tuple((info.st_ino, info.st_size, info.st_mtime_ns)
                     for info in map(os.stat, (self.certificate, self.private_key)))


class HttpServer:
    """cheroot serving `app` on host:port (0: a free port, then `port` is the bound one); with `tls` (certificate
    file, key file) over TLS only. Binding happens here: OSError when the port is taken."""

    def __init__(self, app, host: str, port: int, tls: tuple[str, str] | None = None):
        self.server = wsgi.Server((host, port), app, numthreads=4, server_name="quota-sidecar")
        self.server.error_log = _error_log
        if tls is not None:
            self.server.ssl_adapter = ReloadingTls(*tls)
        self.server.prepare()
        self.host, self.port = host, self.server.socket.getsockname()[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.server.serve, name=f"{self.scheme}-{self.port}", daemon=True)

    def start(self, routes: str = "/metrics, /status, /healthz, /readyz, /throttle") -> HttpServer:
        self.thread.start()
        log.info("HTTP endpoint on %s://%s:%d (%s)", self.scheme, self.host, self.port, routes)
        return self

    def stop(self) -> None:
        """Requests in flight are answered first (up to cheroot's shutdown timeout, 5 s)."""
        self.server.stop()
        self.thread.join(timeout=10)


def _error_log(msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
    """cheroot's own complaints (a client that hung up, one speaking plain HTTP to TLS) in the sidecar's log, at
    their level; a traceback only at DEBUG."""
    log.log(level, "%s", msg.strip() or "cheroot error")
    if traceback:
        log.debug("cheroot traceback", exc_info=True)
