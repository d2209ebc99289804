"""The fault soak's lab: a 3-broker cluster with broker 3's log dir on a small filesystem, each broker in
a network namespace of its own (netns.py, so that one can be cut off), an agent per broker in its broker's namespace (as
in a pod) and the aggregator; Kafka's own ProducerPerformance flooding a topic on broker 3 in rounds (the topic deleted
between them, as an operator freeing the disk, and made again after a rest) and writing at a steady rate to a
replicated topic under the same principal, so under the same quota; the nemesis's faults (nemesis.py) on its
schedule; the invariants (invariants.py) checked every second and at the end. `benchmarks/soak.py` runs it for half an
hour and writes the report; the integration test `test_fault_soak.py` for a few minutes on a fixed seed.

The brokers run beside 3 KRaft controllers alone, as production runs them: killing the active one makes the other two
elect a leader while every broker keeps serving. The controllers listen on the bridge's address (netns.py), which
every broker's namespace reaches; a broker cut off loses them too, and is fenced.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import isodate
import psutil
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from quota_sidecar.act.cluster_store import ClusterStore
from quota_sidecar.common.records import TOPIC as RECORDS_TOPIC
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.decide import cordons
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin

from harness.spark.aggregator import Aggregator
from harness.cluster.disk import DiskSampler, what_uses
from harness.faults.invariants import Convergence, Ledger, MemoryGrowth, Recovery
from harness.cluster.kafka_tools import (acknowledged_so_far, active_controller, elect_preferred_leader, producer_performance,
                          read_back, reassign_partitions)
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.faults.nemesis import Fault, Nemesis
from harness.network.netns import TestNetwork
from harness.agents.sidecar_process import SidecarFleet

MiB = 1 << 20
BROKERS = (1, 2, 3)
CONTROLLERS = 3  # alone, so that the active one can fail over
LINK_RATE = 1 << 30  # bytes/s each way: the links carry everything and limit nothing; they are there to be cut
SUBNET = 19  # 10.231.19.0/24, beside the network lab's
SMALL_BROKER = 3
# The flood is a burst the descent is for: at a fixed rate, the default user's producer quota lowered in steps while it
# fills the small filesystem (decide/descent.py). Unthrottled, a round would write past the RESERVE above the hard
# limit in 36 s; with the descent it writes ~ FLOOD_RATE x (check interval + ~20 s) before the first step's throttle
# holds, and a third of that rate after: the round ends (the topic deleted) before the reserve is used.
FLOOD_RATE = 16 * MiB  # bytes/s
RECORD = 16 * 1024
FLOOD_ROUND = 40.0  # seconds of a flood round before its topic is deleted
FLOOD_REST = 35.0  # seconds after a deletion before the next round: the throttle lifts and the steady producer is back
RESERVE = 576 * MiB
# The hard limit (storage.per.volume.limit.min.available.bytes) is the reserve the faults may need: a flood writes
# past RESERVE when a fault holds the descent up (an agent down or paused, the aggregator down, a broker cut off from
# its agent), until the hard limit's 1 B/s lands (the last resort); the run reports how much of it was used.
LIMIT = 768 * MiB
LIFTED_ABOVE = LIMIT + 64 * MiB  # free space at which the hard limit's 1 B/s may not stay (the line is far below it)
PRODUCE_RATE = 1 << 30  # the default user's quota: 1 B/s under a factor of 0
FLOOR = 26214  # produce.floor's default: the lowest quota of the descent, before the hard limit
STEADY_RATE = 200  # records a second onto the replicated topic, acks=all
STEADY_RECORD = 1024
STEADY_FILL = STEADY_RATE * (STEADY_RECORD + 128)  # bytes/s the steady topic's replica on broker 3 adds (with overhead)
# The steady producer's faults: a broker down, paused or cut off stalls its partitions there, quota or not.
STALLS_PRODUCER = frozenset({"kill-broker", "pause-broker", "cut-broker"})
# A user's consume quota an operator set: the sidecars never set consume quotas, so it must stay as it is. (Not a
# produce quota: a tenant's own produce rate is throttled while a volume violates, and handed back after.)
BYSTANDER, CONSUME = "bystander", "consumer_byte_rate"
BYSTANDER_RATE = 12345.0
AGENT_GROWTH = 5 * MiB  # the allowance for an agent's RSS over the soak
AGGREGATOR_GROWTH = 128 * MiB  # the JVM's heap settles within its maximum; this catches a leak, not the warm-up
WARM_UP = 300.0  # s: a process's RSS is compared from this long after its start (or half the soak, if shorter)
TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.MULTILINE)


@dataclass
class SoakSettings:
    check_interval: str = "PT10S"  # storage.check.interval: several passes between two faults
    validity: float = 60.0  # throttle.factor.validity.duration, seconds
    cover_after: str = "PT2S"

    def lift_within(self) -> float:
        """The lift after a flood's topic is deleted: two passes (the fill seen to stop, the quota written)."""
        return 2 * _seconds(self.check_interval) + 5.0

    def converge_within(self) -> float:
        """The promise: the quotas in force are the volumes' within a validity and two check intervals of a heal."""
        return self.validity + 2 * _seconds(self.check_interval)

    def final_quiet(self) -> float:
        """The quiet a soak ends with after its last heal: without it the convergence invariant could not fail
        where faults come closer together than converge_within (no gap of seed 2's half hour was that long)."""
        return self.converge_within() + 10.0


@dataclass
class SoakState:
    """What the checkers read and the flood rounds change."""
    flood_topic: str = ""
    round: int = 0
    convergence: dict[str, list[float]] = field(default_factory=dict)  # fault kind -> seconds to converge after it
    flooding: bool = False  # a flood round under way (False: its topic deleted, the rest before the next)
    rested_at: float = 0.0  # seconds from the soak's start when the last rest began
    lowest_free: int = 0  # bytes: the small filesystem's lowest free space over the run
    throttled: int = 0  # seconds checked with the default user's produce quota at 1 B/s
    acknowledged: int = 0  # the steady producer's acknowledged records, over all its runs
    recovery: Recovery | None = None  # the lifts, the steady producer's return after each, the last resorts
    not_judged: int = 0  # lifts not judged: a fault that stalls the steady producer near them, or the soak's end
    restarts: int = 0  # of the steady producer, after each lift of the last resort
    memory_grown: dict[str, int] = field(default_factory=dict)  # process -> bytes its RSS grew once warm


class FaultSoak:
    def __init__(self, work_dir: Path, settings: SoakSettings | None = None):
        self.work_dir, self.settings = work_dir, settings or SoakSettings()
        self.ledger = Ledger()
        self.state = SoakState()
        self.network: TestNetwork | None = None
        self.cluster: LocalKafkaCluster | None = None
        self.aggregator: Aggregator | None = None
        self.fleet: SidecarFleet | None = None
        self.admin: ClusterAdmin | None = None
        self.nemesis: Nemesis | None = None
        self._stop = threading.Event()
        self._started = 0.0
        self._seconds = 0.0
        self.memory: MemoryGrowth | None = None
        self._killed_controller: int | None = None
        self._agents_stopped = False
        self.free: DiskSampler | None = None  # the small filesystem's free bytes every 10 ms
        self._faults: list[Fault] = []
        self._steady = None  # the steady producer's process, and the logs of its runs (the last is its own)
        self._steady_logs: list[Path] = []
        self._steady_before = 0  # records acknowledged in its earlier runs

    # -------------------------------------------------------------- the lab

    def run(self, faults: list[Fault], seconds: float) -> dict:
        """The soak: the lab up, the load on, the schedule run for `seconds`, then the end checks and clean-up.
        The schedule's last fault heals settings.final_quiet() before the end."""
        last_heal = max((fault.at + fault.hold for fault in faults), default=0.0)
        if last_heal > seconds - self.settings.final_quiet():
            raise ValueError(f"the last fault heals at +{last_heal:.0f} s: a soak of {seconds:.0f} s ends with "
                             f"{self.settings.final_quiet():.0f} s without faults")
        self._faults = faults
        # The steady topic's replica grows on the small filesystem all along: room for it besides the RESERVE.
        small_fs = LIMIT + RESERVE + int(STEADY_FILL * seconds)
        with contextlib.ExitStack() as stack:
            self.network = stack.enter_context(TestNetwork(BROKERS, LINK_RATE, subnet=SUBNET))
            self.cluster = stack.enter_context(LocalKafkaCluster(
                brokers=len(BROKERS), small_log_dirs={(SMALL_BROKER, 0): small_fs},
                network_namespaces={broker: (self.network.namespace(broker), self.network.ip(broker))
                                    for broker in BROKERS},
                controllers=CONTROLLERS, controller_host=self.network.bridge_ip, base_dir=self.work_dir / "kafka",
                broker_properties={"log.segment.delete.delay.ms": "1000", "file.delete.delay.ms": "1000"}))
            self.admin = stack.enter_context(ClusterAdmin({"bootstrap_servers": self.cluster.bootstrap_servers}))
            self.aggregator = stack.enter_context(Aggregator(self.cluster.bootstrap_servers, self.work_dir / "agg"))
            self.aggregator.warm_up()
            self.admin.alter_user_quotas({BYSTANDER: {CONSUME: BYSTANDER_RATE}})
            self.fleet = SidecarFleet(self.cluster.broker_ids, self.work_dir, self._agent_properties,
                                      self._beside_its_broker)
            self.fleet.start(cleanup=True)
            stack.callback(self._stop_agents)
            self.admin.create_topic("steady", 3, 3, {"min.insync.replicas": "2"})
            self._start_steady()
            stack.callback(lambda: self._stop_process(self._steady))
            self._seconds = seconds
            self.memory = MemoryGrowth(after=seconds / 2, warm=min(WARM_UP, seconds / 2))
            self._started = time.monotonic()
            self.nemesis = Nemesis(faults, self._actions()).start()
            checker = threading.Thread(target=self._check_every_second, name="soak-checks", daemon=True)
            with DiskSampler(self.cluster.log_dirs(SMALL_BROKER)[0], every=0.01) as self.free:
                checker.start()
                self._flood_rounds(seconds)
                self._await_judgements(FLOOD_REST + 30.0)
                self.nemesis.stop()
                self._stop.set()
                checker.join(30)
                self.state.lowest_free = lowest = self.free.lowest()
                self.ledger.check("no volume full", lowest > 0, f"lowest {lowest} bytes free", self._now())
            self._stop_process(self._steady)
            self._end_checks()
        recovery = self.state.recovery
        return {"events": self.nemesis.events, "ledger": self.ledger, "convergence": self.state.convergence,
                "lowest_free": self.state.lowest_free, "throttled": self.state.throttled,
                "acknowledged": self.state.acknowledged, "memory_grown": self.state.memory_grown,
                "returned": recovery.returned, "last_resorts": recovery.last_resort_episodes,
                "after_last_resort": len(recovery.after_last_resort), "restarts": self.state.restarts,
                "not_judged": self.state.not_judged + recovery.pending()}

    def _beside_its_broker(self, broker: int) -> dict:
        """As in a pod, the agent in its broker's network namespace: a broker cut off is cut off with its agent."""
        return {"host": self.network.ip(broker), "command_prefix": self.network.in_namespace(broker, [])}

    def _agent_properties(self, broker: int) -> dict:
        return {"node.id": broker, PREFIX + "kafka.admin.bootstrap.servers": self.cluster.bootstrap_servers,
                PREFIX + "http.host": self.network.ip(broker),  # reachable from here
                PREFIX + "storage.check.interval": self.settings.check_interval,
                PREFIX + "throttle.factor.validity.duration": f"PT{self.settings.validity:.0f}S",
                PREFIX + "cover.after": self.settings.cover_after,
                PREFIX + "storage.per.volume.limit.min.available.bytes": LIMIT, PREFIX + "produce": PRODUCE_RATE,
                # The descent starts by its horizon alone: the steady topic's replica fills the small filesystem a
                # little all the time, and a start at a level of free space would keep the quota down for good.
                PREFIX + "storage.per.volume.descent.min.available.bytes": LIMIT,
                PREFIX + "storage.local.log.dirs": ",".join(self.cluster.log_dirs(broker)),
                **self.aggregator.agent_properties}

    def _start_steady(self) -> None:
        """The steady producer, a run of its own each time (its acknowledgements in a log per run)."""
        log = self.work_dir / f"steady-{len(self._steady_logs) + 1}.log"
        self._steady_logs.append(log)
        self._steady = producer_performance(self.cluster.bootstrap_servers, "steady", 10**9, STEADY_RECORD,
                                            STEADY_RATE, log, reporting_interval_ms=1000, acks="all",
                                            **{"delivery.timeout.ms": "600000"})

    def _restart_steady(self) -> None:
        """As the hard limit's WARNING tells an operator: a Java producer waits out the 1 B/s throttle it was
        given, days long, after the lift, unless restarted. What its run had acknowledged stays counted."""
        self._stop_process(self._steady)
        self._steady_before = self._steady_acknowledged()
        self.state.restarts += 1
        self._start_steady()

    def _steady_acknowledged(self) -> int:
        """The steady producer's records acknowledged so far, over all its runs."""
        log = self._steady_logs[-1]
        return self._steady_before + (acknowledged_so_far(log.read_text(errors="replace")) if log.exists() else 0)

    def _flood_rounds(self, seconds: float) -> None:
        """Floods onto broker 3 at FLOOD_RATE, a round each FLOOD_ROUND: the topic made, flooded until the round
        ends, then deleted (the disk freed) and FLOOD_REST without a flood, until the soak's time is up."""
        while self._now() + FLOOD_ROUND + FLOOD_REST <= seconds:  # a round its lift can be judged in
            self.state.round += 1
            topic = self.state.flood_topic = f"flood-{self.state.round}"
            with contextlib.suppress(Exception), KafkaAdminClient(bootstrap_servers=self._servers()) as client:
                # one partition on broker 3 alone; a broker down at the moment: the producer waits for it
                client.create_topics([NewTopic(topic, replica_assignments={0: [SMALL_BROKER]},
                                               topic_configs={"segment.bytes": str(4 * MiB)})])
            self.state.flooding = True
            flood = producer_performance(self.cluster.bootstrap_servers, topic, 10**9, RECORD, FLOOD_RATE / RECORD,
                                         self.work_dir / f"{topic}.log", **{"acks": "1", "linger.ms": "5",
                                                                            "batch.size": str(256 * 1024)})
            self._stop.wait(min(FLOOD_ROUND, max(0.0, seconds - self._now())))
            self._stop_process(flood)
            with contextlib.suppress(Exception), KafkaAdminClient(bootstrap_servers=self._servers()) as client:
                client.delete_topics([topic])  # the disk freed, as an operator would
            self.state.flooding, self.state.rested_at = False, self._now()
            self._stop.wait(min(FLOOD_REST, max(0.0, seconds - self._now())))

    def _await_judgements(self, longest: float) -> None:
        """The soak ends once the last lift has come and been judged: a loaded machine lifts later than the rest
        allows for."""
        give_up, recovery = time.monotonic() + longest, self.state.recovery
        while (recovery.pending() or recovery.throttled) and time.monotonic() < give_up \
                and not self._stop.wait(1.0):
            pass

    # -------------------------------------------------------------- the faults

    def _actions(self) -> dict:
        agent = lambda fault: self.fleet[fault.target]  # noqa: E731
        return {
            "kill-agent": (lambda f: agent(f).stop(signal.SIGKILL), lambda f: self.fleet.start([f.target])),
            "pause-agent": (lambda f: agent(f).send(signal.SIGSTOP), lambda f: agent(f).send(signal.SIGCONT)),
            "kill-aggregator": (lambda f: self.aggregator.stop(signal.SIGKILL),
                                lambda f: self.aggregator.start().wait_ready()),
            "kill-broker": (lambda f: self.cluster.kill_broker(f.target), lambda f: self.cluster.start_broker(f.target)),
            "pause-broker": (lambda f: self.cluster.signal_broker(f.target, signal.SIGSTOP),
                             lambda f: self.cluster.signal_broker(f.target, signal.SIGCONT)),
            "cut-broker": (lambda f: self.network.cut(f.target), lambda f: self.network.heal(f.target)),
            "kill-active-controller": (self._kill_active_controller, self._restart_killed_controller),
            "move-records-leader": (self._move_records_leader, lambda f: None),
        }

    def _kill_active_controller(self, fault: Fault) -> None:
        self._killed_controller = active_controller(self.cluster.bootstrap_servers)
        self.cluster.kill_broker(self._killed_controller)

    def _restart_killed_controller(self, fault: Fault) -> None:
        self.cluster.start_broker(self._killed_controller)

    def _move_records_leader(self, fault: Fault) -> None:
        """The replicas rotated and the new first one elected. Kafka refuses any assignment that names a broker
        whose every log dir is cordoned (KIP-1066), as the sidecars cordon a full volume's: tried again until the
        flood round's end frees the volume and a pass lifts the cordon, as an operator would."""
        give_up = time.monotonic() + fault.hold + FLOOD_ROUND
        while True:
            [(key, partition)] = self.admin.describe_partitions([RECORDS_TOPIC]).items()
            rotated = [*partition.replicas[1:], partition.replicas[0]]
            done = reassign_partitions(self.cluster.bootstrap_servers, {key: rotated}, "--execute")
            refused = done.stderr + done.stdout
            if done.returncode == 0 or "are cordoned" not in refused or time.monotonic() > give_up \
                    or self._stop.wait(2.0):
                break
        assert done.returncode == 0, refused
        elect_preferred_leader(self.cluster.bootstrap_servers, *key)

    # -------------------------------------------------------------- the checks

    def _check_every_second(self) -> None:
        convergence = Convergence(self.settings.converge_within())
        self.state.convergence = convergence.after
        recovery = self.state.recovery = Recovery(STEADY_RATE, PRODUCE_RATE)
        rest_judged = None  # when the rest last judged began
        with (self.work_dir / "timeline.csv").open("w", buffering=1) as timeline:
            timeline.write("at,small_free_bytes,default_user_produce_quota,fault,"
                           + ",".join(f"rss_mib {name}" for name in self._process_names()) + "\n")
            while not self._stop.wait(1.0):
                at = self._now()
                rss = self._sample_memory(at)
                recovery.acknowledged(at, self._steady_acknowledged())
                self._judge_lifts(recovery, at)
                try:
                    volumes = self.admin.describe_volumes(self.cluster.broker_ids, datetime.now(timezone.utc))
                    quotas = self.admin.describe_user_quotas([None, BYSTANDER])
                except Exception:  # a broker down or paused: the next second asks again
                    self._check_brokers_alive(at)
                    continue
                at = self._now()  # what was read is of now: the reads can take seconds while a broker is paused
                self._check_brokers_alive(at)
                newest = self.free.samples[-1][1] if self.free.samples else None
                self.ledger.check("no volume full", newest is None or newest > 0, f"{newest} bytes free", at)
                if newest is not None and newest < LIMIT - 32 * MiB:  # past the reserve's usual use: by what?
                    with (self.work_dir / "small-fs-usage.txt").open("a") as usage:
                        usage.write(f"+{at:.1f} s: {what_uses(self.cluster.log_dirs(SMALL_BROKER)[0])}\n")
                offline = [f"{v.broker_id}:{v.log_dir} {v.error}" for v in volumes if v.error is not None]
                self.ledger.check("no log dir offline", not offline, ", ".join(offline), at)
                self.ledger.check("bystanders untouched", quotas.get(BYSTANDER, {}).get(CONSUME) == BYSTANDER_RATE,
                                  f"{BYSTANDER}'s producer quota is {quotas.get(BYSTANDER)}", at)
                small = next((v for v in volumes if v.broker_id == SMALL_BROKER and v.usable), None)
                in_force = quotas.get(None, {}).get(PRODUCE)
                fault = self.nemesis.active()
                self.state.throttled += in_force == 1.0
                if recovery.quota(at, in_force) == "lift after the last resort":
                    self._restart_steady()
                timeline.write(f"{at:.1f},{small.available_bytes if small else ''},{in_force or ''},"
                               f"{fault.kind if fault else ''}," + ",".join(rss) + "\n")
                quiet = self.nemesis.quiet_since()
                if quiet is None or small is None:
                    continue
                convergence.healed(self.nemesis.events[-1].fault.kind, quiet)
                free, flooding, rested_at = small.available_bytes, self.state.flooding, self.state.rested_at
                if self._quota_fits(in_force, free, flooding):
                    convergence.agree(at)
                    self.ledger.check("quotas converge", True, "", at)
                elif (since := convergence.differ(at)) is not None:
                    self.ledger.check("quotas converge", False, f"the default user's quota {in_force} with "
                                      f"{free / MiB:.0f} MiB free since +{since:.0f} s, the last "
                                      f"heal at +{quiet:.0f} s", at)
                # Room returned stops the fill: the throttle lifts at the next passes, not a validity later (judged
                # once a rest, when those passes are due).
                due = at - max(rested_at, quiet) >= self.settings.lift_within()
                if not flooding and rest_judged != rested_at and due:
                    rest_judged = rested_at
                    self.ledger.check("quotas converge", in_force == PRODUCE_RATE, f"the default user's quota "
                                      f"{in_force} {at - rested_at:.0f} s after the flood's topic was deleted "
                                      f"({free / MiB:.0f} MiB free), the last heal at +{quiet:.0f} s", at)

    @staticmethod
    def _quota_fits(in_force: float | None, free: int, flooding: bool) -> bool:
        """The default user's producer quota the volume calls for: at or below the hard limit its 1 B/s; above it,
        while the flood fills the volume, a step of the descent (down to the floor) or none yet; with the flood's
        topic deleted the quota lifted. Near the line the hard limit's 1 B/s may hold or not: either is right."""
        if free <= LIMIT:
            return in_force == 1.0
        descent = in_force is not None and FLOOR <= in_force <= PRODUCE_RATE
        if free < LIFTED_ABOVE:
            return in_force == 1.0 or descent
        return descent if flooding else in_force == PRODUCE_RATE

    def _judge_lifts(self, recovery: Recovery, at: float) -> None:
        """Each lift 30 s on: was the steady producer back? Not judged when a fault that stalls it came near."""
        for lift, back, best in recovery.due(at):
            stall = next((fault for fault in self._faults if fault.kind in STALLS_PRODUCER
                          and fault.at < lift + 30.0 and fault.at + fault.hold > lift - 10.0), None)
            if stall is not None:
                self.state.not_judged += 1
                continue
            if back is not None:
                recovery.returned.append(back)
            self.ledger.check("producers back after a lift", back is not None,
                              f"the steady producer's best 5 s after the lift at +{lift:.0f} s: {best:.0f} "
                              f"records/s (its rate {STEADY_RATE})", at)

    def _check_brokers_alive(self, at: float) -> None:
        """A broker that exited without the nemesis killing it: a log dir offline takes a broker with one dir down."""
        fault = self.nemesis.active()
        held = {fault.target} if fault is not None and fault.kind == "kill-broker" else set()
        if fault is not None and fault.kind == "kill-active-controller":
            held.add(self._killed_controller)
        died = sorted(self.cluster.exited_brokers() - held)
        self.ledger.check("no log dir offline", not died, f"broker {died} exited by itself", at)

    def _end_checks(self) -> None:
        at = self._now()
        read, acknowledged = self._steady_read_back()
        self.state.acknowledged = acknowledged
        self.ledger.check("every acknowledged record read", read >= acknowledged > 0,
                          f"{acknowledged} acknowledged, {read} in the topic", at)
        self._sample_memory(at)
        self.state.memory_grown = grown = self.memory.grown()
        too_much = {name: g for name, g in grown.items()
                    if g > (AGGREGATOR_GROWTH if name.startswith("aggregator") else AGENT_GROWTH)}
        self.ledger.check("memory steady", bool(grown) and not too_much,
                          ", ".join(f"{n} +{g / MiB:.0f} MiB" for n, g in too_much.items()) or "none compared", at)
        self._stop_agents()
        self.ledger.check("nothing left after clean-up", not (left := self._left_by_sidecars()), f"left: {left}", at)
        logs = [*(sidecar.log_path for sidecar in self.fleet), self.aggregator.process.log_path]
        tracebacks = [path.name for path in logs if TRACEBACK.search(path.read_text(errors="replace"))]
        self.ledger.check("no traceback", not tracebacks, f"in {tracebacks}", at)

    def _left_by_sidecars(self) -> dict:
        """What the sidecars set and did not hand back: quotas (the bystander's is the operator's), cordons, records."""
        left = {f"quota of {entity}": keys for entity, keys in self.admin.describe_user_quotas().items()
                if entity != BYSTANDER}
        # A broker's configs are read from it: one that exited by itself (counted already) is named as not read.
        exited = self.cluster.exited_brokers()
        running = [broker for broker in self.cluster.broker_ids if broker not in exited]
        cordoned = self.admin.describe_configs("broker", running, [cordons.KEY])
        left.update({f"broker {broker}'s {cordons.KEY}": configs[cordons.KEY]
                     for broker, configs in cordoned.items() if configs.get(cordons.KEY)})
        left.update({f"broker {broker}'s {cordons.KEY}": "not read: the broker exited"
                     for broker in self.cluster.broker_ids if broker in exited})
        with ClusterStore({"bootstrap_servers": self._servers()}) as store:
            left.update({f"record {key}": value for key, value in store.read_all(create=False).items()})
        return left

    def _steady_read_back(self) -> tuple[int, int]:
        """(the records read back from the steady topic, those ProducerPerformance saw acknowledged)."""
        read, _ = read_back(self._servers(), "steady")
        return read, self._steady_acknowledged()

    # -------------------------------------------------------------- helpers

    def _sample_memory(self, at: float) -> list[str]:
        """Each process's RSS into the memory invariant; in MiB for the timeline (empty: not running)."""
        found = self._rss()
        for name, (pid, rss) in found.items():
            self.memory.sample(at, name, pid, rss)
        return [f"{found[name][1] / MiB:.0f}" if name in found else "" for name in self._process_names()]

    def _process_names(self) -> list[str]:
        return [f"agent {sidecar.name}" for sidecar in self.fleet] + ["aggregator"]

    def _rss(self) -> dict[str, tuple[int, int]]:
        """Each running process of the quota work: (its pid, its RSS with its children's)."""
        processes = dict(zip(self._process_names(), [*(sidecar.process for sidecar in self.fleet),
                                                      self.aggregator.process.process]))
        found = {}
        for name, process in processes.items():
            with contextlib.suppress(AttributeError, psutil.Error):  # not started, or gone (a fault in force)
                found[name] = (process.pid, _rss(process.pid))
        return found

    def _servers(self) -> str:
        return self.cluster.bootstrap_servers

    def _stop_agents(self) -> None:
        """SIGTERM: each runs its clean-up (--cleanup) and exits; once."""
        if self.fleet is not None and not self._agents_stopped:
            self._agents_stopped = True
            self.fleet.stop()

    @staticmethod
    def _stop_process(process) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except Exception:
                process.kill()

    def _now(self) -> float:
        return time.monotonic() - self._started


def _rss(pid: int) -> int:
    process = psutil.Process(pid)
    return process.memory_info().rss + sum(child.memory_info().rss for child in process.children(recursive=True))


def _seconds(duration: str) -> float:
    return isodate.parse_duration(duration).total_seconds()

