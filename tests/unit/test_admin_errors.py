"""Kafka's errors as the sidecar sees them, and an admin client's arguments checked before it connects."""

import kafka.errors as Errors
import pytest

from quota_sidecar.common.errors import PermanentAdminError, RetryableAdminError, UnknownTopicError
from quota_sidecar.configuration.admin_client import client_kwargs
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.kafka_clients.kafka_client import admin_error

SASL = {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'


@pytest.mark.parametrize("error, kind", [
    (Errors.KafkaTimeoutError("bootstrap"), RetryableAdminError),
    (Errors.NodeNotReadyError(3), RetryableAdminError),
    (Errors.KafkaConnectionError("reset"), RetryableAdminError),
    (Errors.RequestTimedOutError(), RetryableAdminError),
    (Errors.NotControllerError(), RetryableAdminError),
    (Errors.BrokerNotAvailableError(), RetryableAdminError),
    (Errors.UnknownBrokerIdError(7), RetryableAdminError),
    (ConnectionRefusedError(111, "refused"), RetryableAdminError),
    (Errors.SaslAuthenticationFailedError(), PermanentAdminError),
    (Errors.UnsupportedVersionError(), PermanentAdminError),
    (Errors.InvalidRequestError(), PermanentAdminError),
    (Errors.InvalidConfigurationError(), PermanentAdminError),
    (Errors.UnknownTopicOrPartitionError(), UnknownTopicError),
])
def test_admin_error_kinds(error, kind):
    mapped = admin_error(error, "DescribeLogDirs to broker 3")
    assert type(mapped) is kind
    assert str(mapped).startswith("DescribeLogDirs to broker 3 failed: ")


def test_repr_and_arguments_need_no_connection():
    admin = ClusterAdmin(client_kwargs({**SASL, "sasl.jaas.config": PLAIN_JAAS}))
    assert "alice-secret" not in repr(admin)
    with pytest.raises(ValueError, match="resource_type 'group'"):
        admin.describe_configs("group", ["g"])
    with pytest.raises(ValueError, match="AlterConfigOp"):
        admin.incremental_alter_configs("topic", "t", {"retention.ms": ("REPLACE", "1")})
    admin.close()
