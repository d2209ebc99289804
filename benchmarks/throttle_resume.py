"""What a producer experiences through the descent of the producer quotas and after the lift, with the sidecar deciding.

Per run: a 1-broker cluster whose only log dir is a FILESYSTEM-byte tmpfs; a topic `room` filled first
(through librdkafka) so that a producer at `--rate` reaches the descent within about half a minute;
`quota-sidecar run` beside the broker (hard limit LIMIT, `produce` 1 GiB/s so that the hard limit's factor 0 means
1 B/s, check interval PT2S, the descent's settings at their defaults: start at twice the hard limit, horizon
2 x (check interval + step), ratio 3, step PT36S, floor 26214 B/s), one `quota-sidecar aggregate` deciding for every
run (common.aggregator_running). Then `--producers` producers of one client, each a principal of its own over
SASL/PLAIN (User:producer-0, producer-1, ...; none has a quota of its own, so each gets the default user's), at
`--rate` bytes/s together in records of RECORD bytes (acks=all, linger 5 ms, 128 KiB batches) into a one-partition
topic, once a poll of the sidecar succeeded (the aggregator answered). Once the sidecar's quota reached the floor
(or, with `--reserve-too-small`, 1 B/s), HOLD seconds later, `room` is deleted (its files go 1 s later): the volume stops filling and the sidecar lifts. Then `--after` seconds.
A run whose filesystem fills (its broker goes down with its only log dir) ends there.

Clients: Kafka's ProducerPerformance (`java`, reporting every 100 ms, max.block.ms 10 minutes: it exits at the
first send that waited that long for room in its buffer; its throttler keeps the average rate since its start, so
it catches up after a stall), librdkafka through confluent-kafka and kafka-python 3.x (both in
benchmarks/steady_producer.py, paced without catching up). Each client's acknowledgements are stamped by this
process as they are reported (within ~0.15 s). Per run:

- descent: the sidecar's first line lowering the default user's producer_byte_rate, from the producers' start;
  the quota's steps; lifts during the descent (a line raising it before `room` was deleted);
- floor (or 1 B/s) reached, from the descent's start; bytes written (statvfs) from the descent's start to it;
- longest silence of a producer between the descent's start and the lift (the longest gap between two
  acknowledgements);
- lowest free space; whether the hard limit was reached (free <= LIMIT, or a 1 B/s quota written);
- lift: the sidecar's first line raising the quota after the deletion, from the deletion; whether the sidecar
  wrote 1 B/s again after it (what a producer catching up after the lift can do);
- first ack: from the lift to a producer's first acknowledgement after it; 90 %: from the lift to the start of its
  first 2 s in which it had acknowledged >= 90 % of its rate in the 10 s before the descent. "> N s": not within
  the `--after` seconds watched; the most a producer had acknowledged in 1 s within 30 s of the lift.

    .venv/bin/python benchmarks/throttle_resume.py [--clients java,librdkafka,kafka-python] [--producers 1]
        [--rate 2000000] [--after 60] [--reserve-too-small] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import MiB, LoadWatch, Result, Stats, aggregator_running, cell, create_topics, delete_topics, \
    print_result, provenance, sidecar_properties, sidecar_running, table, this_command
from harness.cluster.disk import DiskSampler, free_bytes
from harness.cluster.kafka_tools import producer_performance
from harness.cluster.local_cluster import DEFAULT_USERS, LocalKafkaCluster
from harness.waiting import eventually

TITLE = "Producers through the descent and after the lift"
LIMIT, FILESYSTEM = 64 * MiB, 512 * MiB
RECORD = 16 << 10
FLOOR, LAST_RESORT = 26214, 1
CHECK_INTERVAL, STEP = 2.0, 36.0
HOLD = 20.0  # s at the floor (or at 1 B/s) before the room returns
LEAD = 30.0  # s of writing at the full rate before the descent should start
CLIENTS = ("java", "librdkafka", "kafka-python")
BROKER = {"file.delete.delay.ms": "1000", "log.segment.delete.delay.ms": "1000"}  # a deleted topic's room in 1 s
_QUOTA = re.compile(r"quota <default user> producer_byte_rate: (\S+) -> (\S+)$")


def rate_value(text: str) -> float:
    return float("inf") if text in ("none", "unlimited") else float(text)


# ---------------------------------------------------------------- the producers


@dataclass
class Producer:
    """One producer process and its acknowledgements: (monotonic time, records) as reported."""
    client: str
    principal: str
    process: subprocess.Popen
    acks: list[tuple[float, int]] = field(default_factory=list)
    failed: int = 0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_producer(client: str, cluster: LocalKafkaCluster, principal: str, rate: float, work_dir: Path) -> Producer:
    password = cluster.users[principal]
    if client == "java":
        login = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{principal}" '
                 f'password="{password}";')
        log = work_dir / f"{principal}-java.log"
        process = producer_performance(cluster.sasl_bootstrap_servers, "resume", 10**9, RECORD, rate / RECORD, log,
                                       reporting_interval_ms=100, acks="all", **{
                                           "linger.ms": 5, "batch.size": 128 << 10, "compression.type": "none",
                                           # ProducerPerformance exits at a send that waited this long for room
                                           # in its buffer: 10 minutes, so that it stays to be measured.
                                           "max.block.ms": 600_000,
                                           "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                           "sasl.jaas.config": login})
        producer = Producer(client, principal, process)
        threading.Thread(target=_tail_java, args=(producer, log), daemon=True).start()
        return producer
    if client == "librdkafka":
        config = {"acks": "all", "linger.ms": 5, "batch.size": 128 << 10, "compression.codec": "none",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": principal,
                  "sasl.password": password}
    else:
        config = {"acks": "all", "linger_ms": 5, "batch_size": 128 << 10, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": "PLAIN", "sasl_plain_username": principal, "sasl_plain_password": password}
    with open(work_dir / f"{principal}-{client}.err", "ab") as errors:
        process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("steady_producer.py")), client,
                                    cluster.sasl_bootstrap_servers, "resume", str(rate), str(RECORD),
                                    json.dumps(config)], stdout=subprocess.PIPE, stderr=errors,
                                   stdin=subprocess.DEVNULL, text=True)
    producer = Producer(client, principal, process)
    threading.Thread(target=_read_python, args=(producer,), daemon=True).start()
    return producer


def _read_python(producer: Producer) -> None:
    for line in producer.process.stdout:
        at, acked, failed = line.split()
        if int(acked):
            producer.acks.append((float(at), int(acked)))
        producer.failed += int(failed)


def _tail_java(producer: Producer, log: Path) -> None:
    """ProducerPerformance's window lines, stamped when they appear in its log (checked every 50 ms)."""
    offset, pending = 0, ""
    while True:
        try:
            with open(log, errors="replace") as output:
                output.seek(offset)
                text = output.read()
                offset = output.tell()
        except FileNotFoundError:
            text = ""
        now = time.monotonic()
        pending += text
        *lines, pending = pending.split("\n")
        for line in lines:
            if (match := re.match(r"(\d+) records sent, ", line)) and " 50th" not in line and int(match.group(1)):
                producer.acks.append((now, int(match.group(1))))
            elif re.match(r"\S*Exception", line):
                producer.failed += 1
        if producer.process.poll() is not None and not text:
            return
        time.sleep(0.05)


# ---------------------------------------------------------------- what a producer experienced


def acked_between(acks: list[tuple[float, int]], start: float, end: float) -> int:
    return sum(records for at, records in acks if start <= at < end)


def first_ack_after(acks: list[tuple[float, int]], moment: float) -> float | None:
    return next((at for at, _ in acks if at >= moment), None)


def back_to_rate(acks: list[tuple[float, int]], moment: float, records_per_second: float,
                 window: float = 2.0) -> float | None:
    """The start of the first `window` after `moment`, beginning at an acknowledgement, in which at least 90 % of
    `records_per_second` were acknowledged; None if none."""
    for at, _ in acks:
        if at >= moment and acked_between(acks, at, at + window) >= 0.9 * records_per_second * window:
            return at
    return None


def longest_silence(acks: list[tuple[float, int]], start: float, end: float) -> float:
    """The longest time without an acknowledgement in [start, end], its edges counted."""
    times = [start, *(at for at, _ in acks if start <= at <= end), end]
    return max(b - a for a, b in zip(times, times[1:]))


# ---------------------------------------------------------------- one run


def one_run(client: str, producers: int, rate: float, after: float, too_small: bool, pipeline: dict,
            work_dir: Path) -> dict:
    users = {**DEFAULT_USERS, **{f"producer-{i}": f"producer-{i}-secret" for i in range(producers)}}
    with LocalKafkaCluster(brokers=1, users=users, small_log_dirs={(1, 0): FILESYSTEM},
                           broker_properties=BROKER) as cluster:
        small_dir = cluster.log_dirs(1)[0]
        create_topics(cluster.bootstrap_servers, {"resume": {"assignments": {0: [1]}}})
        # The descent starts at the start level, or when the hard limit is a horizon away at the rate.
        horizon = 0.0 if too_small else 2 * (CHECK_INTERVAL + STEP)
        start_level = LIMIT if too_small else 2 * LIMIT
        trigger = max(start_level, LIMIT + rate * horizon)
        room = int(free_bytes(small_dir) - trigger - rate * LEAD) // MiB
        fill_room(cluster.bootstrap_servers, room)
        keys = {"storage.check.interval": f"PT{CHECK_INTERVAL:g}S", "storage.per.volume.limit.min.available.bytes":
                LIMIT, "produce": 1 << 30, "storage.local.log.dirs": small_dir,
                **({"storage.per.volume.descent.min.available.bytes": LIMIT,
                    "storage.per.volume.descent.horizon": "PT0S"} if too_small else {})}
        properties = {"node.id": 1, **sidecar_properties(cluster.bootstrap_servers, **keys), **pipeline}
        name = f"sidecar-{client}-{producers}{'-too-small' if too_small else ''}"
        with sidecar_running(properties, work_dir, name=name) as sidecar:
            sidecar.wait_for_polls(2, timeout=300)
            # The descent needs the aggregator's decisions, and the local verdict a poll that succeeded: a freshly
            # started aggregator on a loaded machine can miss the passes' deadlines for minutes.
            eventually(lambda: sidecar.status()["throttle"]["last_success"], 600, f"{name}: a poll that succeeded")
            with DiskSampler(small_dir, every=0.1) as disk:
                started = time.monotonic()
                running = [start_producer(client, cluster, f"producer-{i}", rate / producers, work_dir)
                           for i in range(producers)]
                try:
                    target = LAST_RESORT if too_small else FLOOR
                    deadline = started + 420
                    reached = None
                    while reached is None and time.monotonic() < deadline and disk.lowest() > 0:
                        time.sleep(0.5)
                        reached = next(((at, new) for at, old, new in quota_lines(sidecar, started)
                                        if new <= target), None)
                        sidecar.check_running()
                    lift = None
                    if disk.lowest() == 0:  # the log dir failed and its broker with it: nothing to delete or lift
                        deleted = ended = time.monotonic()
                        raise FilesystemFull()
                    time.sleep(HOLD)
                    delete_topics(cluster.bootstrap_servers, ["room"])
                    deleted = time.monotonic()
                    while lift is None and time.monotonic() < deleted + 120:
                        time.sleep(0.5)
                        lift = next((at for at, old, new in quota_lines(sidecar, deleted) if new > old), None)
                    if lift is not None:
                        watch_until = lift + after
                        while time.monotonic() < watch_until:
                            time.sleep(1)
                            if all(back_to_rate(p.acks, lift, rate / producers / RECORD) is not None and
                                   time.monotonic() > lift + 30 for p in running):
                                break
                    ended = time.monotonic()
                except FilesystemFull:
                    pass
                finally:
                    for producer in running:
                        producer.stop()
            lines = quota_lines(sidecar, started)
            decisions = [line.text for line in sidecar.lines() if line.at >= started and
                         ("producer_byte_rate" in line.text or "descen" in line.text)]
    return summarize(client, running, lines, decisions, list(disk.samples), started, deleted, lift, ended, rate,
                     producers, reached, room)


class FilesystemFull(Exception):
    """The log dir's filesystem filled before the quota came down."""


def fill_room(bootstrap: str, mebibytes: int) -> None:
    """The topic `room`, written `mebibytes` MiB in records of 512 KiB (under librdkafka's message.max.bytes)
    through librdkafka: harness.cluster.kafka_tools.fill's kafka-python computes CRC-32C in pure Python, minutes for a few
    hundred MiB on a loaded machine."""
    from confluent_kafka import Producer

    create_topics(bootstrap, {"room": {"assignments": {0: [1]}}})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = os.urandom(512 << 10)
    for _ in range(2 * mebibytes):
        while True:
            try:
                producer.produce("room", value)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300):
        raise RuntimeError("the room topic was not written within 5 minutes")


def quota_lines(sidecar, after: float) -> list[tuple[float, float, float]]:
    """(monotonic time, old, new) of each of the sidecar's writes of the default user's producer_byte_rate."""
    found = []
    for line in sidecar.lines():
        if line.at >= after and (match := _QUOTA.search(line.text)):
            found.append((line.at, rate_value(match.group(1)), rate_value(match.group(2))))
    return found


def summarize(client, running, lines, decisions, samples, started, deleted, lift, ended, rate, producers, reached,
              room) -> dict:
    descent = next((at for at, old, new in lines if new < old), None)
    per_producer = rate / producers / RECORD  # records/s
    free_at = lambda moment: next((free for at, free in reversed(samples) if at <= moment), samples[0][1])  # noqa
    result = {
        "client": client, "producers": producers, "room_mib": room,
        "steps": [(round(at - started, 1), old, new) for at, old, new in lines],
        "descent": None if descent is None else descent - started,
        "reached": None if reached is None or descent is None else reached[0] - descent,
        "reached_rate": None if reached is None else reached[1],
        "written_to_reached": None if reached is None or descent is None else free_at(descent) - free_at(reached[0]),
        "lifts_before": sum(1 for at, old, new in lines if descent is not None and descent < at < deleted
                            and new > old),
        "lowest": min(free for _, free in samples),
        "hard_limit": min(free for at, free in samples if lift is None or at < lift) <= LIMIT
        or any(new <= LAST_RESORT for at, _, new in lines if lift is None or at < lift),
        "last_resort_after_lift": next((at - lift for at, _, new in lines if lift is not None and at > lift
                                        and new <= LAST_RESORT), None),
        "lift": None if lift is None else lift - deleted,
        "watched": ended - (lift if lift is not None else deleted),
        "decisions": decisions,
        "producers_seen": [],
    }
    for producer in running:
        before = acked_between(producer.acks, descent - 10, descent) / 10 if descent else None
        seen = {"principal": producer.principal, "failed": producer.failed,
                "rate_before": None if before is None else before * RECORD,
                "silence": None if descent is None else longest_silence(producer.acks, descent,
                                                                         lift if lift is not None else ended)}
        if lift is not None:
            first = first_ack_after(producer.acks, lift)
            back = back_to_rate(producer.acks, lift, before or per_producer)
            seen["first_ack"] = None if first is None else first - lift
            seen["peak"] = max((acked_between(producer.acks, at, at + 1.0) * RECORD for at, _ in producer.acks
                                if lift <= at <= lift + 30), default=0)
            seen["back"] = None if back is None else back - lift
        result["producers_seen"].append(seen)
    return result


# ---------------------------------------------------------------- the figures


def run(clients=CLIENTS, producers: int = 1, rate: float = 2e6, after: float = 60.0,
        too_small: bool = False, keep: Path | None = None) -> Result:
    """`keep`: the runs' logs (the sidecars', the producers') go there and stay."""
    results = []
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="bench-throttle-resume-") as temporary, \
            aggregator_running() as aggregator:
        work_dir = keep or temporary
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        for client in clients:
            result = one_run(client, producers, rate, after, too_small, aggregator.agent_properties,
                             Path(work_dir))
            print(json.dumps({k: v for k, v in result.items() if k != "decisions"}, default=str), flush=True)
            print(*result["decisions"][:40], sep="\n", flush=True)
            results.append(result)
    return Result(TITLE, render(results, rate, after, too_small) + "\n\n" + provenance(this_command(), load))


def render(results: list[dict], rate: float, after: float, too_small: bool) -> str:
    rows, steps = [], []
    target = LAST_RESORT if too_small else FLOOR
    for r in results:
        seen = r["producers_seen"]
        rows.append([
            f"{r['client']} × {r['producers']}", seconds(r["descent"]), str(r["lifts_before"]),
            seconds(r["reached"]) + ("" if r["reached_rate"] in (None, target)
                                     else f" (at {text(r['reached_rate'])} B/s)"),
            "–" if r["written_to_reached"] is None else f"{r['written_to_reached'] / MiB:.1f} MiB",
            cell(Stats.of(p["silence"] for p in seen if p["silence"] is not None), "s", digits=1),
            f"{r['lowest'] / MiB:.1f} MiB", "**yes**" if r["hard_limit"] else "no", seconds(r["lift"]),
            waited(seen, "first_ack", r), waited(seen, "back", r),
            "–" if r["lift"] is None else cell(Stats.of(p["peak"] for p in seen), "MB/s", 1e6, digits=1),
            "no" if r["last_resort_after_lift"] is None else f"**{r['last_resort_after_lift']:.1f} s after it**",
            str(sum(p["failed"] for p in seen))])
        steps.append(f"{r['client']} × {r['producers']}: " + ", ".join(
            f"+{at:g} s {text(old)} → {text(new)}" for at, old, new in r["steps"]))
    what = ("the descent's start at the hard limit and horizon PT0S (a reserve too small: the hard limit's 1 B/s)"
            if too_small else "the descent's settings at their defaults")
    return "\n\n".join([
        f"A 1-broker cluster per run, its log dir on a {FILESYSTEM // MiB} MiB tmpfs, hard limit {LIMIT // MiB} MiB, "
        f"{what}, check interval PT2S; producers at {rate / 1e6:g} MB/s together in {RECORD // 1024} KiB records, "
        "each its own principal; `room` deleted 20 s after the quota reached "
        f"{'1 B/s' if too_small else 'the floor'} (benchmarks/throttle_resume.py's docstring has the definitions). "
        "Several producers: median (min–max) over them.",
        table(["client × producers", "descent from start", "lifts during it", "to the "
               + ("1 B/s" if too_small else "floor"), "written to it", "longest silence",
               "lowest free", "hard limit before the lift", "lift after the deletion", "first ack after the lift",
               "≥ 90 % of the rate", "fastest 1 s in the 30 s after the lift", "1 B/s again after the lift",
               "failed sends"], rows),
        "The default user's producer_byte_rate as the sidecar wrote it (seconds from the producers' start):\n\n"
        + "\n".join(f"- {line}" for line in steps),
    ])


def waited(seen: list[dict], key: str, r: dict) -> str:
    if r["lift"] is None:
        return "no lift"
    values = [p.get(key) for p in seen]
    missing = sum(value is None for value in values)
    found = cell(Stats.of(v for v in values if v is not None), "s", digits=1) if missing < len(values) else ""
    cap = f"> {r['watched']:.0f} s" + (f" ({missing} of {len(values)})" if len(values) > 1 else "")
    return " ; ".join(part for part in (found, cap if missing else "") if part)


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def text(value: float) -> str:
    return "none" if value == float("inf") else f"{value:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of: {', '.join(CLIENTS)}")
    parser.add_argument("--producers", type=int, default=1, help="producers at once, each a principal of its own")
    parser.add_argument("--rate", type=float, default=2e6, help="bytes/s, all producers together")
    parser.add_argument("--after", type=float, default=60.0, help="seconds watched after the lift at most")
    parser.add_argument("--reserve-too-small", action="store_true",
                        help="the descent's start at the hard limit and horizon PT0S: the hard limit's 1 B/s")
    parser.add_argument("--keep-logs", type=Path, help="a dir where the sidecars' and producers' logs stay")
    args = parser.parse_args()
    clients = tuple(args.clients.split(","))
    if unknown := [c for c in clients if c not in CLIENTS]:
        parser.error(f"--clients: unknown {unknown}; of: {', '.join(CLIENTS)}")
    print_result(run(clients, args.producers, args.rate, args.after, args.reserve_too_small, args.keep_logs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
