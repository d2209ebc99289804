"""admin_client.client_kwargs: the kafka.admin.* keys as Java clients spell them -> kafka-python's arguments."""

import tempfile
from pathlib import Path

import pytest
import trustme

from quota_sidecar.common.errors import ConfigError
from quota_sidecar.configuration.admin_client import client_kwargs

FULL = "client.quota.callback.static.kafka.admin."
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";'
BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}
SASL = {**BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
SSL = {**BOOTSTRAP, "security.protocol": "SSL"}
PEM = __file__  # any readable file, where the key's file is not loaded (ssl.crlfile)
# PEM files that load: a CA, a certificate with its key apart and in one file (a PEM keystore).
_FILES, _CA = Path(tempfile.mkdtemp(prefix="quota-sidecar-pem-")), trustme.CA()
CA, CERT, KEY, KEYSTORE = (str(_FILES / name) for name in ("ca.pem", "cert.pem", "key.pem", "keystore.pem"))
_CA.cert_pem.write_to_path(CA)
_LEAF = _CA.issue_cert("quota-sidecar")
_LEAF.cert_chain_pems[0].write_to_path(CERT)
_LEAF.private_key_pem.write_to_path(KEY)
_LEAF.private_key_and_cert_chain_pem.write_to_path(KEYSTORE)
_ENCRYPTED_KEY = str(_FILES / "encrypted-key.pem")  # its password is not hunter2


def _encrypted(key_pem: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(b"the right one"))


Path(_ENCRYPTED_KEY).write_bytes(_encrypted(_LEAF.private_key_pem.bytes()))


@pytest.mark.parametrize("props, expected", [
    (BOOTSTRAP, {"bootstrap_servers": ["127.0.0.1:9092"], "security_protocol": "PLAINTEXT"}),
    ({"bootstrap.servers": " a:1, b:2 ,"}, {"bootstrap_servers": ["a:1", "b:2"]}),
    ({**BOOTSTRAP, "client.id": "sidecar-1"}, {"client_id": "sidecar-1"}),
    ({**BOOTSTRAP, "request.timeout.ms": "5000"}, {"request_timeout_ms": 5000}),
    ({**BOOTSTRAP, "retry.backoff.ms": "0"}, {"retry_backoff_ms": 0}),
    ({**BOOTSTRAP, "reconnect.backoff.ms": "20"}, {"reconnect_backoff_ms": 20}),
    ({**BOOTSTRAP, "reconnect.backoff.max.ms": "2000"}, {"reconnect_backoff_max_ms": 2000}),
    ({**BOOTSTRAP, "metadata.max.age.ms": "60000"}, {"metadata_max_age_ms": 60000}),
    ({**BOOTSTRAP, "connections.max.idle.ms": "300000"}, {"connections_max_idle_ms": 300000}),
    ({**BOOTSTRAP, "receive.buffer.bytes": "-1"}, {"receive_buffer_bytes": None}),
    ({**BOOTSTRAP, "send.buffer.bytes": "131072"}, {"send_buffer_bytes": 131072}),
    ({**BOOTSTRAP, "security.protocol": "ssl"}, {"security_protocol": "SSL"}),
    ({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.location": CA}, {"ssl_cafile": CA}),
    ({**SSL, "ssl.keystore.type": "PEM", "ssl.keystore.location": KEYSTORE, "ssl.key.password": "k"},
     {"ssl_certfile": KEYSTORE, "ssl_password": "k"}),
    ({**SSL, "ssl.endpoint.identification.algorithm": ""}, {"ssl_check_hostname": False}),
    ({**SSL, "ssl.endpoint.identification.algorithm": "https"}, {"ssl_check_hostname": True}),
    ({**SSL, "ssl.cafile": CA, "ssl.certfile": CERT, "ssl.keyfile": KEY, "ssl.crlfile": PEM},
     {"ssl_cafile": CA, "ssl_certfile": CERT, "ssl_keyfile": KEY, "ssl_crlfile": PEM}),
    ({**SASL, "sasl.jaas.config": PLAIN_JAAS},
     {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
      "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}),
    ({**SASL, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS},
     {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
      "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}),
    ({**SASL, "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS}, {"sasl_mechanism": "SCRAM-SHA-256"}),
    # unquoted values, an escaped quote, a line break: as Java's JAAS parser reads them
    ({**SASL, "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                                  '  username=alice password="p\\"w";'},
     {"sasl_plain_username": "alice", "sasl_plain_password": 'p"w'}),
], ids=lambda value: None)
def test_client_kwargs_accepts(props, expected):
    kwargs = client_kwargs(props)
    assert {key: kwargs[key] for key in expected} == expected


@pytest.mark.parametrize("props, message", [
    ({}, "bootstrap.servers is missing: expected a comma-separated list of host:port"),
    ({"bootstrap.servers": " , "}, "bootstrap.servers=' , ': expected a comma-separated list"),
    ({**BOOTSTRAP, "retries": "5"}, "retries='5': expected one of the keys kafka-python's admin client honours"),
    ({**BOOTSTRAP, "default.api.timeout.ms": "1"}, "default.api.timeout.ms='1': expected one of the keys"),
    ({**BOOTSTRAP, "security.protocol": "TLS"}, "security.protocol='TLS': expected PLAINTEXT or SSL or SASL_PLAINTEXT"),
    ({**BOOTSTRAP, "request.timeout.ms": "0"}, "request.timeout.ms='0': expected a whole number > 0"),
    ({**BOOTSTRAP, "request.timeout.ms": "soon"}, "request.timeout.ms='soon': expected a whole number > 0"),
    ({**BOOTSTRAP, "retry.backoff.ms": "-5"}, "retry.backoff.ms='-5': expected a whole number >= 0"),
    ({**BOOTSTRAP, "send.buffer.bytes": "0"}, "send.buffer.bytes='0': expected a whole number > 0, or -1"),
    ({**BOOTSTRAP, "client.id": " "}, "client.id=' ': expected a non-empty value"),
    ({**SSL, "ssl.endpoint.identification.algorithm": "ldap"},
     "ssl.endpoint.identification.algorithm='ldap': expected https (check the broker's host name) or empty"),
    ({**SSL, "ssl.truststore.type": "JKS", "ssl.truststore.location": "/ts.jks"},
     "ssl.truststore.type='JKS': expected PEM (kafka-python reads PEM files only"),
    ({**SSL, "ssl.truststore.location": "/ts.jks"},
     "ssl.truststore.location='/ts.jks': expected a PEM file, with ssl.truststore.type=PEM (the Java default is JKS)"),
    ({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.location": "/a.pem", "ssl.cafile": PEM},
     "ssl.truststore.location='/a.pem': expected either ssl.truststore.location or ssl.cafile, not both"),
    ({**BOOTSTRAP, "ssl.cafile": "/ca.pem"}, "ssl.cafile='/ca.pem': expected no ssl.* keys with security.protocol=PLAINTEXT"),
    ({**SSL, "ssl.cafile": "/no/such/ca.pem"}, "ssl.cafile='/no/such/ca.pem': expected the path of a readable file"),
    ({**SSL, "ssl.crlfile": "/"}, "ssl.crlfile='/': expected the path of a readable file"),  # a directory
    ({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.location": "/no/ts.pem"},
     "ssl.truststore.location='/no/ts.pem': expected the path of a readable file"),
    ({**SSL, "sasl.mechanism": "PLAIN"}, "sasl.mechanism='PLAIN': expected no sasl.* keys with security.protocol=SSL"),
    ({**SASL, "sasl.mechanism": "GSSAPI", "sasl.jaas.config": PLAIN_JAAS},
     "sasl.mechanism='GSSAPI': expected PLAIN or SCRAM-SHA-256 or SCRAM-SHA-512 with SASL_PLAINTEXT"),
    ({**BOOTSTRAP, "security.protocol": "SASL_SSL", "sasl.jaas.config": PLAIN_JAAS},
     "sasl.mechanism is missing: expected PLAIN or SCRAM-SHA-256 or SCRAM-SHA-512 with SASL_SSL"),
    (SASL, "sasl.jaas.config is missing: expected org.apache.kafka.common.security.plain.PlainLoginModule required"),
    ({**SASL, "sasl.jaas.config": SCRAM_JAAS}, "sasl.jaas.config=******: expected org.apache.kafka.common.security.plain"),
    ({**SASL, "sasl.jaas.config": PLAIN_JAAS.replace(";", ' tokenauth="true";')}, "sasl.jaas.config=******: expected"),
    ({**SASL, "sasl.jaas.config": PLAIN_JAAS.replace(' password="alice-secret"', "")}, "sasl.jaas.config=******: expected"),
    ({**SASL, "sasl.jaas.config": PLAIN_JAAS.rstrip(";")}, "sasl.jaas.config=******: expected"),
    ({**BOOTSTRAP, "ssl.key.password": "hunter2"}, "ssl.key.password=******: expected no ssl.* keys"),
    # files that do not load as TLS will load them, at start rather than at every handshake
    ({**SSL, "ssl.cafile": PEM}, f"ssl.cafile={PEM!r}: expected a file of PEM certificates (NO_CERTIFICATE_OR_CRL_FOUND)"),
    ({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.location": KEY},
     f"ssl.truststore.location={KEY!r}: expected a file of PEM certificates"),
    ({**SSL, "ssl.cafile": CA, "ssl.certfile": CERT, "ssl.keyfile": CA},
     f"ssl.certfile={CERT!r}: expected a PEM certificate and its key (in it, or in ssl.keyfile; encrypted with "
     "ssl.key.password): "),
    ({**SSL, "ssl.certfile": CERT, "ssl.keyfile": _ENCRYPTED_KEY, "ssl.key.password": "hunter2"},
     f"ssl.certfile={CERT!r}: expected a PEM certificate and its key"),
], ids=lambda value: value.replace(str(_FILES), "<pem files>") if isinstance(value, str) else None)  # one id a worker
def test_client_kwargs_rejects(props, message):
    with pytest.raises(ConfigError) as raised:
        client_kwargs(props)
    text = str(raised.value)
    assert text.startswith(FULL) and message in text
    assert "\n" not in text
    for secret in ("alice-secret", "bob-secret", "hunter2"):
        assert secret not in text


