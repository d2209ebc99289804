"""The operator's `kafka.admin.*` properties, as Java clients spell them, translated into kafka-python's keyword
arguments: security (SASL PLAIN/SCRAM from the JAAS line, TLS from PEM files or PEM stores) included. A key
kafka-python cannot honour stops the start with one line naming it.

Pure: nothing here imports kafka-python or talks to anyone.
"""

from __future__ import annotations

import re
import ssl
from typing import Callable, Mapping

from ..common.errors import ConfigError
from .properties import (ADMIN_PREFIX, PREFIX, SIDECAR_CLIENT_ID, non_negative_int, parse_value, positive_int,
                         readable_file, value_error)


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
    _check_tls_files(props, kwargs)
    return kwargs


def _check_tls_files(props: Mapping[str, str], kwargs: Mapping[str, object]) -> None:
    """The PEM files loaded as each TLS connection will load them: one that does not stops the start now, naming
    the key that gave it, rather than every handshake failing later."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cafile, certfile = kwargs.get("ssl_cafile"), kwargs.get("ssl_certfile")
    if cafile:
        key = "ssl.cafile" if "ssl.cafile" in props else "ssl.truststore.location"
        try:
            context.load_verify_locations(cafile)
        except ssl.SSLError as error:
            raise _config_error(key, props[key], f"a file of PEM certificates ({error.reason or error})") from None
    if certfile:
        key = "ssl.certfile" if "ssl.certfile" in props else "ssl.keystore.location"
        try:
            context.load_cert_chain(certfile, kwargs.get("ssl_keyfile"), kwargs.get("ssl_password"))
        except ssl.SSLError as error:
            raise _config_error(key, props[key], "a PEM certificate and its key (in it, or in ssl.keyfile; "
                                f"encrypted with ssl.key.password): {error.reason or error}") from None


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

