"""What only this host can say about the configuration, checked before the sidecar starts anything."""

from __future__ import annotations

import errno
import os
import socket
import ssl

from ..common.errors import ConfigError
from ..configuration import config as configuration
from .netstats import host_interfaces


def check_host(config: configuration.SidecarConfig) -> None:
    """What only this host can say about the configuration, checked before anything starts: ConfigError
    when the HTTP endpoint cannot listen where asked or its TLS pair does not load, the network interface to
    measure or a log dir named for the local watch does not exist."""
    for key, port in (("http.port", config.http_port), ("http.plain.port", config.http_plain_port)):
        error = None if port is None else check_can_listen(config.http_host, port)
        if error is not None:
            raise ConfigError(listen_error(config, error, key, port))
    if config.http_tls is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(*config.http_tls, password=b"")
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(tls_error(config, error)) from None
    interface = config.replication.network_interface
    if interface and interface not in host_interfaces():
        raise ConfigError(f"{configuration.PREFIX}replication.network.interface={interface!r}: expected a network "
                          f"interface of this host: {', '.join(sorted(host_interfaces()))}")
    # Dirs named for the watch must be here; those of the broker's file may be on another host (said at run).
    # A dir whose parent is here is the broker's not yet: on a new volume, a sidecar that starts before the
    # broker formats it must not exit (the watch says so once and watches the dir from when it appears).
    missing = [path for path in config.local_watch.log_dirs
               if not os.path.isdir(path) and not os.path.isdir(os.path.dirname(path.rstrip("/")))]
    if config.local_watch.named and missing:
        raise ConfigError(f"{configuration.PREFIX}storage.local.log.dirs={','.join(config.local_watch.log_dirs)}: "
                          f"expected directories of this host, or to be made in one; not one: {', '.join(missing)}")


def check_can_listen(host: str, port: int) -> OSError | None:
    """Why the HTTP endpoint could not listen on host:port, or None when it can (the port is not kept)."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server (cheroot) does
            probe.bind(address)
    except OSError as error:
        return error
    return None


def listen_error(config: configuration.SidecarConfig, error: OSError, port_key: str = "http.port",
                 port: int | None = None) -> str:
    port = config.http_port if port is None else port
    key, value = (port_key, port) if error.errno == errno.EADDRINUSE else ("http.host", config.http_host)
    why = "host not found" if isinstance(error, socket.gaierror) else (error.strerror or str(error)).lower()
    return (f"{configuration.PREFIX}{key}={value!r}: cannot listen on {config.http_host}:{port} "
            f"({why}); expected a free port of an address of this host")


def tls_error(config: configuration.SidecarConfig, error: Exception) -> str:
    """The endpoint's certificate and key do not load: which files, and OpenSSL's reason (never their content)."""
    cert, key = config.http_tls
    why = getattr(error, "reason", None) or getattr(error, "strerror", None) or str(error)
    try:
        with open(key, "rb") as key_file:
            if b"ENCRYPTED" in key_file.read(4096):  # a header line says so; the key itself is never shown
                why = "the key is encrypted: give it unencrypted, as a Kubernetes TLS Secret holds it"
    except OSError:
        pass
    return (f"{configuration.PREFIX}http.tls.cert.file={cert!r} and {configuration.PREFIX}http.tls.key.file={key!r}: "
            f"cannot load them as a certificate and its key ({why}); expected PEM files, the key the certificate's")
