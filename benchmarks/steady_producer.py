"""A producer at a steady rate in a process of its own, through librdkafka (confluent-kafka) or kafka-python, for
throttle_resume.py.

    python steady_producer.py {librdkafka|kafka-python} BOOTSTRAP TOPIC BYTES_PER_SECOND RECORD_BYTES [CONFIG_JSON]

It sends RECORD_BYTES records at BYTES_PER_SECOND, paced without catching up after a stall (an application that
drops nothing but does not burst either: the credit is capped at a quarter of a second), and prints one line
`<monotonic time> <records acknowledged> <records failed>` per tenth of a second in which deliveries were reported,
until SIGTERM. CONFIG_JSON: the client's own settings (librdkafka's names, or kafka-python's keyword arguments).
A full buffer is waited out (librdkafka's BufferError, kafka-python's blocking send), the record sent when there is
room.
"""

import json
import signal
import sys
import threading
import time


class Counts:
    def __init__(self):
        self.acked = self.failed = 0
        self.lock = threading.Lock()

    def delivered(self, ok: bool) -> None:
        with self.lock:
            if ok:
                self.acked += 1
            else:
                self.failed += 1

    def take(self) -> tuple[int, int]:
        with self.lock:
            taken, self.acked, self.failed = (self.acked, self.failed), 0, 0
        return taken


def reporter(counts: Counts, stopped: threading.Event) -> None:
    while not stopped.wait(0.1):
        acked, failed = counts.take()
        if acked or failed:
            print(f"{time.monotonic():.3f} {acked} {failed}", flush=True)


def librdkafka(bootstrap: str, config: dict, counts: Counts):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **config})

    def send(topic: str, value: bytes, stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                producer.produce(topic, value, on_delivery=lambda error, _: counts.delivered(error is None))
                producer.poll(0)
                return
            except BufferError:  # queue.buffering.max.* reached: wait for deliveries
                producer.poll(0.1)

    return send, lambda timeout: producer.poll(timeout), lambda: producer.flush(5)


def kafka_python(bootstrap: str, config: dict, counts: Counts):
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)

    def send(topic: str, value: bytes, stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:  # blocks up to max_block_ms while the buffer is full
                future = producer.send(topic, value)
            except KafkaTimeoutError:
                continue
            future.add_callback(lambda _: counts.delivered(True))
            future.add_errback(lambda _: counts.delivered(False))
            return

    return send, lambda timeout: time.sleep(timeout), lambda: producer.close(5)


def main(argv: list[str]) -> None:
    client, bootstrap, topic, rate, size, *rest = argv
    rate, size = float(rate), int(size)
    config = json.loads(rest[0]) if rest else {}
    counts, stopped = Counts(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    makers = {"librdkafka": librdkafka, "kafka-python": kafka_python}
    if client not in makers:
        raise SystemExit(f"unknown client {client!r}: one of {', '.join(makers)}")
    send, serve, close = makers[client](bootstrap, config, counts)
    threading.Thread(target=reporter, args=(counts, stopped), daemon=True).start()
    value = bytes(size)
    credit, last = 0.0, time.monotonic()
    while not stopped.is_set():
        now = time.monotonic()
        credit, last = min(credit + rate * (now - last), rate / 4), now
        if credit >= size:
            send(topic, value, stopped)
            credit -= size
        else:
            serve(min(0.01, (size - credit) / rate))
    close()


if __name__ == "__main__":
    main(sys.argv[1:])
