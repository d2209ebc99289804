"""`make demo`: three sidecars keep a real Kafka broker's disk from filling up.

A local 3-broker cluster runs with broker 3's only log dir on an 80 MiB tmpfs. One agent per broker watches
every log dir; one aggregator (`quota-sidecar aggregate`, its pipeline on the same cluster) decides for them. A producer floods a topic that lives only
on broker 3; once the free space there is what the producer writes in the agent's reaction time above the
limit, the sidecars set the default user's producer quota to 1 B/s and the producer stalls before the disk is
full. Deleting the topic frees the disk and the sidecars lift the throttle again.

Everything started here is stopped again, in reverse order, also on Ctrl-C, SIGTERM or an error; every
wait has a deadline. The sidecars get SIGTERM and run --cleanup, and the demo checks that it removed the
quotas they set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from kafka import KafkaAdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the lab: tests/harness, not installed

from harness.spark.aggregator import Aggregator  # noqa: E402
from harness.cluster.disk import DiskSampler  # noqa: E402
from harness.clients.flood import Flood  # noqa: E402
from harness.cluster.local_cluster import LocalKafkaCluster, SmallFilesystemUnavailable  # noqa: E402
from harness.agents.sidecar_process import EXECUTABLE, SidecarError, SidecarFleet  # noqa: E402
from harness.waiting import WaitTimeout, eventually  # noqa: E402
from quota_sidecar.common.errors import AdminError  # noqa: E402
from quota_sidecar.configuration.properties import PREFIX, SIDECAR_CLIENT_ID  # noqa: E402
from quota_sidecar.decide.quotas import entity_label  # noqa: E402
from quota_sidecar.kafka_clients.admin import ClusterAdmin  # noqa: E402

MiB = 1 << 20
SMALL_BROKER = 3
SMALL_FS_BYTES = 80 * MiB
# The sidecars' limit. Between crossing it and the stall the producer writes on for a poll interval plus
# a pass (the aggregator's decision, seconds on a busy machine): ~10 MiB at the rate below, so 24 MiB leaves a clear
# margin.
MIN_AVAILABLE_BYTES = 24 * MiB
WATCH_INTERVAL = 0.1  # s: storage.local.watch.interval, its default
PRODUCE_BYTES_PER_SECOND = 5_000_000  # per principal and broker: fills the 56 MiB above the limit in ~12 s
TOPIC = "flood"
RECORD_BYTES = 100 * 1024
MAX_UNACKED_RECORDS = 20  # kafka-python 3 has no buffer_memory: bound what waits in the producer ourselves

# Deleting a topic should free its disk space within seconds (the defaults wait a minute).
BROKER_PROPERTIES = {"log.segment.delete.delay.ms": "1000", "file.delete.delay.ms": "1000"}

SAMPLE_EVERY = 0.5  # seconds between looks at the disk and at the agent the demo asks
PROGRESS_EVERY = 3.0  # seconds between progress lines
STALLED_AFTER = 3.0  # no acknowledgement for this long under the 1 B/s quota counts as a stall
SIDECARS_READY_TIMEOUT = 180.0  # the first pass waits for the aggregator's first decision: slow on 2 cores
STALL_TIMEOUT = 90.0
LIFT_TIMEOUT = 60.0
SIDECAR_STOP_TIMEOUT = 45.0

STARTED = time.monotonic()


class DemoError(Exception):
    """The demo did not go as it should; the message says what happened."""


def main() -> int:
    # SIGTERM takes the same way out as Ctrl-C (also when started with SIGINT ignored, as `cmd &` does):
    # KeyboardInterrupt, and every context manager below exits.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.ERROR)  # a throttled producer warns on every response
    try:
        run_demo()
    except SmallFilesystemUnavailable as error:
        print(f"\nThe demo needs a small filesystem for broker {SMALL_BROKER}'s log dir: {error}")
        return 1
    except (DemoError, SidecarError, WaitTimeout) as error:
        print(f"\nDEMO FAILED: {error}")
        return 1
    except KeyboardInterrupt:
        print("\nInterrupted; everything the demo started has been stopped.")
        return 130
    return 0


def run_demo() -> None:
    with contextlib.ExitStack() as stack:  # unwinds in reverse: sidecars, aggregator, cluster, files
        try:
            show_the_demo(stack)
        finally:
            # Only clean-up follows, every wait in it bounded: a second Ctrl-C must not cut it short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    say("stopped the sidecars, the aggregator and the Kafka cluster; tmpfs unmounted, temp dirs removed")


def show_the_demo(stack: contextlib.ExitStack) -> None:
    demo_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="quota-sidecar-demo-")))

    section(f"Kafka: 3 brokers, broker {SMALL_BROKER}'s only log dir on a {SMALL_FS_BYTES // MiB} MiB tmpfs")
    cluster = stack.enter_context(LocalKafkaCluster(
        brokers=3, small_log_dirs={(SMALL_BROKER, 0): SMALL_FS_BYTES}, broker_properties=BROKER_PROPERTIES))
    small_dir = cluster.log_dirs(SMALL_BROKER)[0]
    say(f"cluster serving at {cluster.bootstrap_servers}; broker {SMALL_BROKER}'s log dir: {small_dir}")

    section("One aggregator for the cluster; one agent per broker, each watching its broker's log dirs")
    aggregator = stack.enter_context(Aggregator(cluster.bootstrap_servers, demo_dir / "aggregator"))
    say(f"aggregator deciding for the agents publishing to {cluster.bootstrap_servers}")
    sidecars = stack.enter_context(SidecarProcesses(cluster, demo_dir))
    sidecars.wait_until_ready()

    section(f"Flooding topic {TOPIC!r} (one partition, only on broker {SMALL_BROKER}) as User:alice")
    acts = {"aggregator running": flood_act(cluster, small_dir, sidecars)}
    section("Deleting the topic; the aggregator's next decision lifts the throttle")
    lifts = {"aggregator running": lift_act(cluster, small_dir, sidecars)}

    section("The aggregator killed (SIGKILL, as a crash would); flooding again")
    aggregator.stop(signal.SIGKILL)
    say("no decisions now: each agent's passes fail, and its own watch is all that protects its broker's disk")
    acts["aggregator killed"] = flood_act(cluster, small_dir, sidecars)
    section("The aggregator started again (from its checkpoint); deleting the topic")
    aggregator.start().wait_ready()
    lifts["aggregator killed"] = lift_act(cluster, small_dir, sidecars)

    section("Summary")
    for name, act in acts.items():
        print(f"  {name}:")
        print(f"    acknowledged records:               {act['acked']} ({act['acked'] * RECORD_BYTES / MiB:.1f} MiB)")
        print(f"    lowest free space on broker {SMALL_BROKER}'s fs: {act['lowest'] / MiB:.1f} MiB "
              f"(limit {MIN_AVAILABLE_BYTES / MiB:.0f} MiB, filesystem {SMALL_FS_BYTES / MiB:.0f} MiB)")
        if act["crossed"] is None:  # the verdict came the agent's reaction time ahead of the limit
            print(f"    limit never crossed: quota written with {act['free_when_written'] / MiB:.1f} MiB free "
                  f"(by agent {SMALL_BROKER}'s local watch, which samples every {WATCH_INTERVAL} s)")
        else:
            print(f"    limit crossed -> quota written:     {act['written'] - act['crossed']:+.2f} s (by agent "
                  f"{SMALL_BROKER}'s local watch, which samples every {WATCH_INTERVAL} s)")
            print(f"    limit crossed -> producer stalled:  {act['stalled'] - act['crossed']:+.1f} s")
        print(f"    topic deleted -> throttle lifted:   {lifts[name]:.1f} s")

    section("Stopping everything")


def flood_act(cluster: LocalKafkaCluster, small_dir: str, sidecars: SidecarProcesses) -> dict:
    """Flood until the producer stalls under the throttle: what it cost and how fast the quota came."""
    create_flood_topic(cluster)
    disk = DiskWatch(small_dir)
    started = time.monotonic()
    with DiskSampler(small_dir, every=0.01) as fine, \
            Flood(cluster.sasl_client_config("alice"), TOPIC, RECORD_BYTES, MAX_UNACKED_RECORDS, batch_size=MiB) as flood:
        _, stalled_at = flood_until_stalled(flood, disk, sidecars)
        show_df(small_dir)
    if flood.failure is not None:
        say(f"WARNING: the producer did not close cleanly: {flood.failure!r}")
    written = sidecars.asked.first_line(r"producer_byte_rate: \S+ -> 1$", after=started)
    if written is None:
        raise DemoError("the producer stalled, but no agent wrote the quota of 1 B/s")
    return {"acked": flood.acked_records, "lowest": fine.lowest(), "crossed": fine.crossed_at(MIN_AVAILABLE_BYTES),
            "written": written.at, "free_when_written": fine.free_at(written.at), "stalled": stalled_at}


def lift_act(cluster: LocalKafkaCluster, small_dir: str, sidecars: SidecarProcesses) -> float:
    """Delete the topic and wait for the throttle to go: how long that took."""
    deleted_at, deleted_on = time.monotonic(), datetime.now(timezone.utc)
    delete_flood_topic(cluster)
    lifted_at = wait_for_lift(DiskWatch(small_dir), sidecars, deleted_on)
    print(sidecars.status_table())
    return lifted_at - deleted_at


# ---------------------------------------------------------------- output


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)


def show_df(path: str) -> None:
    result = subprocess.run(["df", "-h", path], capture_output=True, text=True, timeout=10)
    print(result.stdout.rstrip(), flush=True)


# ---------------------------------------------------------------- the sidecars


class SidecarProcesses:
    """`quota-sidecar run --cleanup`, one process per broker (harness.agents.sidecar_process), each with its own log."""

    def __init__(self, cluster: LocalKafkaCluster, demo_dir: Path):
        self.cluster = cluster
        self.fleet = SidecarFleet(cluster.broker_ids, demo_dir, lambda broker_id: {
            "node.id": broker_id,
            PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
            PREFIX + "storage.check.interval": "PT2S",
            PREFIX + "storage.per.volume.limit.min.available.bytes": MIN_AVAILABLE_BYTES,
            PREFIX + "produce": PRODUCE_BYTES_PER_SECOND,
            # What the chart mounts read-only: the broker's log dirs, sampled every storage.local.watch.interval.
            PREFIX + "storage.local.log.dirs": ",".join(cluster.log_dirs(broker_id)),
        })
        # The agent the demo asks, as an operator would ask the one beside the broker whose disk fills: its own
        # watch sees the flood, with or without the aggregator.
        self.asked = self.fleet[SMALL_BROKER]

    def __enter__(self) -> SidecarProcesses:
        self.fleet.start(cleanup=True, ready_timeout=None)
        say(f"sidecars started for brokers {self.cluster.broker_ids}, HTTP ports {[s.port for s in self.fleet]}")
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()
        left = self.quotas_left()
        if left or exc_type not in (None, KeyboardInterrupt):
            self.print_log_tails()
        if left == {}:
            say("after the sidecars' clean-up no quota is left: the default user's and the sidecars' own are gone")
        elif left and exc_type is None:
            raise DemoError(f"quotas left after the sidecars' clean-up: {left}")
        elif left:  # another error is on its way out already: do not hide it
            say(f"WARNING: quotas left after the sidecars' clean-up: {left}")

    def quotas_left(self) -> dict | None:
        """The quotas the sidecars set, which --cleanup must have removed; None if they could not be read."""
        entities = [None, (None, SIDECAR_CLIENT_ID)]  # the default user; the sidecars' own clients
        try:
            with ClusterAdmin({"bootstrap_servers": self.cluster.bootstrap_servers}) as admin:
                in_force = admin.describe_user_quotas(entities)
        except AdminError as error:
            say(f"WARNING: could not read the quotas after the sidecars' clean-up: {error}")
            return None
        return {entity_label(entity): keys for entity, keys in in_force.items() if keys}

    def wait_until_ready(self) -> None:
        """Until every sidecar made its first poll and the agent asked reports the unthrottled quota in force."""
        for sidecar in self.fleet:
            sidecar.wait_ready(SIDECARS_READY_TIMEOUT)
        eventually(lambda: producer_quota(self.status()) == PRODUCE_BYTES_PER_SECOND, SIDECARS_READY_TIMEOUT,
                   "the unthrottled quota in the asked agent's status")
        say(f"every sidecar polls every 2 s; the default user may produce {PRODUCE_BYTES_PER_SECOND:,} B/s "
            f"per broker until a volume has <= {MIN_AVAILABLE_BYTES // MiB} MiB free")

    def status(self) -> dict | None:
        """The asked agent's /status as JSON; None when it does not answer."""
        return self.asked.get("/status")

    def lifted_everywhere(self, since: datetime) -> bool:
        """Whether every agent's last decision, from a look after `since`, lifts the throttle and steps nothing
        down. Until then an agent's decision from an older look at the volumes may lower the quota again, and
        with the aggregator killed next it would stay there."""
        for sidecar in self.fleet:
            status = sidecar.get("/status")
            last_success = status and status["throttle"]["last_success"]
            if not last_success or datetime.fromisoformat(last_success) < since or status["descent"] is not None \
                    or throttle_factor(status) != 1.0:
                return False
        return True

    def status_table(self) -> str:
        """What `quota-sidecar status` shows a person for the agent asked."""
        # --config as well: `status --url` alone refuses to run without a bootstrap.servers.
        command = [str(EXECUTABLE), "status", "--config", str(self.asked.config_path), "--url", self.asked.url]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return (result.stdout + result.stderr).rstrip()

    def stop(self) -> None:
        """SIGTERM to all at once (each finishes its pass, then --cleanup); SIGKILL at the deadline."""
        try:
            codes = self.fleet.stop(timeout=SIDECAR_STOP_TIMEOUT)
        except SidecarError as error:
            say(f"WARNING: {str(error).splitlines()[0]}: it was killed")
            return
        say(f"sidecars stopped (exit codes {codes})")

    def print_log_tails(self, lines: int = 20) -> None:
        for sidecar in self.fleet:
            print(f"--- last lines of {sidecar.name}'s log ---", sidecar.log_tail(lines), sep="\n")


def producer_quota(status: dict | None) -> float | None:
    """The default user's producer_byte_rate in the asked agent's status, None when unknown or unset."""
    for row in (status or {}).get("quotas_in_force", []):
        if row["entity"] == "<default user>":
            return row["producer_byte_rate"]
    return None


def throttle_factor(status: dict | None) -> float | None:
    return None if status is None else status["throttle"]["factor"]


def factor_text(status: dict | None) -> str:
    factor = throttle_factor(status)
    return "?" if factor is None else f"{factor:.1f}"


# ---------------------------------------------------------------- the topic, the producer, the disk


def create_flood_topic(cluster: LocalKafkaCluster) -> None:
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics({TOPIC: {"assignments": {0: [SMALL_BROKER]}}}, wait_for_metadata=True)


def delete_flood_topic(cluster: LocalKafkaCluster) -> None:
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.delete_topics([TOPIC], timeout_ms=30_000)


class DiskWatch:
    """Free bytes of the small filesystem: the latest, the lowest, and when the limit was first reached."""

    def __init__(self, path: str):
        self.path = path
        self.free = self.min_free = self._free_now()
        self.crossed_at: float | None = None

    def sample(self) -> int:
        self.free = self._free_now()
        self.min_free = min(self.min_free, self.free)
        if self.crossed_at is None and self.free <= MIN_AVAILABLE_BYTES:
            self.crossed_at = time.monotonic()
        return self.free

    def _free_now(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize


# ---------------------------------------------------------------- the two waits that tell the story


def flood_until_stalled(flood: Flood, disk: DiskWatch, sidecars: SidecarProcesses) -> tuple[float, float]:
    """Print progress until the producer stalls under the throttle; (limit crossed at, stalled at)."""
    deadline = time.monotonic() + STALL_TIMEOUT
    progress = Progress(flood)
    throttled = False
    while True:
        time.sleep(SAMPLE_EVERY)
        disk.sample()
        status = sidecars.status()
        progress.maybe_print(disk, status)
        if flood.failure is not None:
            raise DemoError(f"the producer failed: {flood.failure!r}")
        if disk.free < RECORD_BYTES:
            raise DemoError(f"broker {SMALL_BROKER}'s filesystem filled up before the producer stalled")
        if not throttled and throttle_factor(status) == 0.0 and producer_quota(status) == 1:
            throttled = True
            say(f"throttle engaged: agent {SMALL_BROKER} sees its dir at (or about to reach) the limit; the default "
                "user's producer quota is 1 B/s")
            print(sidecars.status_table(), flush=True)
        quiet_for = time.monotonic() - (flood.last_ack_at or time.monotonic())
        if throttled and quiet_for >= STALLED_AFTER:
            say(f"producer stalled: no acknowledgement for {quiet_for:.1f} s "
                f"({flood.acked_records * RECORD_BYTES / MiB:.1f} MiB acknowledged, "
                f"{disk.free / MiB:.1f} MiB free)")
            return disk.crossed_at, flood.last_ack_at
        if time.monotonic() > deadline:
            raise DemoError(f"the producer did not stall within {STALL_TIMEOUT:.0f}s of flooding")


def wait_for_lift(disk: DiskWatch, sidecars: SidecarProcesses, since: datetime) -> float:
    """Wait until the asked agent reports factor 1.0 and the full quota again, and every agent's decision since
    `since` lifts; return when that was seen."""
    deadline = time.monotonic() + LIFT_TIMEOUT
    next_line = time.monotonic()
    while True:
        time.sleep(SAMPLE_EVERY)
        disk.sample()
        status = sidecars.status()
        if producer_quota(status) == PRODUCE_BYTES_PER_SECOND and sidecars.lifted_everywhere(since):
            lifted_at = time.monotonic()
            say(f"throttle lifted: factor 1.0, the default user's producer quota is "
                f"{PRODUCE_BYTES_PER_SECOND:,} B/s again; broker {SMALL_BROKER} free {disk.free / MiB:.1f} MiB")
            return lifted_at
        if time.monotonic() >= next_line:
            say(f"broker {SMALL_BROKER} free {disk.free / MiB:5.1f} MiB | factor {factor_text(status)}")
            next_line += PROGRESS_EVERY
        if time.monotonic() > deadline:
            raise DemoError(f"the throttle was not lifted within {LIFT_TIMEOUT:.0f}s of deleting the topic")


class Progress:
    """A progress line every few seconds: bytes acknowledged, throughput since the last line, disk, factor."""

    def __init__(self, flood: Flood):
        self.flood = flood
        self.last_at = time.monotonic()
        self.last_records = 0

    def maybe_print(self, disk: DiskWatch, status: dict | None) -> None:
        now, records = time.monotonic(), self.flood.acked_records
        if now - self.last_at < PROGRESS_EVERY:
            return
        rate = (records - self.last_records) * RECORD_BYTES / (now - self.last_at)
        say(f"acked {records * RECORD_BYTES / MiB:5.1f} MiB | producer {rate / 1e6:4.1f} MB/s | "
            f"broker {SMALL_BROKER} free {disk.free / MiB:5.1f} MiB | factor {factor_text(status)}")
        self.last_at, self.last_records = now, records


if __name__ == "__main__":
    sys.exit(main())
