"""How the sidecar uses kafka-python: clients opened so that a failed bootstrap leaves no thread behind,
failures and error codes turned into the typed errors of errors.py, and its DEBUG logs kept quiet.

Every failure leaves as a RetryableAdminError (it may pass: timeouts, brokers down, leaders moving) or
a PermanentAdminError (retrying will not help: authorization, unsupported versions, bad requests).
"""

from __future__ import annotations

import errno
import logging
import re
import socket
import threading
from typing import Callable, Iterable, Mapping

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient

from ..common import deadline
from ..common.errors import (AdminError, AuthorizationRefused, PassTimeout, PermanentAdminError, RetryableAdminError,
                             UnknownTopicError)
from ..common.refusals import REFUSALS
from .tls_probe import tls_refused

log = logging.getLogger(__name__)
# kafka-python's DEBUG records dump client configurations and whole requests, SASL passwords included
# (SaslAuthenticateRequest). Unless someone chose a level for them, its loggers stay at INFO.
if logging.getLogger("kafka").level == logging.NOTSET:
    logging.getLogger("kafka").setLevel(logging.INFO)

# How long a bootstrap server may take to accept a probe's connection, at most.
PROBE_TIMEOUT = 3.0

# kafka-python marks these as not retriable, yet they pass: a broker that is restarting or not yet known.
_ALSO_RETRYABLE = (Errors.BrokerNotAvailableError, Errors.UnknownBrokerIdError, OSError)
# kafka-python 3.0's consumer hangs a callback on each fetch in flight at every poll that waits for records. A fetch
# that no answer comes to (its broker cut off or paused: no reset) keeps them all, with each timed-out wait's error,
# traceback and frames, until request.timeout.ms (30 s by default): at many polls a second, megabytes the agent's
# memory keeps as a step after the cut. A fetch is answered within fetch.max.wait.ms
# (0.5 s): the consumers that poll often (for_frequent_polls) give up on one after 5 s.
FREQUENT_POLLS_REQUEST_TIMEOUT_MS = 5_000
# The Kafka APIs a consumer's read and a producer's write send: a refusal of either names them (admin_error).
CONSUMING, PRODUCING = ("Metadata", "ListOffsets", "Fetch"), ("Metadata", "Produce")
# The resource each authorization error of Kafka's protocol names.
_REFUSED_RESOURCE = {Errors.TopicAuthorizationFailedError: "TOPIC", Errors.ClusterAuthorizationFailedError: "CLUSTER",
                     Errors.GroupAuthorizationFailedError: "GROUP",
                     Errors.TransactionalIdAuthorizationFailedError: "TRANSACTIONAL_ID"}


def admin_error(error: Exception, what: str, apis: tuple[str, ...] = ()) -> AdminError:
    """The typed error for a kafka-python (or socket) failure while doing `what`, a request named by its Kafka API
    first ("DescribeConfigs of topic 'x'"), else by `apis`, those a client's call sends (Metadata, Fetch...)."""
    if isinstance(error, AdminError):
        return error
    if isinstance(error, Errors.AuthorizationError):
        kind = next((k for cls, k in _REFUSED_RESOURCE.items() if isinstance(error, cls)), type(error).__name__)
        topics = frozenset()
        if kind == "TOPIC":  # the consumer names the topics in a set, the producer's sender the one topic
            named = error.args[0] if error.args else ()
            topics = frozenset({named} if isinstance(named, str) else named) | frozenset(re.findall(r"'([^']+)'", what))
        return REFUSALS.refused(AuthorizationRefused(f"{what} failed: {error}", apis or (what.split()[0],),
                                                     kind, topics))
    if isinstance(error, Errors.UnknownTopicOrPartitionError):  # retriable for kafka-python; final for a deleted topic
        return UnknownTopicError(f"{what} failed: {error}")
    retryable = getattr(error, "retriable", False) or isinstance(error, _ALSO_RETRYABLE)
    return (RetryableAdminError if retryable else PermanentAdminError)(f"{what} failed: {error}")


def for_frequent_polls(consumer_config: Mapping[str, object]) -> dict[str, object]:
    """A consumer's configuration for polls every few tens of ms: its requests time out after 5 s at most."""
    timeout = int(consumer_config.get("request_timeout_ms", FREQUENT_POLLS_REQUEST_TIMEOUT_MS))
    return {**consumer_config, "request_timeout_ms": min(timeout, FREQUENT_POLLS_REQUEST_TIMEOUT_MS)}


def error_for_code(code: int, message: str | None, what: str) -> AdminError | None:
    error_class = Errors.for_code(code)
    if error_class is Errors.NoError:
        return None
    if issubclass(error_class, Errors.AuthorizationError):  # its one argument, when any, names the refused topics
        return admin_error(error_class(), what)
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


def attempt(run: Callable[[], object], what: str, failures: list[AdminError]):
    """One attempt of `run()`, its failure typed and kept in `failures`. Once the pass's deadline has run out,
    the last failure is the reason given (connection refused...), rather than that time ran out."""
    try:
        if failures and deadline.expired():
            raise failures[-1]
        return run()
    except PassTimeout:
        if failures:
            raise failures[-1] from None
        raise
    except (Errors.KafkaError, OSError, RetryableAdminError) as error:
        failures.append(admin_error(error, what))
        raise failures[-1] from error


def wait_for(future, what: str):
    """The value of a kafka-python future, waited for until the pass's deadline (without one: until done)."""
    done = threading.Event()
    future.add_both(lambda _: done.set())
    if not done.wait(deadline.left(doing=what)):
        raise deadline.timed_out(f"waiting for the answer to {what}")
    if future.exception is not None:
        raise future.exception
    return future.value


def open_client(client_class, client_config: Mapping[str, object], timeout: float | None = None):
    """A bootstrapped kafka-python client (admin, producer or consumer); AdminError when that fails.

    `timeout` (seconds) caps the bootstrap, back-offs included. The bootstrap servers are probed first
    with a plain connection: when none accepts one, the error says why (refused, host not found, no
    answer) at once, instead of kafka-python retrying until the timeout; over TLS, why the handshake fails
    (tls_probe.py). kafka-python starts a client's IO thread before bootstrapping and leaves it running when
    bootstrap fails, so the net client is captured here and closed on failure.
    """
    servers = _servers(client_config.get("bootstrap_servers"))
    probe_timeout = PROBE_TIMEOUT if timeout is None else min(PROBE_TIMEOUT, timeout)
    why = unreachable_because(servers, probe_timeout)
    if why is not None:
        raise RetryableAdminError(why)
    refused = tls_refused(servers, client_config, probe_timeout)
    if refused is not None:  # no retry fixes a certificate: the next pass asks again
        raise PermanentAdminError(refused)
    client_config = dict(client_config)
    if timeout is not None:
        bootstrap_ms = int(client_config.get("bootstrap_timeout_ms", 30_000))
        client_config["bootstrap_timeout_ms"] = max(1, min(bootstrap_ms, int(timeout * 1000)))
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
            raise admin_error(error, f"connecting to {', '.join(servers)}") from error
        raise


def close_clients(consumer, producer, topic: str, timeout: float) -> None:
    """Close a consumer and a producer (either may be None), the producer within `timeout`: a write stuck
    behind a throttle must not keep a stopping sidecar alive."""
    if consumer is not None:
        consumer.close(autocommit=False)
    if producer is not None:
        try:
            producer.close(timeout=timeout)
        except Errors.KafkaTimeoutError:  # kafka-python raises when records are still pending
            log.warning("closing the producer of %s timed out after %.0fs; pending writes dropped", topic, timeout)


def with_cause(error: AdminError, client_config: Mapping[str, object]) -> AdminError:
    """`error`, or the reason no bootstrap server can be reached when that is why a call failed or timed out
    (a cluster that went away fails its calls with timeouts and "node not ready", which do not say so)."""
    if not isinstance(error, (RetryableAdminError, PassTimeout)):
        return error
    left = deadline.time_left()  # a probe may overrun a deadline that passed by 0.2 s at most
    why = unreachable_because(_servers(client_config.get("bootstrap_servers")),
                              PROBE_TIMEOUT if left is None else max(0.2, min(PROBE_TIMEOUT, left)))
    return error if why is None or str(error) == why else RetryableAdminError(why)


def unreachable_because(servers: Iterable[str], timeout: float) -> str | None:
    """Why none of the `host:port` servers accepts a TCP connection, or None when one does."""
    reasons = []
    for server in servers:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except ValueError:
            reasons.append(f"{server} (not host:port)")
        except OSError as error:
            reasons.append(f"{server} ({_reason(error)})")
    if not reasons:
        return None
    return "cannot reach any bootstrap server " + ", ".join(reasons)


def _reason(error: OSError) -> str:
    if isinstance(error, socket.gaierror):
        return "host not found"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, TimeoutError) or error.errno == errno.ETIMEDOUT:
        return "no answer: connection timed out"
    return error.strerror or type(error).__name__


def _servers(configured) -> list[str]:
    if isinstance(configured, str):
        configured = configured.split(",")
    return [server.strip() for server in configured or () if server.strip()]
