"""The typed errors the sidecar raises; callers decide by type, never by message."""


class ConfigError(ValueError):
    """A configuration value is invalid. The message is one line naming the key, the value and what is allowed."""


class AdminError(Exception):
    """Talking to the Kafka cluster failed."""


class RetryableAdminError(AdminError):
    """A failure that may pass: a timeout, a broker not available, a leader that moved."""


class PermanentAdminError(AdminError):
    """A failure that retrying will not fix: no authorization, an unsupported request, a bad argument."""


class AuthorizationRefused(PermanentAdminError):
    """Kafka's authorizer refused a request. `apis`: the Kafka APIs the failed call may have sent (one for an admin
    request; a client's read or write sends several); `resource_kind`: CLUSTER, TOPIC, GROUP...; `topics`: the
    refused topics when known. Its message is the one line refusals.py makes of it."""

    def __init__(self, message: str, apis: tuple[str, ...], resource_kind: str, topics: frozenset[str] = frozenset()):
        super().__init__(message)
        self.apis, self.resource_kind, self.topics = apis, resource_kind, topics


class UnknownTopicError(PermanentAdminError):
    """The topic does not exist (any more): deleted, or never created."""


class PassTimeout(AdminError):
    """A pass (a poll, a replication pass, `status --direct`) ran out of its deadline (deadline.py).

    Never retried within the pass: the next pass starts with a deadline of its own.
    """


class SparkUnavailable(Exception):
    """The Spark of `spark.url` cannot start here (an embedded or in-process driver): `evaluate` and `plan`
    stop, exit code 2.

    A shared Spark Connect server that does not answer is no such error: that poll fails, the next retries.
    """


class DecisionFailed(RuntimeError):
    """A decision failed: no answer from the aggregator in time (pipeline/transport.py), or in the Spark of
    `evaluate` (spark_jobs/judges.py); the message is one line saying why. That poll fails, the next retries."""


class HandedBack(Exception):
    """`quota-sidecar cleanup` handed back what the sidecars set while this agent ran: it writes nothing more."""
