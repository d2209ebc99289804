"""Loopback ports for the lab's brokers, servers and sidecars."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Below the kernel's ephemeral range: no bind(0) and no outgoing connection is ever given one of these, so a
# port picked here stays free until its server binds it (an embedded Spark's accumulator server, bind(0), once
# took the port picked for a sidecar's HTTP endpoint in between).
LOWEST = 10_000


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_loopback_ports(count: int) -> list[int]:
    """Ports free now, each different, from below the ephemeral range (see LOWEST)."""
    first_ephemeral = ephemeral_range()[0]
    found: list[int] = []
    for port in random.sample(range(LOWEST, first_ephemeral), first_ephemeral - LOWEST):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free loopback ports between {LOWEST} and {first_ephemeral}")


def closed_port() -> int:
    """A loopback port nobody listens on: a connection to it is refused."""
    return free_loopback_ports(1)[0]
