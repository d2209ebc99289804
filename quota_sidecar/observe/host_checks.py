"""What only this host can say about the configuration, checked before the sidecar starts anything."""

from __future__ import annotations

import errno
import os
import socket

from ..common.errors import ConfigError
from ..configuration import config as configuration
from .netstats import host_interfaces


def check_host(config: configuration.SidecarConfig) -> None:
    """What only this host can say about the configuration, checked before anything starts: ConfigError
    when the HTTP endpoint cannot listen where asked, the network interface to measure or a log dir named
    for the local watch does not exist."""
    error = check_can_listen(config.http_host, config.http_port)
    if error is not None:
        raise ConfigError(listen_error(config, error))
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
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as waitress does
            probe.bind(address)
    except OSError as error:
        return error
    return None


def listen_error(config: configuration.SidecarConfig, error: OSError) -> str:
    key, value = ("http.port", config.http_port) if error.errno == errno.EADDRINUSE else ("http.host", config.http_host)
    why = "host not found" if isinstance(error, socket.gaierror) else (error.strerror or str(error)).lower()
    return (f"{configuration.PREFIX}{key}={value!r}: cannot listen on {config.http_host}:{config.http_port} "
            f"({why}); expected a free port of an address of this host")
