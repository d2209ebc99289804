"""How the sidecar uses kafka-python: clients opened so that a failed bootstrap leaves no thread behind,
failures and error codes turned into the typed errors of errors.py, and its DEBUG logs kept quiet.

Every failure leaves as a RetryableAdminError (it may pass: timeouts, brokers down, leaders moving) or
a PermanentAdminError (retrying will not help: authorization, unsupported versions, bad requests).
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient

from .errors import AdminError, PermanentAdminError, RetryableAdminError, UnknownTopicError

# kafka-python's DEBUG records dump client configurations and whole requests, SASL passwords included
# (SaslAuthenticateRequest). Unless someone chose a level for them, its loggers stay at INFO.
if logging.getLogger("kafka").level == logging.NOTSET:
    logging.getLogger("kafka").setLevel(logging.INFO)

# kafka-python marks these as not retriable, yet they pass: a broker that is restarting or not yet known.
_ALSO_RETRYABLE = (Errors.BrokerNotAvailableError, Errors.UnknownBrokerIdError, OSError)


def admin_error(error: Exception, what: str) -> AdminError:
    """The typed error for a kafka-python (or socket) failure while doing `what`."""
    if isinstance(error, AdminError):
        return error
    if isinstance(error, Errors.UnknownTopicOrPartitionError):  # retriable for kafka-python; final for a deleted topic
        return UnknownTopicError(f"{what} failed: {error}")
    retryable = getattr(error, "retriable", False) or isinstance(error, _ALSO_RETRYABLE)
    return (RetryableAdminError if retryable else PermanentAdminError)(f"{what} failed: {error}")


def error_for_code(code: int, message: str | None, what: str) -> AdminError | None:
    error_class = Errors.for_code(code)
    if error_class is Errors.NoError:
        return None
    return admin_error(error_class(message or error_class.description), what)


def raise_any(errors: Iterable[AdminError | None]) -> None:
    """Raise the errors of one or several entries as one; permanent if any is permanent."""
    errors = [error for error in errors if error is not None]
    if not errors:
        return
    if len(errors) == 1:
        raise errors[0]  # keeps its type (UnknownTopicError, ...)
    kind = PermanentAdminError if any(isinstance(e, PermanentAdminError) for e in errors) else RetryableAdminError
    raise kind("; ".join(str(error) for error in errors))


def error_name(code: int) -> str | None:
    error_class = Errors.for_code(code)
    if error_class is Errors.NoError:
        return None
    return error_class.message if error_class.errno == code else f"UNKNOWN_ERROR_CODE_{code}"



def open_client(client_class, client_config: Mapping[str, object]):
    """A bootstrapped kafka-python client (admin, producer or consumer); AdminError when that fails.

    kafka-python starts a client's IO thread before bootstrapping and leaves it running when bootstrap
    fails, so the net client is captured here and closed on failure.
    """
    created: list[KafkaNetClient] = []

    def net_client(**configs) -> KafkaNetClient:
        created.append(KafkaNetClient(**configs))
        return created[-1]

    try:
        return client_class(**client_config, kafka_client=net_client)
    except Exception as error:
        for client in created:
            client.close()
            client._net.stop()
        if isinstance(error, (Errors.KafkaError, OSError)):
            raise admin_error(error, f"connecting to {client_config.get('bootstrap_servers')}") from error
        raise
