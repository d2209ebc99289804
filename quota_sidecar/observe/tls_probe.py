"""Why TLS with the brokers fails, in one line naming the file and the cause.

kafka-python logs a failed handshake at each reconnect and its clients then time out, which says neither which
certificate nor why. Before a client bootstraps over SSL or SASL_SSL (kafka_client.open_client), one bootstrap
server is asked once, with the TLS context kafka-python builds from the same settings: the handshake (the broker's
certificate checked against ssl.cafile, its name against the host in bootstrap.servers), then ApiVersions, which
every broker answers before authentication, so that a broker refusing this client's certificate (mutual TLS: an
expired one, another CA's) says so with its alert.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Iterable, Mapping

from kafka.net.transport import KafkaSSLTransport

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_CLIENT_ID = b"quota-sidecar-tls-probe"
# ApiVersions v0 (api key 18), correlation id 0, framed by its size: the request every broker answers first.
_API_VERSIONS = struct.pack(">hhih", 18, 0, 0, len(_CLIENT_ID)) + _CLIENT_ID
_API_VERSIONS = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


def tls_refused(servers: Iterable[str], client_config: Mapping[str, object], timeout: float) -> str | None:
    """Why TLS with the bootstrap `servers` fails with these kafka-python settings, or None: when it works with
    the first that answers, when the settings do not use TLS, or when none answers in time (not TLS's to say)."""
    if str(client_config.get("security_protocol", "PLAINTEXT")).upper() not in TLS_PROTOCOLS:
        return None
    settings = {key: client_config[key] for key in KafkaSSLTransport.DEFAULT_CONFIG if key in client_config}
    try:
        context = KafkaSSLTransport._build_ssl_context({**KafkaSSLTransport.DEFAULT_CONFIG, **settings})
    except (ssl.SSLError, OSError) as error:  # checked at start (admin_client.py); a file replaced since
        files = ", ".join(f"{key}={value}" for key, value in settings.items() if key.endswith("file") and value)
        return f"the TLS settings do not load ({files}): {error}"
    for server in servers:
        try:
            return _refused(server, context, settings, timeout)
        except OSError:  # refused, no answer: the next server
            continue
    return None


def _refused(server: str, context: ssl.SSLContext, settings: Mapping[str, object], timeout: float) -> str | None:
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as plain, \
                context.wrap_socket(plain, server_hostname=host.rstrip(".")) as tls:
            tls.sendall(_API_VERSIONS)
            if not tls.recv(4):
                return f"TLS with {server}: the broker closed the connection after the handshake" + _mine(settings)
    except ssl.SSLCertVerificationError as error:
        trusted = settings.get("ssl_cafile") or "the system's CAs"
        return (f"TLS with {server}: the broker's certificate is refused: {error.verify_message} "
                f"(ssl.cafile={trusted}{_hostname_hint(error)})")
    except ssl.SSLError as error:  # an alert from the broker: it refused this client's certificate, or the protocol
        return f"TLS with {server} failed: {error.reason or error}{_mine(settings)}"
    return None


def _mine(settings: Mapping[str, object]) -> str:
    certificate = settings.get("ssl_certfile")
    return (f" (the broker refuses this client's certificate, ssl.certfile={certificate}: expired, or of a CA it "
            "does not trust?)" if certificate else " (the broker may require a client certificate: ssl.certfile)")


def _hostname_hint(error: ssl.SSLCertVerificationError) -> str:
    mismatch = error.verify_code == 62  # X509_V_ERR_HOSTNAME_MISMATCH
    return "; the host in bootstrap.servers must be one of the certificate's names" if mismatch else ""
