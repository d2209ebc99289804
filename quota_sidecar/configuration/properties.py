"""Java-style property values: the prefixes, the value parsers with what each allows, secret masking, reading
a properties file (admin_client.py translates the `kafka.admin.*` keys into kafka-python's arguments).

Pure: nothing here imports kafka-python or talks to anyone, so a configuration is checked whole at
start-up, and `evaluate` never loads a Kafka client.
"""

from __future__ import annotations

import io
import math
import re
from datetime import timedelta
from typing import Callable

import isodate
import jproperties

from ..common.errors import ConfigError

PREFIX = "client.quota.callback.static."
ADMIN_PREFIX = "kafka.admin."
SECRET_WORDS = ("password", "secret", "jaas", "token", "key")
MASK = "******"
# The client id of the sidecar's own clients (kafka.admin.client.id overrides it); quotas exempt it.
SIDECAR_CLIENT_ID = "quota-sidecar"


def is_secret(key: str) -> bool:
    """True for keys whose values must never be shown: passwords, JAAS configs, tokens, keys."""
    return any(word in key.lower() for word in SECRET_WORDS)


def shown(key: str, value: object) -> str:
    return MASK if is_secret(key) else repr(value)


# ---------------------------------------------------------------- value parsers
# Each takes the raw string and returns the typed value or raises ValueError("what is allowed").

def _number(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError
    return value


def ranged(convert: Callable[[str], float], accepts: Callable[[float], bool], allowed: str):
    """A parser: `convert` the raw string, then refuse what `accepts` does not."""
    def parse(raw: str):
        value = convert(raw)
        if not accepts(value):
            raise ValueError
        return value
    parse.allowed = allowed
    return parse


positive_number = ranged(_number, lambda v: v > 0, "a number > 0")
non_negative_int = ranged(int, lambda v: v >= 0, "a whole number >= 0")
positive_int = ranged(int, lambda v: v > 0, "a whole number > 0")
ratio = ranged(_number, lambda v: 0.0 <= v <= 1.0, "a number from 0.0 to 1.0")
percent = ranged(_number, lambda v: 0.0 < v <= 100.0, "a percentage above 0 and at most 100")
non_negative_percent = ranged(_number, lambda v: 0.0 <= v <= 100.0, "a percentage from 0 to 100")
port = ranged(int, lambda v: 0 <= v <= 65535, "a port from 0 to 65535 (0 picks a free port)")


_SHORT_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(raw: str) -> timedelta:
    """A duration of days or less, short (30s, 5m, 2h, 1d) or ISO-8601 (PT30S, P1D); months and years have no fixed
    length."""
    text = raw.strip()
    short = _SHORT_DURATION.fullmatch(text.lower())
    value = (timedelta(seconds=float(short.group(1)) * _UNIT_SECONDS[short.group(2)]) if short is not None
             else isodate.parse_duration(text))
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise ValueError
    return value


duration.allowed = "a duration such as 30s, 5m, 1d or ISO-8601 PT30S, P1D (no months or years, not negative)"


def path_list(raw: str) -> tuple[str, ...]:
    """Comma-separated absolute paths, as Kafka's log.dirs."""
    paths = tuple(item.strip() for item in raw.split(",") if item.strip())
    if not all(path.startswith("/") for path in paths):
        raise ValueError
    return paths


path_list.allowed = "comma-separated absolute paths"


_JVM_SIZE = re.compile(r"(\d+)([mg])")
MIN_DRIVER_MIB = 512  # Spark refuses a driver whose heap is under 450 MiB (its own 300 MiB reserve and half again)


def driver_memory(raw: str) -> str:
    """A Spark driver's heap as Spark writes it (512m, 2g), at least MIN_DRIVER_MIB."""
    size = _JVM_SIZE.fullmatch(raw.strip().lower())
    if size is None or int(size.group(1)) * (1024 if size.group(2) == "g" else 1) < MIN_DRIVER_MIB:
        raise ValueError
    return size.group(0)


driver_memory.allowed = f"a heap in MiB or GiB such as 512m or 2g, at least {MIN_DRIVER_MIB}m"


def positive_duration(raw: str) -> timedelta:
    value = duration(raw)
    if value <= timedelta(0):
        raise ValueError
    return value


positive_duration.allowed = "a duration longer than zero such as 10s, 1m or ISO-8601 PT10S, PT1M (no months or years)"


def command_line_duration(raw: str, bare_seconds: bool = False) -> timedelta:
    """A duration as `positive_duration` takes it; a bare number is seconds where `bare_seconds`."""
    text = raw.strip()
    if bare_seconds and re.fullmatch(r"\d+(?:\.\d+)?", text):
        text = f"{text}s"
    return positive_duration(text)


command_line_duration.allowed = "a duration longer than zero such as 30s, 5m, 2h, 30d, PT30S or P30D"


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError
    return lowered == "true"


boolean.allowed = "true or false"


def text(raw: str) -> str:
    return raw.strip()


text.allowed = "text"


def principal_list(raw: str) -> tuple[str, ...]:
    """`User:alice;User:CN=my-cluster,O=io.strimzi` -> ("CN=my-cluster,O=io.strimzi", "alice")."""
    names = []
    for entry in (part.strip() for part in raw.split(";")):
        if not entry:
            continue
        kind, sep, name = entry.partition(":")
        if kind != "User" or not sep or not name:
            raise ValueError
        names.append(name)
    return tuple(sorted(set(names)))


principal_list.allowed = "a ';'-separated list of 'User:<name>' entries (empty for none)"


def principal(raw: str) -> str | None:
    """`User:CN=quota-sidecar,O=ops` -> "CN=quota-sidecar,O=ops"; empty -> None."""
    if not raw.strip():
        return None
    names = principal_list(raw)
    if len(names) != 1:
        raise ValueError
    return names[0]


principal.allowed = "one 'User:<name>' (empty for none)"

_HOST_PORT = r"[A-Za-z0-9._-]+:\d{1,5}"
_SPARK_URLS = (
    re.compile(r"sc://[A-Za-z0-9._-]+(:\d{1,5})?(/(;[^;=\s]+=[^;\s]*)*)?"),  # Spark Connect
    re.compile(r"local(\[(\d+|\*)(,\d+)?\])?"),
    re.compile(rf"spark://{_HOST_PORT}(,{_HOST_PORT})*"),
    re.compile(r"yarn"),
    re.compile(r"k8s://\S+"),
)


def spark_url(raw: str) -> str:
    """Where the decisions run: empty (embedded), a Spark Connect URL or a Spark master URL."""
    url = raw.strip()
    if url and not any(pattern.fullmatch(url) for pattern in _SPARK_URLS):
        raise ValueError
    return url


spark_url.allowed = ("empty (embedded), sc://host[:port][/;param=value...] (Spark Connect), or a master URL: "
                     "local[N], spark://host:port[,host:port], yarn, k8s://...")


def host(raw: str) -> str:
    """A host name or an IP address (IPv6 without brackets); whether it can be listened on is checked at start."""
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z0-9._:-]+", value):
        raise ValueError
    return value


host.allowed = "a host name or an IP address to listen on"


def zookeeper_connect(raw: str) -> str:
    """The broker's zookeeper.connect syntax: host:port[,host:port...][/chroot]; empty for none."""
    value = raw.strip()
    if value and not re.fullmatch(r"[A-Za-z0-9._-]+:\d{1,5}(,[A-Za-z0-9._-]+:\d{1,5})*(/[A-Za-z0-9._/-]*[^/])?", value):
        raise ValueError
    return value


zookeeper_connect.allowed = "empty (off), or host:port[,host:port...][/chroot] as in the broker's zookeeper.connect"


def state_store(raw: str) -> str:
    value = raw.strip()
    if value not in ("topic", "zookeeper"):
        raise ValueError
    return value


state_store.allowed = "topic (the compacted topic __quota_sidecar_state) or zookeeper (needs zookeeper.connect)"


def token(raw: str) -> str:
    """A bearer token: printable ASCII without spaces, as an HTTP header carries it."""
    value = raw.strip()
    if not re.fullmatch(r"[\x21-\x7e]*", value):
        raise ValueError
    return value


token.allowed = "printable ASCII without spaces (empty for none)"


def optional_readable_file(raw: str) -> str:
    """readable_file, or empty for none."""
    return readable_file(raw) if raw.strip() else ""


optional_readable_file.allowed = "empty (none), or a file this process can read"


def optional_port(raw: str) -> int | None:
    return port(raw) if raw.strip() else None


optional_port.allowed = "empty (none), or a port from 0 to 65535 (0 picks a free port)"


def readable_file(raw: str) -> str:
    """A path to a file this process can read, checked now rather than at the first connection."""
    path = raw.strip()
    if not path:
        raise ValueError
    try:
        with open(path, "rb"):
            pass
    except OSError:
        raise ValueError from None
    return path


readable_file.allowed = "the path of a readable file"


def parse_value(full_key: str, raw: str, parse: Callable[[str], object]) -> object:
    """`parse(raw)`, or the one-line ConfigError naming the key, the value (masked if secret) and what is allowed."""
    try:
        return parse(raw)
    except (ValueError, TypeError, isodate.ISO8601Error):
        raise value_error(full_key, raw, parse.allowed) from None


def value_error(full_key: str, raw: str | None, allowed: str) -> ConfigError:
    given = " is missing" if raw is None else f"={shown(full_key, raw)}"
    return ConfigError(f"{full_key}{given}: expected {allowed}")


def read_properties(path: str) -> dict[str, str]:
    """A Java-style .properties file (comments, continuations, escapes) as a plain dict."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ConfigError(f"cannot read configuration file {path}: {error.strerror}") from None
    props = jproperties.Properties()
    props.load(io.BytesIO(raw), "utf-8")
    return {key: value.data for key, value in props.items()}
