"""A producer that writes as fast as its quota lets it: the load of the demo and the benchmarks.

Lab tooling like local_cluster.py, not used by the sidecar itself.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left
from typing import Mapping

from kafka import KafkaProducer


class Flood:
    """A producer thread sending random records (acks=all) as fast as its quota lets it, keeping the time
    of every acknowledgement.

    kafka-python 3 has no buffer_memory: a semaphore bounds the records waiting in the producer. One
    request in flight per broker, so nothing slips through once a response says "throttled". Its
    close() raises instead of giving up on records still waiting, and those held back by a 1 B/s quota
    would wait for hours: a short delivery timeout fails them within seconds, so that close() finishes.
    `producer_settings` go to KafkaProducer as they are (batch_size, linger_ms, ...).
    """

    def __init__(self, client_config: Mapping[str, object], topic: str, record_bytes: int,
                 max_unacked: int, delivery_timeout: float = 5.0, **producer_settings):
        self.client_config = {**client_config, **producer_settings}
        self.topic, self.record_bytes, self.delivery_timeout = topic, record_bytes, delivery_timeout
        self.acks: list[float] = []  # time.monotonic() of every acknowledged record, in order
        self.failure: BaseException | None = None
        self._unacked = threading.Semaphore(max_unacked)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=3 * self.delivery_timeout)

    @property
    def acked_records(self) -> int:
        return len(self.acks)

    @property
    def last_ack_at(self) -> float | None:
        return self.acks[-1] if self.acks else None

    def acked_bytes(self, start: float, end: float) -> int:
        """Bytes acknowledged in [start, end)."""
        acks = self.acks
        return (bisect_left(acks, end) - bisect_left(acks, start)) * self.record_bytes

    def _run(self) -> None:
        timeout_ms = int(self.delivery_timeout * 1000)
        try:
            producer = KafkaProducer(
                **self.client_config, acks="all", max_in_flight_requests_per_connection=1, max_block_ms=10_000,
                delivery_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms - 1000)  # must be the shorter one
        except Exception as error:
            self.failure = error
            return
        payload = os.urandom(self.record_bytes)
        try:
            while not self._stop.is_set():
                if self._unacked.acquire(timeout=0.2):
                    producer.send(self.topic, payload).add_callback(self._acked).add_errback(self._failed)
        except Exception as error:
            self.failure = error
        finally:
            try:
                producer.close(timeout=2 * self.delivery_timeout)
            except Exception as error:
                self.failure = self.failure or error

    def _acked(self, _metadata) -> None:
        self.acks.append(time.monotonic())
        self._unacked.release()

    def _failed(self, _error) -> None:
        self._unacked.release()  # a record that timed out or was dropped at close
