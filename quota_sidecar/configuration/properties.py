"""Java-style property values: the prefixes, the value parsers with what each allows, secret masking, and
the operator's `kafka.admin.*` admin client properties translated into kafka-python keyword arguments.

Pure: nothing here imports kafka-python or talks to anyone, so a configuration is checked whole at
start-up, and `evaluate` never loads a Kafka client.
"""

from __future__ import annotations

import io
import math
import re
from datetime import timedelta
from typing import Callable, Mapping

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


def duration(raw: str) -> timedelta:
    """An ISO-8601 duration of days or less (PT1M, PT30S, P1D); months and years have no fixed length."""
    value = isodate.parse_duration(raw.strip())
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise ValueError
    return value


duration.allowed = "an ISO-8601 duration such as PT30S, PT5M or P1D (no months or years, not negative)"


def path_list(raw: str) -> tuple[str, ...]:
    """Comma-separated absolute paths, as Kafka's log.dirs."""
    paths = tuple(item.strip() for item in raw.split(",") if item.strip())
    if not all(path.startswith("/") for path in paths):
        raise ValueError
    return paths


path_list.allowed = "comma-separated absolute paths"


def positive_duration(raw: str) -> timedelta:
    value = duration(raw)
    if value <= timedelta(0):
        raise ValueError
    return value


positive_duration.allowed = "an ISO-8601 duration longer than zero, such as PT10S or PT1M (no months or years)"


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


# ---------------------------------------------------------------- Java admin properties -> kafka-python


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError
    return raw.strip()


_text.allowed = "a non-empty value"


def _socket_buffer(raw: str) -> int | None:
    value = int(raw)
    if value == -1:
        return None  # as in Java: the operating system's default
    if value <= 0:
        raise ValueError
    return value


_socket_buffer.allowed = "a whole number > 0, or -1 for the operating system's default"


def _hostname_check(raw: str) -> bool:
    if raw.strip().lower() not in ("https", ""):
        raise ValueError
    return raw.strip() != ""


_hostname_check.allowed = "https (check the broker's host name) or empty (do not)"

# Java key -> (kafka-python keyword, parser with an `allowed` text)
_RENAMED_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "client.id": ("client_id", _text),
    "request.timeout.ms": ("request_timeout_ms", positive_int),
    "retry.backoff.ms": ("retry_backoff_ms", non_negative_int),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", non_negative_int),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", non_negative_int),
    "metadata.max.age.ms": ("metadata_max_age_ms", positive_int),
    "connections.max.idle.ms": ("connections_max_idle_ms", positive_int),
    "receive.buffer.bytes": ("receive_buffer_bytes", _socket_buffer),
    "send.buffer.bytes": ("send_buffer_bytes", _socket_buffer),
    "ssl.key.password": ("ssl_password", _text),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", _hostname_check),
    # kafka-python's own PEM settings, for what the Java keys cannot say (a separate key file, a CRL)
    "ssl.cafile": ("ssl_cafile", readable_file),
    "ssl.certfile": ("ssl_certfile", readable_file),
    "ssl.keyfile": ("ssl_keyfile", readable_file),
    "ssl.crlfile": ("ssl_crlfile", readable_file),
}
# Keys read together with others below.
_GROUPED_KEYS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
                 "ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# `<LoginModule> <flag> name="value" name=value ... ;` as Java's JAAS parser reads it.
_JAAS_VALUE = r'"(?:[^"\\]|\\.)*"|[^\s";]+'
_JAAS_OPTION = re.compile(rf'([\w.-]+)\s*=\s*({_JAAS_VALUE})')
_JAAS = re.compile(rf'\s*(\S+)\s+(?:required|requisite|sufficient|optional)'
                   rf'((?:\s+[\w.-]+\s*=\s*(?:{_JAAS_VALUE}))*)\s*;\s*')


def client_kwargs(java_props: Mapping[str, str]) -> dict:
    """kafka-python client keyword arguments for the Java admin client properties an operator wrote.

    Raises ConfigError naming the full key of the first property that kafka-python cannot honour.
    """
    props = dict(java_props)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _SECURITY_PROTOCOLS:
        raise _config_error("security.protocol", props["security.protocol"], " or ".join(_SECURITY_PROTOCOLS))
    kwargs = {"bootstrap_servers": _bootstrap_servers(props.get("bootstrap.servers")),
              "security_protocol": protocol, "client_id": SIDECAR_CLIENT_ID}
    for key, raw in props.items():
        _check_protocol_uses(key, raw, protocol)
        if key in _RENAMED_KEYS:
            name, parse = _RENAMED_KEYS[key]
            kwargs[name] = _parse(key, raw, parse)
        elif key not in _GROUPED_KEYS:
            raise _config_error(key, raw, "one of the keys kafka-python's admin client honours: "
                                + ", ".join(sorted([*_GROUPED_KEYS, *_RENAMED_KEYS])))
    kwargs.update(_sasl_kwargs(props, protocol))
    kwargs.update(_pem_store_kwargs(props, "truststore", "ssl.cafile"))
    kwargs.update(_pem_store_kwargs(props, "keystore", "ssl.certfile"))
    return kwargs


def _config_error(key: str, raw: str | None, allowed: str) -> ConfigError:
    return value_error(PREFIX + ADMIN_PREFIX + key, raw, allowed)


def _parse(key: str, raw: str, parse: Callable[[str], object]) -> object:
    return parse_value(PREFIX + ADMIN_PREFIX + key, raw, parse)


def _bootstrap_servers(raw: str | None) -> list[str]:
    servers = [server.strip() for server in (raw or "").split(",") if server.strip()]
    if not servers:
        raise _config_error("bootstrap.servers", raw, "a comma-separated list of host:port")
    return servers


def _check_protocol_uses(key: str, raw: str, protocol: str) -> None:
    """An ssl.* or sasl.* key the chosen protocol would ignore is a mistake worth stopping for."""
    if key.startswith("ssl.") and protocol not in ("SSL", "SASL_SSL"):
        raise _config_error(key, raw, f"no ssl.* keys with security.protocol={protocol} (only with SSL or SASL_SSL)")
    if key.startswith("sasl.") and not protocol.startswith("SASL_"):
        raise _config_error(key, raw, f"no sasl.* keys with security.protocol={protocol} "
                                      "(only with SASL_PLAINTEXT or SASL_SSL)")


def _sasl_kwargs(props: Mapping[str, str], protocol: str) -> dict:
    if not protocol.startswith("SASL_"):
        return {}
    mechanism = props.get("sasl.mechanism")
    if mechanism not in _LOGIN_MODULES:
        raise _config_error("sasl.mechanism", mechanism, " or ".join(_LOGIN_MODULES) + f" with {protocol}")
    username, password = _jaas_credentials(props.get("sasl.jaas.config"), mechanism)
    return {"sasl_mechanism": mechanism, "sasl_plain_username": username, "sasl_plain_password": password}


def _jaas_credentials(raw: str | None, mechanism: str) -> tuple[str, str]:
    module = _LOGIN_MODULES[mechanism]
    allowed = f'{module} required username="..." password="..."; (sasl.mechanism={mechanism}; no other options)'
    match = _JAAS.fullmatch(raw or "")
    if not match or match.group(1) != module:
        raise _config_error("sasl.jaas.config", raw, allowed)
    options = {name: _unquote(value) for name, value in _JAAS_OPTION.findall(match.group(2))}
    if set(options) != {"username", "password"}:
        raise _config_error("sasl.jaas.config", raw, allowed)
    return options["username"], options["password"]


def _unquote(value: str) -> str:
    if value.startswith('"'):
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _pem_store_kwargs(props: Mapping[str, str], store: str, native_key: str) -> dict:
    """ssl.<store>.location, accepted only for PEM stores: kafka-python cannot read JKS or PKCS12."""
    location_key, type_key = f"ssl.{store}.location", f"ssl.{store}.type"
    store_type = props.get(type_key)
    if store_type is not None and store_type.strip().upper() != "PEM":
        raise _config_error(type_key, store_type, "PEM (kafka-python reads PEM files only; convert the store)")
    if location_key not in props:
        return {}
    if store_type is None:
        raise _config_error(location_key, props[location_key],
                            f"a PEM file, with {type_key}=PEM (the Java default is JKS)")
    if native_key in props:
        raise _config_error(location_key, props[location_key], f"either {location_key} or {native_key}, not both")
    return {_RENAMED_KEYS[native_key][0]: _parse(location_key, props[location_key], readable_file)}

