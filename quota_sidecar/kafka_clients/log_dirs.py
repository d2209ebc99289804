"""The admin calls on brokers' log dirs (DescribeLogDirs, AlterReplicaLogDirs): each dir's sizes, the replicas in
it, the moves between a broker's own dirs, and such a move started or cancelled."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Iterable, Mapping

import kafka.errors as Errors
from kafka.protocol.admin import DescribeLogDirsRequest

from ..common.errors import AdminError
from ..common.observation import Volume
from . import admin_requests as requests
from .admin_connection import AdminConnection
from .kafka_client import error_for_code, error_name, raise_any

log = logging.getLogger(__name__)


class LogDirs(AdminConnection):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._said_without_sizes: set[int] = set()  # brokers whose DescribeLogDirs has no sizes, logged once

    def describe_volumes(self, broker_ids: Iterable[int], now: datetime) -> list[Volume]:
        """Every log dir of every given broker with its sizes (KIP-827), observed at `now`.

        An offline dir comes back with its error name, a dir without sizes with -1. Raises
        RetryableAdminError unless every broker answered: a poll only counts when all were seen.
        """
        return self._call("DescribeLogDirs", self._describe_volumes, list(broker_ids), now)

    async def _describe_volumes(self, broker_ids: list[int], now: datetime) -> list[Volume]:
        # Sent to all brokers at once, so brokers that hang cost one request timeout, not one each.
        calls = {broker: self._manager.call_soon(self._log_dirs(broker)) for broker in broker_ids}
        volumes, errors = [], []
        for broker, call in calls.items():
            what = f"DescribeLogDirs to broker {broker}"
            try:
                response = await call
            except AdminError as error:  # every broker is awaited: the message names all that failed
                errors.append(error)
                continue
            errors.append(error_for_code(response.error_code, None, what))
            volumes += [Volume(broker, result.log_dir, result.total_bytes, result.usable_bytes, now,
                               error_name(result.error_code)) for result in response.results]
        raise_any(errors)
        return volumes

    async def _log_dirs(self, broker: int):
        # topics=[] (not null): only the dirs and their sizes, no partitions. Sizes need v4+ (KIP-827, Kafka 3.3).
        what = f"DescribeLogDirs to broker {broker}"
        try:
            return await self._send(DescribeLogDirsRequest(topics=[], min_version=4), what, node_id=broker,
                                    passing=(Errors.IncompatibleBrokerVersion,))
        except Errors.IncompatibleBrokerVersion:  # the broker's ApiVersions stop below v4
            if broker not in self._said_without_sizes:
                self._said_without_sizes.add(broker)
                log.warning("Broker %d answers DescribeLogDirs below v4 (before KIP-827): its log dirs come without "
                            "sizes, so its volumes are judged from the sidecars' znodes when zookeeper.connect is "
                            "set, else shown as unusable and not judged", broker)
            return await self._send(DescribeLogDirsRequest(topics=[]), what, node_id=broker)

    def describe_replica_sizes(self, broker_id: int,
                               partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], int]:
        """Bytes of the given partitions' replicas on one broker; a partition it does not hold is absent.

        A replica being moved between the broker's own dirs counts once (its current copy).
        """
        return {partition: size for partition, (_, size) in self.describe_replicas(broker_id, partitions).items()}

    def describe_replicas(self, broker_id: int,
                          partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], tuple[str, int]]:
        """(log dir, bytes) of the given partitions' replicas on one broker (their current copy); a partition
        it does not hold is absent."""
        found = self._call(f"DescribeLogDirs to broker {broker_id}", self._replicas, broker_id,
                           {topic: list(indexes) for topic, indexes in partitions.items()})
        return {(topic, partition): (log_dir, size) for topic, partition, log_dir, size, future in found if not future}

    def describe_dir_moves(self, broker_id: int) -> dict[tuple[str, int], tuple[str, str]]:
        """The replicas of one broker being moved between its own log dirs (AlterReplicaLogDirs, JBOD): (topic,
        partition) -> (the dir it is copied into, the dir it is in). One DescribeLogDirs of all its partitions."""
        found = self._call(f"DescribeLogDirs to broker {broker_id}", self._replicas, broker_id, None)
        current = {(topic, partition): log_dir for topic, partition, log_dir, _, future in found if not future}
        return {(topic, partition): (log_dir, current[(topic, partition)])
                for topic, partition, log_dir, _, future in found if future and (topic, partition) in current}

    async def _replicas(self, broker_id: int, partitions: dict[str, list[int]] | None) -> list:
        what = f"DescribeLogDirs to broker {broker_id}"
        response = await self._send(requests.describe_replicas_request(partitions), what, node_id=broker_id)
        raise_any([error_for_code(response.error_code, None, what)])
        return requests.replicas_in(response)

    def alter_replica_log_dirs(self, broker_id: int, dirs: Mapping[tuple[str, int], str]) -> None:
        """Move each (topic, partition) replica of one broker into the given dir of it. Naming the dir a replica is
        in cancels its move between dirs (the broker drops the copy), as kafka-reassign-partitions --cancel does."""
        if dirs:
            self._call(f"AlterReplicaLogDirs to broker {broker_id}", self._alter_replica_log_dirs, broker_id,
                       dict(dirs))

    async def _alter_replica_log_dirs(self, broker_id: int, dirs: dict[tuple[str, int], str]) -> None:
        what = f"AlterReplicaLogDirs to broker {broker_id}"
        response = await self._send(requests.alter_replica_log_dirs_request(dirs), what, node_id=broker_id)
        raise_any(error_for_code(partition.error_code, None, f"{what} of {topic.topic_name}-{partition.partition_index}")
                  for topic in response.results for partition in topic.partitions)
