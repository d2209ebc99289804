"""The clients of the move lab (tests/harness/network/move_lab.py): a producer at a fixed rate into a topic of the
source broker, a reader tailing what it writes and one re-reading the topic's history in bursts (peak, then
quiet, again and again), so that the source sends the clients' bytes on the same link the replication uses.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.cluster import kafka_tools

RECORD_BYTES = 32 << 10


@dataclass(frozen=True)
class LoadProfile:
    """Client bytes/s out of the source: `produce` read back at once, always; `replay` more in the peaks.

    A peak lasts `peak_seconds`, the quiet phase after it `quiet_seconds`, again and again.
    """
    produce: int
    replay: int
    peak_seconds: float
    quiet_seconds: float

    @property
    def period(self) -> float:
        return self.peak_seconds + self.quiet_seconds

    @property
    def peak(self) -> int:
        return self.produce + self.replay

    def in_peak(self, since_origin: float) -> bool:
        return since_origin % self.period < self.peak_seconds

    def into_phase(self, since_origin: float) -> float:
        """Seconds since its phase (peak or quiet) began."""
        phase = since_origin % self.period
        return phase if phase < self.peak_seconds else phase - self.peak_seconds

    def settled(self, since_origin: float, reaction: float | None = None) -> bool:
        """In the second half of its phase, and at least `reaction` seconds into it: where the sidecars' window
        and passes have seen the phase."""
        length = self.peak_seconds if self.in_peak(since_origin) else self.quiet_seconds
        return self.into_phase(since_origin) >= max(length / 2, reaction or 0.0)



class ClientLoad:
    """The producer (Kafka's ProducerPerformance at a fixed record rate) and the two readers
    (tests/harness/clients/client_load.py), each a process of its own, so that none competes for this process's GIL
    with the measurements. `origin` is the start of a peak phase; `wait_for_phase()` waits for the next
    start of a peak or of a quiet phase.
    """

    def __init__(self, bootstrap_servers: str, topic: str, profile: LoadProfile, log_dir: Path):
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.profile = profile
        self.log_dir = log_dir
        self.origin = time.monotonic()
        self.consumed: list[tuple[float, int]] = []  # (monotonic time, bytes) per poll of either reader
        self._processes: list[subprocess.Popen] = []
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> ClientLoad:
        profile, script = self.profile, str(Path(__file__).with_name("client_load.py"))
        self.origin = time.monotonic() + 2.0
        self._processes.append(producer_performance(
            self.bootstrap_servers, self.topic, records=10**9, throughput=profile.produce / RECORD_BYTES,
            log_file=self.log_dir / "client-produce.log"))
        for role, arguments in (("tail", []), ("replay", [profile.replay, 0, profile.peak_seconds,
                                                          profile.quiet_seconds, self.origin])):
            with open(self.log_dir / f"client-{role}.log", "ab") as errors:
                process = subprocess.Popen(
                    [sys.executable, script, role, self.bootstrap_servers, self.topic, *map(str, arguments)],
                    stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True)
            self._processes.append(process)
            self._readers.append(threading.Thread(target=self._read_consumed, args=(process,), daemon=True))
            self._readers[-1].start()
        return self

    def stop(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for thread in self._readers:
            thread.join(timeout=5)

    def wait_for_phase(self, peak: bool = True) -> float:
        """Sleep until the next peak (or quiet) phase begins; its monotonic start time."""
        origin = self.origin + (0 if peak else self.profile.peak_seconds)
        elapsed = time.monotonic() - origin
        start = origin + math.ceil(elapsed / self.profile.period) * self.profile.period
        time.sleep(max(0.0, start - time.monotonic()))
        return start

    def throughput(self, start: float, end: float, settled_only: bool = False,
                   reaction: float | None = None) -> tuple[float, float]:
        """Bytes/s the consumer received in the peak phases and in the quiet phases of [start, end]; with
        settled_only, in their settled parts alone (LoadProfile.settled)."""
        counted = lambda at: not settled_only or self.profile.settled(at - self.origin, reaction)  # noqa: E731
        with self._lock:
            consumed = [(at, size) for at, size in self.consumed if start <= at < end and counted(at)]
        totals = {True: 0, False: 0}
        for at, size in consumed:
            totals[self.profile.in_peak(at - self.origin)] += size
        durations = {True: 0.0, False: 0.0}
        step, at = 0.05, start
        while at < end:
            if counted(at):
                durations[self.profile.in_peak(at - self.origin)] += min(step, end - at)
            at += step
        return (totals[True] / durations[True] if durations[True] else 0.0,
                totals[False] / durations[False] if durations[False] else 0.0)

    def _read_consumed(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            at, size = line.split()
            with self._lock:
                self.consumed.append((float(at), int(size)))


def producer_performance(bootstrap_servers: str, topic: str, records: int, throughput: float,
                         log_file: Path) -> subprocess.Popen:
    """Kafka's own producer at a fixed record rate (harness.cluster.kafka_tools)."""
    return kafka_tools.producer_performance(bootstrap_servers, topic, records, RECORD_BYTES, throughput, log_file,
                                            acks=1, **{"linger.ms": 5, "batch.size": 8 * RECORD_BYTES,
                                                       "compression.type": "none"})

