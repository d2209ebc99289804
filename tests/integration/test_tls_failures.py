"""TLS to the brokers: a CA that did not sign the broker's certificate, a host name its certificate does
not carry, an expired client certificate on a mutual-TLS listener. Each is one line naming the file and the cause,
from `status --direct`, which reads the cluster as a pass does (tests/harness/cluster/secure_lab.py makes the certificates);
with the right files its requests reach the authorizer. No key or password in what it says.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone

import pytest
import trustme

from harness.cluster.secure_lab import SecureLab
from harness.agents.sidecar_process import EXECUTABLE
from quota_sidecar.configuration.properties import ADMIN_PREFIX, PREFIX

pytestmark = [pytest.mark.integration, pytest.mark.security]

USER, PASSWORD = "quota-sidecar", "s3cret-agent"


def status_direct(tmp_path, name: str, client: dict[str, str]) -> subprocess.CompletedProcess:
    config = tmp_path / f"{name}.properties"
    config.write_text("".join(f"{PREFIX}{ADMIN_PREFIX}{key}={value}\n" for key, value in client.items())
                      + f"{PREFIX}storage.per.volume.limit.min.available.ratio=0.1\n")
    return subprocess.run([str(EXECUTABLE), "status", "--direct", "--config", str(config), "--timeout", "20"],
                          capture_output=True, text=True, timeout=120)


def test_a_wrong_ca_a_host_name_mismatch_and_an_expired_certificate_are_each_one_line(make_kafka_cluster, tmp_path):
    # The brokers' certificate names 127.0.0.1 only: reached as localhost, the name does not match.
    security = SecureLab(tmp_path / "tls", scram_users={USER: PASSWORD}, hosts=("127.0.0.1",))
    cluster = make_kafka_cluster(brokers=1, security=security)
    sasl, mtls = cluster.secure_bootstrap_servers(), cluster.secure_bootstrap_servers("SSL")
    other_ca = tmp_path / "another-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    expired, expired_key = security.client_certificate(USER, not_after=datetime.now(timezone.utc) - timedelta(days=1))
    mutual = {"bootstrap.servers": mtls, "security.protocol": "SSL", "ssl.cafile": str(security.ca_file)}

    cases = {
        "wrong-ca": ({**security.sasl_ssl_properties(sasl, USER), "ssl.cafile": str(other_ca)},
                     ["the broker's certificate is refused: unable to get local issuer certificate",
                      f"ssl.cafile={other_ca}"]),
        "host-name": (security.sasl_ssl_properties(sasl.replace("127.0.0.1", "localhost"), USER),
                      ["Hostname mismatch, certificate is not valid for 'localhost'",
                       "the host in bootstrap.servers must be one of the certificate's names"]),
        "expired": ({**mutual, "ssl.certfile": str(expired), "ssl.keyfile": str(expired_key)},
                    [f"the broker refuses this client's certificate, ssl.certfile={expired}"]),
    }
    for name, (client, says) in cases.items():
        done = status_direct(tmp_path, name, client)
        assert done.returncode == 1 and done.stdout == "", (name, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, (name, done.stderr)
        for part in says:
            assert part in done.stderr, (name, done.stderr)
        assert PASSWORD not in done.stderr and "PRIVATE KEY" not in done.stderr

    # With the right files the requests reach the authorizer, which refuses them: the principal has no ACL here.
    valid, valid_key = security.client_certificate(USER)
    for name, client in {"sasl-ssl": security.sasl_ssl_properties(sasl, USER),
                         "mutual-tls": {**mutual, "ssl.certfile": str(valid), "ssl.keyfile": str(valid_key)}}.items():
        done = status_direct(tmp_path, name, client)
        assert done.returncode == 1 and "on TOPIC __quota_sidecar_state refused for" in done.stderr, (name, done.stderr)
