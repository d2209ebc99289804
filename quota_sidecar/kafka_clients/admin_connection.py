"""The connection every admin call goes through: one kafka-python admin client, opened on first use, whose
connection manager sends the protocol requests (admin_requests.py); retries within the pass's deadline; the
controller found for the requests that go to it; the cluster's live brokers and id. The calls themselves are
grouped by what they read and write (log_dirs.py, client_quotas.py, configs.py, topics.py) and joined in
admin.ClusterAdmin.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

import kafka.errors as Errors
import tenacity
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeClusterRequest

from ..common import deadline
from ..common.errors import AdminError, RetryableAdminError
from . import admin_requests as requests
from .kafka_client import admin_error, attempt, error_for_code, open_client, raise_any, wait_for, with_cause

CONTROLLER = object()  # _send's node_id for the controller
# Any broker answers well within this; one cut off would hold a quota write for the whole request timeout while a
# flood fills a disk.
ANY_BROKER_TIMEOUT_MS = 2000


class AdminConnection:
    """Talks to one Kafka cluster. Connects on first use, so a sidecar starts while Kafka is down.

    Each call retries retryable failures for up to `retry_deadline` seconds (backoff with jitter) and never
    past the pass's deadline (deadline.py), bootstrap included; then it raises the last failure (PassTimeout
    when a request had no answer yet). The sidecar loop treats a failed call as a failed poll.
    """

    def __init__(self, client_config: Mapping[str, object], retry_deadline: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep):
        self._client_config = dict(client_config)
        self._client: KafkaAdminClient | None = None
        self._connecting = threading.Lock()  # the loop and the HTTP thread may both make the first call
        self._controller_moved = False  # a broker answered NOT_CONTROLLER: ask the metadata again
        self._cluster_id: str | None = None
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_delay(retry_deadline) | (lambda _: deadline.expired()),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=1.0),  # backoff with full jitter
            retry=tenacity.retry_if_exception_type(RetryableAdminError),  # PassTimeout is not one
            sleep=lambda seconds: sleep(deadline.capped(seconds)),
            reraise=True,
        )

    def __repr__(self) -> str:  # never the whole configuration: it holds passwords
        return (f"{type(self).__name__}(bootstrap_servers={self._client_config.get('bootstrap_servers')!r}, "
                f"security_protocol={self._client_config.get('security_protocol', 'PLAINTEXT')!r})")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def live_broker_ids(self) -> list[int]:
        """The brokers registered and not fenced, sorted."""
        return self._call("DescribeCluster", self._live_broker_ids)

    def cluster_id(self) -> str:
        """The cluster's id (KIP-78), as DescribeCluster names it; asked once."""
        if self._cluster_id is None:
            self.live_broker_ids()
        return self._cluster_id

    async def _live_broker_ids(self) -> list[int]:
        response = await self._send(DescribeClusterRequest(include_fenced_brokers=False), "DescribeCluster")
        raise_any([error_for_code(response.error_code, response.error_message, "DescribeCluster")])
        self._cluster_id = response.cluster_id
        return sorted(broker.broker_id for broker in response.brokers if not broker.is_fenced)

    async def _controller_id(self) -> int | None:
        if self._manager.cluster.controller is None or self._controller_moved:
            await self._manager.cluster.refresh_metadata()
            self._controller_moved = False
        controller = self._manager.cluster.controller
        return None if controller is None else controller.node_id

    @property
    def _manager(self):
        return self._client._manager

    @property
    def _timeout_ms(self) -> int:
        return self._client.config["request_timeout_ms"]

    def _call(self, what: str, coroutine, *args):
        """Run `coroutine` on the client's IO thread, retrying retryable failures until the deadline."""
        failures: list[AdminError] = []  # when the deadline runs out, the last of them is the reason given
        try:
            return self._retrying(attempt, lambda: wait_for(self._connected()._manager.call_soon(coroutine, *args),
                                                            what), what, failures)
        except AdminError as error:
            raise with_cause(error, self._client_config) from error

    def _connected(self) -> KafkaAdminClient:
        with self._connecting:
            if self._client is None:
                self._client = open_client(KafkaAdminClient, self._client_config,
                                           deadline.left(doing="connecting to the cluster"))
            return self._client

    async def _send(self, request, what: str, node_id: int | object | None = None, passing: tuple = ()):
        """Send one request (to node_id, else to the least loaded broker, within ANY_BROKER_TIMEOUT_MS); failures
        name `what`, but for the kafka-python errors `passing`, raised as they are.

        node_id CONTROLLER: to the controller the metadata names, as Kafka's Java admin client sends topic and
        reassignment requests. A KRaft broker forwards them from anywhere; a ZooKeeper-mode broker that is
        not the controller answers NOT_CONTROLLER, and the retry goes where fresh metadata points.
        """
        try:
            to_controller = node_id is CONTROLLER
            if to_controller:
                node_id = await self._controller_id()
            if node_id is not None and self._manager.cluster.broker_metadata(node_id) is None:
                # A broker that just joined: the connection manager only reaches brokers its metadata knows.
                await self._manager.cluster.refresh_metadata()
            timeout_ms = min(ANY_BROKER_TIMEOUT_MS, self._timeout_ms) if node_id is None else None  # then retried
            response = await self._manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)
            self._controller_moved |= to_controller and requests.not_controller(response)
            return response
        except passing:
            raise
        except (Errors.KafkaError, OSError) as error:
            raise admin_error(error, what) from error
