"""Loopback ports for the lab's brokers, servers and sidecars."""

from __future__ import annotations

import socket


def free_loopback_ports(count: int) -> list[int]:
    """Ports the kernel finds free, all held at once so they differ, released just before the caller binds.

    Linux hands out odd ports for bind(0) and even ones for outgoing connections, so a connection
    opened in between rarely takes one of them.
    """
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def closed_port() -> int:
    """A loopback port nobody listens on: a connection to it is refused."""
    return free_loopback_ports(1)[0]
