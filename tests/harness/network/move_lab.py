"""A partition move on a cluster whose brokers sit behind rate-limited links, with clients running.

Shared by test_network_throttle.py, test_move_progress.py and benchmarks/move_*.py. One `MoveLab` is:

- a `TestNetwork` (netns.py): brokers 1, 2, 3 each in a network namespace of their own, every
  link limited to `capacity` bytes/s in each direction;
- a LocalKafkaCluster whose brokers run in those namespaces;
- an aggregator here (`quota-sidecar aggregate`), its pipeline the lab's cluster, as the agents' default;
- client load from this namespace on a topic of the source broker (lab_clients.py);
- topics of `move_bytes` (or their `move_sizes`) on the source broker (or their `move_sources`), each moved
  once to the destination broker, either under the sidecars (one per broker, run inside the broker's
  namespace and measuring its link) or under a static throttle set the way `kafka-reassign-partitions
  --throttle` sets it. What a move measures: move_result.py.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import psutil
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from harness.clients.lab_clients import RECORD_BYTES, ClientLoad, LoadProfile, producer_performance
from harness.network.move_result import MoveResult, PassWatch, Sample, summarize
from harness.network.netns import TestNetwork
from harness.agents.sidecar_process import SidecarError, SidecarProcess
from harness.waiting import WaitTimeout, eventually
from quota_sidecar.common.errors import AdminError
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from quota_sidecar.kafka_clients.admin import ClusterAdmin

log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
SOURCE, DESTINATION = 1, 3
SIDECAR_HTTP_PORT = 8080


@dataclass(frozen=True)
class LabSettings:
    capacity: int = 6_000_000            # bytes/s of every link, each direction
    sidecar_capacity: int | None = None  # what the sidecars are told the links carry; None: the truth
    load: LoadProfile = LoadProfile(produce=300_000, replay=2_700_000, peak_seconds=10, quiet_seconds=10)
    move_bytes: int = 96 << 20           # size of each partition moved
    move_sizes: tuple[tuple[str, int], ...] = ()    # (move, bytes) for a move of another size
    move_sources: tuple[tuple[str, int], ...] = ()  # (move, broker) for a move whose topic is not on SOURCE
    load_history_bytes: int = 32 << 20   # what the client topic holds for the replaying reader
    load_retention_bytes: int = 64 << 20  # and at most keeps (retention.bytes), as a move of it has to copy
    moves: tuple[str, ...] = ("static", "adaptive")  # one topic per move: move-<name>
    max_percent: float = 90.0            # replication.max.tx/rx.percent, and the static rate's share
    network_window_seconds: int = 4      # replication.network.window
    check_interval_seconds: int = 1      # storage.check.interval: the sidecar's pass interval
    subnet: int = 0                      # 10.231.<subnet>.0/24
    move_timeout: float = 240.0
    sidecar_properties: tuple[tuple[str, object], ...] = ()  # more keys for every sidecar (without the prefix)


class MoveLab:
    """Network, cluster, Spark Connect server and client load; `run_static()` and `run_adaptive()` move.

    make_cluster(**LocalKafkaCluster arguments) returns a started cluster (the tests' fixture, which
    shows its logs on failure); by default a LocalKafkaCluster. stop() stops it either way, before the
    network its brokers live in goes.
    """

    def __init__(self, settings: LabSettings, make_cluster: Callable | None = None, work_dir: str | None = None):
        self.settings = settings
        self._make_cluster = make_cluster
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="quota-sidecar-movelab-"))
        self.network = TestNetwork(BROKERS, settings.capacity, subnet=settings.subnet)
        self.cluster = None
        self.aggregator = None
        self.admin: ClusterAdmin | None = None
        self.load: ClientLoad | None = None
        self.sidecars: dict[int, SidecarProcess] = {}
        self.load_topic = "client-load"
        self.move_topics = {name: f"move-{name}" for name in settings.moves}
        self.client_peak_tx: float | None = None  # the source's sent bytes/s at the client's peak
        self.client_quiet_tx: float | None = None
        self.reaction: float | None = None  # seconds the sidecars took to follow a phase, in the last adaptive move

    # -- set-up and tear-down --------------------------------------------------------------------

    def __enter__(self) -> MoveLab:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        from harness.spark.aggregator import Aggregator

        self.network.create()
        namespaces = {broker: (self.network.namespace(broker), self.network.ip(broker)) for broker in BROKERS}
        arguments = {"brokers": len(BROKERS), "network_namespaces": namespaces,
                     # Two segments a second per link at most; fewer files than 1 MiB segments.
                     "broker_properties": {"log.segment.bytes": str(16 << 20)}}
        if self._make_cluster is None:
            from harness.cluster.local_cluster import LocalKafkaCluster
            self.cluster = LocalKafkaCluster(**arguments).start()
        else:
            self.cluster = self._make_cluster(**arguments)
        self.admin = ClusterAdmin({"bootstrap_servers": self.cluster.bootstrap_servers}, retry_deadline=30.0)
        # The agents' pipeline is the lab's cluster (their default); its aggregator starts while the topics fill.
        self.aggregator = Aggregator(self.cluster.bootstrap_servers, self.work_dir / "aggregator").start()
        self._fill_topics()
        self.aggregator.wait_ready()
        self._warm_up_aggregator()
        self.load = ClientLoad(self.cluster.bootstrap_servers, self.load_topic, self.settings.load,
                               self.work_dir).start()

    def stop(self) -> None:
        """Everything started, in reverse; each step runs even when one before it failed. Safe to repeat."""
        steps = [self.stop_sidecars]
        steps += [self.load.stop] if self.load is not None else []
        steps += [self.admin.close] if self.admin is not None else []
        steps += [self.aggregator.stop] if self.aggregator is not None else []
        steps += [self.cluster.stop] if self.cluster is not None else []  # before the namespaces go
        failures = []
        for step in [*steps, self.network.destroy]:
            try:
                step()
            except Exception as error:  # the rest must still be stopped; raised at the end
                log.exception("stopping the move lab: %s failed", step.__qualname__)
                failures.append(error)
        self.load = self.admin = self.aggregator = None
        if failures:
            raise failures[0]

    def _warm_up_aggregator(self) -> None:
        """One rate decision by the aggregator before the agents ask for theirs.

        The first ever takes Spark seconds, tens on a loaded 2-core machine (code generation for the rule's
        expressions); an aggregator that has run for a while is warm. Without this, the first move ran
        unthrottled for that long before any agent could set a rate.
        """
        from quota_sidecar.common.observation import BrokerLoad, MovingReplica, Reassignment, ReplicationObservation
        from quota_sidecar.configuration.settings import ReplicationConfig
        from quota_sidecar.pipeline.transport import Pipeline
        from quota_sidecar.decide.throttles import rate_inputs

        observation = ReplicationObservation(
            reassignments=(Reassignment("warm-up", 0, (SOURCE, DESTINATION), adding=(DESTINATION,)),),
            broker_load={broker: BrokerLoad(1e6, 1e6) for broker in (SOURCE, DESTINATION)},
            moving_replicas=(MovingReplica("warm-up", 0, DESTINATION, SOURCE, 1000, 1.0, None, 10, 1.0, 5, 1.0),))
        config = ReplicationConfig(capacity_default=self.settings.capacity, min_rate=100_000)
        asker = Pipeline({"bootstrap_servers": self.cluster.bootstrap_servers}, lambda: "move-lab-warm-up", None,
                         timeout=180.0)
        try:
            asker.judge_rates(rate_inputs(observation, config, (SOURCE, DESTINATION), {}))
        finally:
            asker.close()

    def _fill_topics(self) -> None:
        """The moved topics filled on a fast network, then every link limited to the capacity."""
        topics = [self.load_topic, *self.move_topics.values()]
        self.admin.create_topic(self.load_topic, 1, 1, {"retention.bytes": str(self.settings.load_retention_bytes)})
        for topic in self.move_topics.values():
            self.admin.create_topic(topic, 1, 1)
        # CreateTopics places the replica anywhere; an empty partition moves to its broker at once.
        sources, move_sizes = dict(self.settings.move_sources), dict(self.settings.move_sizes)
        placed = {self.load_topic: SOURCE,
                  **{topic: sources.get(move, SOURCE) for move, topic in self.move_topics.items()}}
        self.admin.alter_reassignments({(topic, 0): [broker] for topic, broker in placed.items()})
        _until(lambda: not self.admin.list_reassignments(), 60, "the new topics on their brokers")
        self._wait_for_leaders(topics)
        self.network.set_rate(200_000_000)
        sizes = {self.load_topic: self.settings.load_history_bytes,
                 **{topic: move_sizes.get(move, self.settings.move_bytes) for move, topic in self.move_topics.items()}}
        fills = {topic: producer_performance(self.cluster.bootstrap_servers, topic, size // RECORD_BYTES, -1,
                                             self.work_dir / f"fill-{topic}.log") for topic, size in sizes.items()}
        for topic, process in fills.items():
            if process.wait(300) != 0:
                raise RuntimeError(f"filling {topic} failed: see {self.work_dir / f'fill-{topic}.log'}")
        self.network.set_rate(self.settings.capacity)

    def _wait_for_leaders(self, topics: list[str]) -> None:
        """Wait until the brokers' metadata knows every topic (CreateTopics returns earlier)."""
        consumer = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap_servers)
        try:
            _until(lambda: all(consumer.partitions_for_topic(topic) for topic in topics), 60, "topic metadata")
        finally:
            consumer.close()

    # -- the sidecars ----------------------------------------------------------------------------

    def sidecar_properties(self, broker: int) -> dict[str, object]:
        settings = self.settings
        values = {
            "kafka.admin.bootstrap.servers": self.cluster.bootstrap_servers,
            "broker.id": broker,
            "storage.check.interval": f"PT{settings.check_interval_seconds}S",
            "storage.per.volume.limit.min.available.bytes": 1,  # disk protection on, never in the way here
            "http.host": self.network.ip(broker),  # reachable from here, for /status
            "replication.capacity.bytes.per.second": settings.sidecar_capacity or settings.capacity,
            "replication.max.tx.percent": settings.max_percent,
            "replication.max.rx.percent": settings.max_percent,
            "replication.min.rate.bytes.per.second": 100_000,  # the default 10 MB/s is above these links
            "replication.network.interface": self.network.inside_interface(broker),
            "replication.network.window": f"PT{settings.network_window_seconds}S",
            **dict(settings.sidecar_properties),
        }
        return {PREFIX + key: value for key, value in values.items()}

    def start_sidecars(self, wait: bool = True) -> None:
        """One sidecar per broker, inside the broker's namespace; with wait, wait_for_sidecars() too."""
        for broker in BROKERS:
            self.sidecars[broker] = SidecarProcess(
                f"sidecar-{broker}", self.work_dir, self.sidecar_properties(broker), host=self.network.ip(broker),
                port=SIDECAR_HTTP_PORT, command_prefix=self.network.in_namespace(broker, [])).start()
        if wait:
            self.wait_for_sidecars()

    def wait_for_sidecars(self, timeout: float = 180.0) -> None:
        """Until each sidecar has polled and had a full network window (its sampler starts with the process)."""
        deadline = time.monotonic() + timeout
        for sidecar in self.sidecars.values():
            sidecar.wait_ready(deadline - time.monotonic())
        time.sleep(self.settings.network_window_seconds)

    def sidecar_get(self, broker: int, path: str) -> dict | None:
        """A sidecar's JSON answer on its HTTP endpoint (/healthz, /status), None when it gives none."""
        return self.sidecars[broker].get(path)

    def stop_sidecars(self, timeout: float = 30.0) -> None:
        """SIGTERM to each (`ip netns exec` exec'd the sidecar: the process is the sidecar), then wait."""
        for sidecar in self.sidecars.values():
            sidecar.send(signal.SIGTERM)
        for broker, sidecar in self.sidecars.items():
            try:
                sidecar.stop(None, timeout)
            except SidecarError:
                log.warning("sidecar %d did not stop within %.0fs: it was killed", broker, timeout)

    def logs(self) -> str:
        return "\n".join(f"==> {sidecar.log_path} <==\n{sidecar.log_tail(80)}" for sidecar in self.sidecars.values())

    # -- the client's peak, and the static rate that leaves the same headroom -------------------

    def measure_client_traffic(self) -> tuple[float, float]:
        """The source broker's sent bytes/s at the client's peak and in its quiet phase, without a move.

        Read on the bridge's end of the source's link, whose received bytes are what the source sent: the slope
        of that counter over the settled part of one peak and of the quiet phase after it (from its half, and
        no sooner than the sidecars' window), as the sidecars see a phase once their window holds it. Not the
        highest of short windows: a reader starved of CPU catches up in bursts above the rate it asks for.
        """
        profile, window = self.settings.load, self.settings.network_window_seconds
        interface = self.network.outside_interface(SOURCE)
        started = self.load.wait_for_phase(peak=True)
        settled: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
        while time.monotonic() < started + profile.period:
            at = time.monotonic()
            since_origin = at - self.load.origin
            if profile.settled(since_origin, reaction=window):
                sent = psutil.net_io_counters(pernic=True)[interface].bytes_recv
                settled[profile.in_peak(since_origin)].append((at, sent))
            time.sleep(0.25)
        peak, quiet = (_slope(settled[phase]) for phase in (True, False))
        self.client_peak_tx, self.client_quiet_tx = peak, quiet
        return peak, quiet

    def static_rate(self) -> int:
        """What an operator who must keep the client's headroom at its peak sets, once, for the whole move.

        The sidecar leaves (1 - max%) of what the client does not use: at the client's peak P that is
        (capacity - P) x (1 - max%). A static rate leaving the same headroom at that peak is
        (capacity - P) x max%, the very rate the sidecar computes at the peak; it has to hold all move
        long, as the operator cannot know when the peaks come.
        """
        if self.client_peak_tx is None:
            self.measure_client_traffic()
        return self.static_rate_for(self.client_peak_tx)

    def static_rate_for(self, client_peak_tx: float) -> int:
        return math.floor((self.settings.capacity - client_peak_tx) * self.settings.max_percent / 100)

    # -- the moves -------------------------------------------------------------------------------

    def run_static(self, rate: int, move: str = "static") -> MoveResult:
        """kafka-reassign-partitions --execute --throttle: rates on every broker and lists first, then the move."""
        topic = self.move_topics[move]
        for broker in BROKERS:
            self.admin.incremental_alter_configs("broker", broker, {LEADER_RATE: ("SET", str(rate)),
                                                                    FOLLOWER_RATE: ("SET", str(rate))})
        self.admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("SET", f"0:{SOURCE}"),
                                                              FOLLOWER_REPLICAS: ("SET", f"0:{DESTINATION}")})
        try:
            moved = self._move("static", topic)
        finally:
            self.clear_static_throttles(topic)
        return self._summarize(*moved, reaction=self.reaction)  # the clients compared over the same parts

    def clear_static_throttles(self, topic: str) -> None:
        """What `kafka-reassign-partitions --verify` removes once a move is done (or was cancelled)."""
        for broker in BROKERS:
            self.admin.incremental_alter_configs("broker", broker, {LEADER_RATE: ("DELETE", None),
                                                                    FOLLOWER_RATE: ("DELETE", None)})
        self.admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("DELETE", None),
                                                              FOLLOWER_REPLICAS: ("DELETE", None)})

    def run_adaptive(self, move: str = "adaptive") -> MoveResult:
        """Only the move: the running sidecars see it, list its replicas and set the rates."""
        if not any(sidecar.process for sidecar in self.sidecars.values()):
            raise RuntimeError("start_sidecars() first")
        passes = PassWatch(self).start()
        try:
            moved = self._move("adaptive", self.move_topics[move])
        finally:
            passes.stop()
        pass_seconds = passes.median_interval()
        # The sidecars follow a change of the clients' traffic once their window holds it: the next pass reads it (up
        # to one interval later) and its rate is written by that pass's end (one more): window + 2 passes.
        self.reaction = None if pass_seconds is None else self.settings.network_window_seconds + 2 * pass_seconds
        result = self._summarize(*moved, reaction=self.reaction)
        result.sidecar_pass_seconds = pass_seconds
        done = time.monotonic()
        try:  # the sidecars take their rates away once no move involves their broker
            _until(lambda: self._rates() == (None, None), 60, "the sidecars removing their rates")
            result.rates_removed_after = round(time.monotonic() - done, 1)
        except WaitTimeout:
            log.warning("the sidecars did not remove their rates within 60s of the move's end; see %s", self.work_dir)
        return result

    def _move(self, mode: str, topic: str) -> tuple[str, str, int, list[Sample], float, float]:
        size = self.admin.describe_replica_sizes(SOURCE, {topic: [0]})[(topic, 0)]
        started = self.load.wait_for_phase(peak=False)  # every move starts as a quiet phase begins
        self.admin.alter_reassignments({(topic, 0): [DESTINATION]})
        samples = []
        while True:
            sample = self._sample(topic, time.monotonic() - started)
            since_origin = started + sample.at - self.load.origin
            sample.peak, sample.since_origin = self.settings.load.in_peak(since_origin), since_origin
            samples.append(sample)
            if not sample.moving:
                break
            if sample.at > self.settings.move_timeout:
                raise TimeoutError(f"{mode} move of {topic} not done after {sample.at:.0f}s: "
                                   f"{sample.replica_bytes} of {size} bytes at the destination")
            time.sleep(max(0.0, started + sample.at + 0.5 - time.monotonic()))
        ended = started + samples[-1].at
        wall = time.time() - time.monotonic()  # + a monotonic time: its wall-clock time, as the sidecars log it
        with open(self.work_dir / f"{mode}-samples.jsonl", "w") as out:  # the timeline, for a failure's reader
            out.writelines(json.dumps({"wall": round(wall + started + s.at, 2), **asdict(s)}) + "\n"
                           for s in samples)
        return mode, topic, size, samples, started, ended

    def _summarize(self, mode: str, topic: str, size: int, samples: list[Sample], started: float, ended: float,
                   reaction: float | None) -> MoveResult:
        # The clients as each peak ends: its last window, where the throttle stands where the sidecars got to.
        ends = max(reaction or 0.0, self.settings.load.peak_seconds - self.settings.network_window_seconds)
        return summarize(mode, topic, size, samples, self.settings.load, self.load.throughput(started, ended),
                         self.load.throughput(started, ended, settled_only=True, reaction=ends)[0], reaction)

    def _sample(self, topic: str, at: float) -> Sample:
        moving = any(move.topic == topic for move in self.admin.list_reassignments())
        replica = self.admin.describe_replica_sizes(DESTINATION, {topic: [0]}).get((topic, 0), 0)
        leader_rate, follower_rate = self._rates()
        lists = self.admin.describe_configs("topic", [topic], [LEADER_REPLICAS, FOLLOWER_REPLICAS]).get(topic, {})
        listed = (f"0:{SOURCE}" in (lists.get(LEADER_REPLICAS) or "").split(",")
                  and f"0:{DESTINATION}" in (lists.get(FOLLOWER_REPLICAS) or "").split(","))
        sent = psutil.net_io_counters(pernic=True)[self.network.outside_interface(SOURCE)].bytes_recv
        return Sample(at, moving, replica, leader_rate, follower_rate, listed, source_sent=sent)

    def _rates(self) -> tuple[int | None, int | None]:
        leader = self.admin.describe_configs("broker", [SOURCE], [LEADER_RATE]).get(str(SOURCE), {}).get(LEADER_RATE)
        follower = self.admin.describe_configs("broker", [DESTINATION], [FOLLOWER_RATE]).get(
            str(DESTINATION), {}).get(FOLLOWER_RATE)
        return (None if leader is None else int(leader)), (None if follower is None else int(follower))


def _slope(counters: list[tuple[float, int]]) -> float:
    (first_at, first), (last_at, last) = counters[0], counters[-1]
    return (last - first) / (last_at - first_at)


def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    eventually(condition, timeout, what, retry_on=(AdminError, KafkaError))  # the cluster may not answer yet

