"""What a move of the move lab (tests/harness/network/move_lab.py) measures: a `Sample` every half second, and the
`MoveResult` summed up from them (`summarize`): its duration, the destination replica's growth while a
throttle was in force against the throttle in force (the smaller of the source's leader rate and the
destination's follower rate, as read back from the brokers), and the client's throughput; `PassWatch`
notes the sidecars' passes meanwhile.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime

from harness.clients.lab_clients import LoadProfile


@dataclass
class Sample:
    at: float                  # seconds since the move started
    moving: bool
    replica_bytes: int         # the destination replica's size
    leader_rate: int | None    # on the source broker
    follower_rate: int | None  # on the destination broker
    listed: bool               # both throttled-replica lists name the move's replicas
    peak: bool = False         # the client load was in a peak phase (else a quiet one)
    since_origin: float = 0.0  # seconds since the client load's first peak began (LoadProfile.settled)
    source_sent: int = 0       # the source's link: bytes it sent so far (the bridge's end received)

    @property
    def throttle(self) -> int | None:
        """The throttle the move runs under: the smaller of the two rates, once both lists and rates are set."""
        if not self.listed or self.leader_rate is None or self.follower_rate is None:
            return None
        return min(self.leader_rate, self.follower_rate)


@dataclass
class MoveResult:
    mode: str
    topic: str
    moved_bytes: int
    move_seconds: float
    throttled_seconds: float      # time with a throttle in force
    throttle_average: float       # time-weighted, over the throttled time
    throttle_min: int
    throttle_max: int
    replication_average: float    # replica growth per second over the throttled time
    throttle_in_peaks: float | None      # the same two averages over the throttled time in the client's
    replication_in_peaks: float | None   # peaks, and in its quiet phases
    throttle_in_quiet: float | None
    replication_in_quiet: float | None
    leader_at_peak_ends: float | None  # the source's leader rate as each peak of the move ends (or the move,
                                       # in a peak's settled part): where the sidecars got to, for equal headroom
    leader_at_quiet_ends: float | None  # ... and as each quiet phase ends
    reaction: float | None              # seconds the sidecars took to follow a phase (LoadProfile.settled)
    unthrottled_bytes: int        # moved before a throttle was in force (the sidecars' reaction time)
    unthrottled_seconds: float
    client_offered_peak: int
    client_offered_quiet: int
    client_peak_throughput: float   # bytes/s the consumer received during the move's peak phases
    client_quiet_throughput: float  # ... and during its quiet phases
    client_late_peak_throughput: float  # ... in the last window of each peak (or later, after the reaction)
    link_in_peaks: float | None     # bytes/s the source sent on its link during the throttled peak phases
    clients_on_link_late_in_peaks: float | None  # ... less the replication, in their settled parts: the clients'
                                                 # traffic as the sidecar sees it once its window has the peak
    rates_removed_after: float | None = None  # seconds after the move until the sidecars removed their rates
    sidecar_pass_seconds: float | None = None  # median time between two passes of a sidecar, during the move
    samples: list[Sample] = field(default_factory=list, repr=False)

    @property
    def rate_ratio(self) -> float:
        """Measured replication rate / throttle: Kafka's ReplicationQuotasTest wants 0.5 < ratio < 1.1."""
        return self.replication_average / self.throttle_average

    def figures(self) -> dict:
        figures = {key: value for key, value in asdict(self).items() if key != "samples"}
        figures["rate_ratio"] = round(self.rate_ratio, 3)
        return figures


class PassWatch:
    """Notes every sidecar's passes (the `last_poll` of /healthz) while a move runs."""

    def __init__(self, lab):  # a MoveLab
        self.lab = lab
        self.polls: dict[int, set[str]] = {broker: set() for broker in lab.sidecars}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pass-watch", daemon=True)

    def start(self) -> PassWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)

    def median_interval(self) -> float | None:
        intervals = []
        for polls in self.polls.values():
            times = sorted(datetime.fromisoformat(poll.replace("Z", "+00:00")) for poll in polls)
            intervals += [(b - a).total_seconds() for a, b in zip(times, times[1:])]
        return round(sorted(intervals)[len(intervals) // 2], 2) if intervals else None

    def _run(self) -> None:
        while not self._stopped.wait(0.25):
            for broker in self.polls:
                health = self.lab.sidecar_get(broker, "/healthz")
                if health and health["last_poll"]:
                    self.polls[broker].add(health["last_poll"])


def summarize(mode: str, topic: str, size: int, samples: list[Sample], load: LoadProfile,
              client: tuple[float, float], client_late_peak: float, reaction: float | None) -> MoveResult:
    throttled = [(a, b) for a, b in zip(samples, samples[1:]) if a.throttle is not None]
    if not throttled:
        raise AssertionError(f"{mode} move of {topic}: no throttle was ever in force; samples: {samples}")
    seconds = sum(b.at - a.at for a, b in throttled)
    first = next(s for s in samples if s.throttle is not None)
    rates = [a.throttle for a, _ in throttled]
    peaks = [(a, b) for a, b in throttled if a.peak]
    quiet = [(a, b) for a, b in throttled if not a.peak]
    late = [(a, b) for a, b in peaks if load.settled(a.since_origin, reaction)]
    late_quiet = [(a, b) for a, b in quiet if load.settled(a.since_origin, reaction)]
    return MoveResult(
        mode=mode, topic=topic, moved_bytes=size, move_seconds=round(samples[-1].at, 2),
        throttled_seconds=round(seconds, 2),
        throttle_average=_time_average(throttled, "throttle"),
        throttle_min=min(rates), throttle_max=max(rates),
        replication_average=_rate(throttled, "replica_bytes"),
        throttle_in_peaks=_time_average(peaks, "throttle"), replication_in_peaks=_rate(peaks, "replica_bytes"),
        throttle_in_quiet=_time_average(quiet, "throttle"), replication_in_quiet=_rate(quiet, "replica_bytes"),
        leader_at_peak_ends=_at_phase_ends(late, load, "leader_rate"),
        leader_at_quiet_ends=_at_phase_ends(late_quiet, load, "leader_rate"), reaction=reaction,
        unthrottled_bytes=first.replica_bytes, unthrottled_seconds=round(first.at, 2),
        client_offered_peak=load.peak, client_offered_quiet=load.produce,
        client_peak_throughput=round(client[0]), client_quiet_throughput=round(client[1]),
        client_late_peak_throughput=round(client_late_peak),
        link_in_peaks=_rate(peaks, "source_sent"),
        clients_on_link_late_in_peaks=_difference(_rate(late, "source_sent"), _rate(late, "replica_bytes")),
        samples=samples,
    )


def _rate(pairs: list[tuple[Sample, Sample]], counter: str) -> float | None:
    """How fast a counter of the samples grew over the pairs' time."""
    seconds = sum(b.at - a.at for a, b in pairs)
    return round(sum(getattr(b, counter) - getattr(a, counter) for a, b in pairs) / seconds) if seconds else None


def _difference(total: float | None, part: float | None) -> float | None:
    return None if total is None or part is None else total - part


def _at_phase_ends(pairs: list[tuple[Sample, Sample]], load: LoadProfile, attribute: str) -> float | None:
    """The average over phases of an attribute's last value in each: where each phase left it."""
    last = {int(a.since_origin // load.period): getattr(a, attribute) for a, _ in pairs}
    return round(sum(last.values()) / len(last)) if last else None


def _time_average(pairs: list[tuple[Sample, Sample]], attribute: str) -> float | None:
    seconds = sum(b.at - a.at for a, b in pairs)
    return round(sum(getattr(a, attribute) * (b.at - a.at) for a, b in pairs) / seconds) if seconds else None
