"""The reading side of the client load of tests/harness/clients/lab_clients.py, each reader in a process of its own.

    python client_load.py tail BOOTSTRAP TOPIC
    python client_load.py replay BOOTSTRAP TOPIC PEAK QUIET PEAK_SECONDS QUIET_SECONDS ORIGIN

`tail` reads from the end of the topic, what a producer writes now. `replay` reads the topic from its
beginning over and over (a job re-reading history) at PEAK bytes/s for PEAK_SECONDS, then at QUIET
bytes/s for QUIET_SECONDS, again and again, the first peak starting at ORIGIN (time.monotonic(), which
every process of the machine shares); it paces itself by pausing its partition. Both print one line
`<monotonic time> <bytes>` per poll that brought records, and stop on SIGTERM.

CRCs are not checked: kafka-python computes CRC-32C in pure Python without the optional `crc32c`
package, at a few MB/s, which would make the reader the bottleneck instead of the network.
"""

import signal
import sys
import threading
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

FETCH_BYTES = 256 << 10  # small fetches: the pacing overshoots by one at most


def reader(bootstrap: str, topic: str) -> tuple[KafkaConsumer, TopicPartition]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, check_crcs=False,
                             auto_offset_reset="earliest", max_partition_fetch_bytes=FETCH_BYTES)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    return consumer, partition


def poll_bytes(consumer: KafkaConsumer, timeout_ms: int) -> int:
    try:
        batches = consumer.poll(timeout_ms=timeout_ms)
    except KafkaError as error:
        print(f"poll: {error}", file=sys.stderr, flush=True)
        return 0
    size = sum(len(record.value) for batch in batches.values() for record in batch)
    if size:
        print(f"{time.monotonic():.3f} {size}", flush=True)
    return size


def tail(bootstrap: str, topic: str, stopped: threading.Event) -> None:
    consumer, partition = reader(bootstrap, topic)
    consumer.seek_to_end(partition)
    while not stopped.is_set():
        poll_bytes(consumer, 200)
    consumer.close()


def replay(bootstrap: str, topic: str, peak: float, quiet: float, peak_seconds: float, quiet_seconds: float,
           origin: float, stopped: threading.Event) -> None:
    period = peak_seconds + quiet_seconds
    consumer, partition = reader(bootstrap, topic)
    consumer.seek_to_beginning(partition)
    credit, last, paused = 0.0, time.monotonic(), False
    while not stopped.is_set():
        now = time.monotonic()
        rate = peak if (now - origin) % period < peak_seconds else quiet
        credit = min(credit + rate * (now - last), rate * 0.25)  # no catching up after a stall
        last = now
        if (credit > 0) == paused:
            (consumer.resume if paused else consumer.pause)(partition)
            paused = not paused
        credit -= poll_bytes(consumer, 50)
        end = consumer.highwater(partition)
        if end is not None and consumer.position(partition) >= end:
            consumer.seek_to_beginning(partition)  # read it all: again from the start
        if paused:
            stopped.wait(0.05)
    consumer.close()


def main(argv: list[str]) -> None:
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    role, bootstrap, topic, *rest = argv
    if role == "tail":
        tail(bootstrap, topic, stopped)
    elif role == "replay":
        peak, quiet, peak_seconds, quiet_seconds, origin = map(float, rest)
        replay(bootstrap, topic, peak, quiet, peak_seconds, quiet_seconds, origin, stopped)
    else:
        raise SystemExit(f"unknown role {role!r}: tail or replay")


if __name__ == "__main__":
    main(sys.argv[1:])
