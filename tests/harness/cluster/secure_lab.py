"""The lab speaking production: Kafka's StandardAuthorizer with allow.everyone.if.no.acl.found=false,
SCRAM-SHA-512 over SASL_SSL, mutual TLS on an SSL listener, and certificates made here (trustme: a CA, one
broker certificate whose names cover every broker's address, a client certificate per principal), all PEM. None
is committed: each lab makes its own in its work dir.

    security = SecureLab(work_dir, scram_users={"quota-sidecar": "s3cret"})
    with LocalKafkaCluster(brokers=3, security=security) as cluster:
        admin = cluster.admin_properties()          # the lab's super user (User:ANONYMOUS, PLAINTEXT)
        sidecar = security.sasl_ssl_properties(cluster, "quota-sidecar")   # kafka.admin.* for the product

The PLAINTEXT listener stays for the lab's own set-up (topics, ACLs): its principal, User:ANONYMOUS, is a super
user, as are the brokers and controllers talking to each other over it. What the product is given is SASL_SSL or
SSL, where only ACLs count.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Mapping

import trustme

from quota_sidecar.act.acl_writes import kafka_acl

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM = "SCRAM-SHA-512"
SECURE_LISTENERS = ("SASL_SSL", "SSL")  # the listener names are their protocols
# The operator's own admin over SASL_SSL, a super user: what `quota-sidecar acls --apply --command-config` runs as.
LAB_ADMIN = "lab-admin"


@dataclass
class SecureLab:
    work_dir: Path
    scram_users: Mapping[str, str] = field(default_factory=dict)  # name -> password, made when storage is formatted
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost")  # every address a broker listens on (a netns IP too)

    def __post_init__(self):
        self.scram_users = {**self.scram_users, LAB_ADMIN: secrets.token_urlsafe(12)}
        self.work_dir = Path(self.work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="quota-sidecar lab")
        self.ca_file = self.work_dir / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        broker = self.ca.issue_cert(*self.hosts)
        self.broker_keystore = self.work_dir / "broker.pem"  # key and chain in one file: Kafka's PEM keystore
        self.broker_keystore.write_bytes(_pkcs8(broker.private_key_pem.bytes()) +
                                         b"".join(blob.bytes() for blob in broker.cert_chain_pems))

    # -- the brokers -----------------------------------------------------------------------------

    def broker_properties(self) -> dict[str, str]:
        """server.properties of every broker, beside the listeners LocalKafkaCluster writes for SECURE_LISTENERS."""
        return {
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            # PLAINTEXT: the lab itself, inter-broker traffic and the controllers; and the operator's admin
            "super.users": f"User:ANONYMOUS;User:{LAB_ADMIN}",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,  # SASL_PLAINTEXT keeps PLAIN alone
            f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",  # User:<CN>, as many operators map
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
        }

    def format_arguments(self) -> list[str]:
        """kafka-storage format's --add-scram for every SCRAM user: the credentials exist before the first start."""
        return [argument for name, password in sorted(self.scram_users.items())
                for argument in ("--add-scram", f"{SCRAM}=[name={name},password={password}]")]

    # -- the clients -----------------------------------------------------------------------------

    def client_certificate(self, common_name: str, not_after: datetime | None = None) -> tuple[Path, Path]:
        """(certificate, key) files of a client certificate for mutual TLS, whose principal is User:<common_name>
        (the brokers' ssl.principal.mapping.rules); `not_after` in the past: an expired one. Named in its SAN too:
        trustme leaves an empty SAN otherwise, which Java refuses ("bad certificate")."""
        not_before = None if not_after is None else not_after - timedelta(days=30)
        leaf = self.ca.issue_cert(common_name, common_name=common_name, not_before=not_before, not_after=not_after)
        cert, key = self.work_dir / f"{common_name}.crt", self.work_dir / f"{common_name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key

    def sasl_ssl_properties(self, bootstrap_servers: str, user: str) -> dict[str, str]:
        """kafka.admin.* (without the prefix) for `user` over SCRAM-SHA-512 and TLS, the host name verified."""
        return {
            "bootstrap.servers": bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM,
            "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                f'username="{user}" password="{self.scram_users[user]}";',
            "ssl.cafile": str(self.ca_file),
        }

    def mtls_properties(self, bootstrap_servers: str, common_name: str) -> dict[str, str]:
        """kafka.admin.* (without the prefix) for User:<common_name> over mutual TLS."""
        cert, key = self.client_certificate(common_name)
        return {"bootstrap.servers": bootstrap_servers, "security.protocol": "SSL", "ssl.cafile": str(self.ca_file),
                "ssl.certfile": str(cert), "ssl.keyfile": str(key)}

    def java_client_properties(self, bootstrap_servers: str, user: str) -> dict[str, str]:
        """The same for Kafka's own tools (kafka-configs, kafka-acls, ProducerPerformance): PEM truststore."""
        python = self.sasl_ssl_properties(bootstrap_servers, user)
        del python["ssl.cafile"]
        return {**python, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}


def _pkcs8(key_pem: bytes) -> bytes:
    """The key in PKCS#8, the only form Kafka's PEM keystore reads (trustme writes OpenSSL's traditional one)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def grant(plaintext_bootstrap: str, acls: list[dict]) -> int:
    """The ACLs `quota-sidecar acls --json` printed (for the watched cluster and the pipeline's: here one), created
    as the lab's super user (PLAINTEXT): exactly those. Returns how many."""
    from kafka import KafkaAdminClient

    wanted = [kafka_acl(entry) for entry in acls]
    with KafkaAdminClient(bootstrap_servers=plaintext_bootstrap) as admin:
        result = admin.create_acls(wanted)
    if result["failed"]:
        raise RuntimeError(f"creating the ACLs failed: {result['failed']}")
    return len(wanted)


def revoke(plaintext_bootstrap: str, acls: list[dict]) -> None:
    """Delete ACLs printed by `quota-sidecar acls --json`, as the lab's super user; each must have been there."""
    from kafka import KafkaAdminClient, errors

    with KafkaAdminClient(bootstrap_servers=plaintext_bootstrap) as admin:
        for deleted in admin.delete_acls([kafka_acl(entry) for entry in acls]):
            _, matched, error = deleted
            if error is not errors.NoError or len(matched) != 1:
                raise RuntimeError(f"deleting an ACL failed: {deleted}")
