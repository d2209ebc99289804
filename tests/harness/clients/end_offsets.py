"""A partition's end offset sampled every half second: what the broker accepted, whatever the client says."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, TopicPartition

from harness.periodic import Periodic


class EndOffsets(Periodic):
    """(time.monotonic(), the partition's end offset), every half second on the test's clock."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(0.5)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        self.partition = TopicPartition(topic, 0)
        self.samples: list[tuple[float, int]] = []

    def sample(self) -> None:
        self.samples.append((time.monotonic(), self.consumer.end_offsets([self.partition])[self.partition]))

    def first_growth(self) -> float | None:
        """When the first records past those at the start were seen."""
        samples = list(self.samples)
        return next((at for at, offset in samples if offset > samples[0][1]), None) if samples else None

    def __exit__(self, *exc_info) -> None:
        super().__exit__(*exc_info)
        self.consumer.close()
