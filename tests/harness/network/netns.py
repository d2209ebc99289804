"""A small test network: one network namespace per host, each behind a rate-limited link of its own.

    with TestNetwork(hosts=[1, 2, 3], rate_bytes_per_sec=6_000_000) as net:
        net.ip(1)                 # "10.231.0.11", an address inside namespace net.namespace(1)
        net.inside_interface(1)   # the namespace's end of its link, e.g. for a sidecar's counters
        net.in_namespace(1, ["java", ...])  # the command, run inside that namespace

Every namespace gets one veth pair: one end inside (address 10.231.<subnet>.<10 + host>/24), the other
end on a bridge in this process's namespace (address 10.231.<subnet>.1/24, so clients and servers
running here reach every host). A token bucket (`tc qdisc ... tbf`) on the egress of both ends makes
the link: the inside end limits what the host sends, the bridge end what it receives. Addresses stay
inside 10.231.0.0/16 on devices made here; nothing leaves the machine.

Needs root (CAP_NET_ADMIN) and `ip`/`tc`; `unavailable_reason()` says why not, for a skip. Everything
made is removed by `destroy()`, which may be called again and runs at interpreter exit too.
"""

from __future__ import annotations

import atexit
import logging
import os
import selectors
import shutil
import socket
import subprocess
import threading
import uuid
from typing import Sequence

log = logging.getLogger(__name__)


class NetworkUnavailable(Exception):
    """Namespaces, veth pairs, bridges or tbf cannot be made here; the message says why."""


def _ip_tc(command: list[str], check: bool = True) -> str | None:
    """Run an `ip` or `tc` command: None when it worked, else its error (raised when check)."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        failure = f"{' '.join(command)}: {error}"
    else:
        if result.returncode == 0:
            return None
        failure = f"{' '.join(command)}: {result.stderr.strip() or f'exit code {result.returncode}'}"
    if check:
        raise NetworkUnavailable(failure)
    return failure


def unavailable_reason() -> str | None:
    """None when this machine lets us make a namespace with a rate-limited veth into it; else why not."""
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); running as uid %d" % os.geteuid()
    tag = uuid.uuid4().hex[:6]
    namespace, outside, inside = f"qs-probe-{tag}", f"qsp{tag}o", f"qsp{tag}i"
    try:
        for command in (["ip", "netns", "add", namespace],
                        ["ip", "link", "add", outside, "type", "veth", "peer", "name", inside],
                        ["ip", "link", "set", inside, "netns", namespace],
                        ["tc", "qdisc", "add", "dev", outside, "root", "tbf", "rate", "8mbit", "burst", "64kb",
                         "latency", "100ms"]):
            failure = _ip_tc(command, check=False)
            if failure is not None:
                return f"cannot make a rate-limited network namespace: {failure}"
        return None
    finally:
        _ip_tc(["ip", "link", "del", outside], check=False)
        _ip_tc(["ip", "netns", "del", namespace], check=False)


class TestNetwork:
    """Namespaces for `hosts` on a bridge, every link limited to `rate_bytes_per_sec` in each direction.

    subnet: the third byte of 10.231.<subnet>.0/24, so that two networks can live side by side.
    burst_bytes, latency_ms: the token bucket's depth and how long a packet may wait in its queue
        (beyond which tbf drops it, and TCP backs off).
    """

    __test__ = False  # not a test class, whatever its name says

    def __init__(self, hosts: Sequence[int], rate_bytes_per_sec: int, *, subnet: int = 0,
                 burst_bytes: int | None = None, latency_ms: int = 100):
        if not 0 <= subnet <= 255 or any(not 1 <= host <= 200 for host in hosts):
            raise ValueError(f"subnet {subnet} must be 0..255 and hosts {list(hosts)} 1..200")
        self.hosts = list(hosts)
        self.subnet = subnet
        self.rate_bytes_per_sec = rate_bytes_per_sec
        self.burst_bytes = burst_bytes
        self.latency_ms = latency_ms
        self.tag = uuid.uuid4().hex[:5]  # interface names are at most 15 characters
        self.bridge = f"qs{self.tag}br"
        self._made_namespaces: list[str] = []
        self._made_links: list[str] = []

    # -- names and addresses ---------------------------------------------------------------------

    @property
    def bridge_ip(self) -> str:
        return f"10.231.{self.subnet}.1"

    def ip(self, host: int) -> str:
        return f"10.231.{self.subnet}.{10 + host}"

    def namespace(self, host: int) -> str:
        return f"qs-{self.tag}-h{host}"

    def inside_interface(self, host: int) -> str:
        """The namespace's end of the host's link: its sent bytes are what the host sent."""
        return f"qs{self.tag}i{host}"

    def outside_interface(self, host: int) -> str:
        """The bridge's end of the host's link: its sent bytes are what the host received."""
        return f"qs{self.tag}o{host}"

    def in_namespace(self, host: int, command: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(host), *command]

    # -- life cycle ------------------------------------------------------------------------------

    def __enter__(self) -> TestNetwork:
        return self.create()

    def __exit__(self, *exc_info) -> None:
        self.destroy()

    def create(self) -> TestNetwork:
        _live_networks.add(self)
        try:
            self._check_subnet_free()
            self._make(["ip", "link", "add", self.bridge, "type", "bridge"], link=self.bridge)
            _ip_tc(["ip", "addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge])
            _ip_tc(["ip", "link", "set", self.bridge, "up"])
            for host in self.hosts:
                self._make_host(host)
            self.set_rate(self.rate_bytes_per_sec)
        except BaseException:
            self.destroy()
            raise
        log.info("test network %s: bridge %s, hosts %s at %d B/s", self.tag, self.bridge_ip,
                 {host: self.ip(host) for host in self.hosts}, self.rate_bytes_per_sec)
        return self

    def _make_host(self, host: int) -> None:
        namespace, inside, outside = self.namespace(host), self.inside_interface(host), self.outside_interface(host)
        self._made_namespaces.append(namespace)
        _ip_tc(["ip", "netns", "add", namespace])
        self._make(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside], link=outside)
        _ip_tc(["ip", "link", "set", inside, "netns", namespace])
        _ip_tc(["ip", "link", "set", outside, "master", self.bridge])
        _ip_tc(["ip", "link", "set", outside, "up"])
        inside_ns = ["ip", "netns", "exec", namespace]
        _ip_tc([*inside_ns, "ip", "link", "set", "lo", "up"])
        _ip_tc([*inside_ns, "ip", "addr", "add", f"{self.ip(host)}/24", "dev", inside])
        _ip_tc([*inside_ns, "ip", "link", "set", inside, "up"])

    def set_rate(self, rate_bytes_per_sec: int) -> None:
        """Limit every link, both ways, to this many bytes/s (replacing the limit in force)."""
        self.rate_bytes_per_sec = rate_bytes_per_sec
        # The bucket holds at least a 64 KiB GSO super-packet, and 20 ms of traffic at this rate.
        burst = self.burst_bytes or max(64 << 10, rate_bytes_per_sec // 50)
        tbf = ["root", "tbf", "rate", f"{rate_bytes_per_sec * 8}bit", "burst", str(burst),
               "latency", f"{self.latency_ms}ms"]
        for host in self.hosts:
            _ip_tc(["ip", "netns", "exec", self.namespace(host),
                    "tc", "qdisc", "replace", "dev", self.inside_interface(host), *tbf])
            _ip_tc(["tc", "qdisc", "replace", "dev", self.outside_interface(host), *tbf])

    def cut(self, host: int) -> None:
        """The host's link down at the bridge's end: nothing in or out of its namespace until `heal`."""
        _ip_tc(["ip", "link", "set", self.outside_interface(host), "down"])

    def heal(self, host: int) -> None:
        _ip_tc(["ip", "link", "set", self.outside_interface(host), "up"])

    def destroy(self) -> None:
        """Remove the namespaces (and the veth ends inside them), the links and the bridge; safe to repeat."""
        for namespace in reversed(self._made_namespaces):
            if _ip_tc(["ip", "netns", "del", namespace], check=False) is not None:
                log.warning("could not remove network namespace %s", namespace)
        self._made_namespaces = []
        for link in reversed(self._made_links):  # a veth goes with its peer; only the bridge is left
            _ip_tc(["ip", "link", "del", link], check=False)
        self._made_links = []
        _live_networks.discard(self)

    def _make(self, command: list[str], link: str) -> None:
        self._made_links.append(link)
        _ip_tc(command)

    def _check_subnet_free(self) -> None:
        addresses = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
        prefix = f" 10.231.{self.subnet}."
        if prefix in addresses:
            raise NetworkUnavailable(f"10.231.{self.subnet}.0/24 is in use already; choose another subnet")


class TcpRelay:
    """Accepts on (host, port) and relays every connection to (target_host, target_port).

    For a service bound to this namespace's loopback (e.g. a Spark Connect server) that processes in the
    test namespaces must reach: they cannot see this namespace's 127.0.0.1, but they reach the bridge.
    """

    def __init__(self, host: str, port: int, target_host: str, target_port: int):
        self.address = (host, port)
        self.target = (target_host, target_port)
        self._listener = socket.create_server(self.address)
        self._selector = selectors.DefaultSelector()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-relay", daemon=True)

    def start(self) -> TcpRelay:
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stopped.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                if key.data is None:
                    self._accept()
                else:
                    self._pump(key.fileobj, key.data)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
            server = socket.create_connection(self.target, timeout=5)
        except OSError as error:
            log.warning("relay %s -> %s: %s", self.address, self.target, error)
            return
        for sock, peer in ((client, server), (server, client)):
            sock.setblocking(True)  # a short blocking sendall is simpler than buffering; the peers are local
            self._selector.register(sock, selectors.EVENT_READ, peer)

    def _pump(self, source: socket.socket, destination: socket.socket) -> None:
        try:
            data = source.recv(1 << 16)
            if data:
                destination.sendall(data)
                return
        except OSError:
            pass
        for sock in (source, destination):  # one side closed: close both
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()


_live_networks: set[TestNetwork] = set()


@atexit.register
def _destroy_live_networks() -> None:
    for network in list(_live_networks):
        network.destroy()
