"""A move cannot fill a disk either: moves and a catch-up onto a small volume beside sidecars at default settings.

    .venv/bin/python benchmarks/move_guard.py [--scenarios one,twenty,slow_guard,catch_up,between_dirs]
        [--watch 90]
        [--json | --write]

The lab of tests/harness/agents/move_guard_lab.py: 3 brokers on loopback, broker 3's only log dir a 512 MiB tmpfs
with a 128 MiB limit, one `quota-sidecar run` beside each broker at the default intervals (a storage pass a
minute, a replication pass every 10 s), replication throttles on with a 1 GB/s capacity, and the small
volume's free space read every 2 ms; one `quota-sidecar aggregate` decides for the sidecars of every
scenario (common.aggregator_running: its pipeline a 1-broker cluster of its own). Each scenario on a
cluster of its own:

- one: `kafka-reassign-partitions --execute` without `--throttle` of one partition of 560 MB (more than the
  whole volume) from broker 1 to broker 3;
- twenty: the same with twenty partitions of 28 MB, ten led by broker 1 and ten by broker 2 (a rebalance's shape);
- slow_guard: as `one`, with `replication.disk.guard.rate.bytes.per.second=5000000` (an operator who wants
  moves slowed rather than held): the guard cannot hold, and the move is cancelled;
- catch_up: broker 3 is a follower of four partitions and is stopped while their leaders take in 560 MB;
  then it starts again and catches up;
- between_dirs: one broker with two log dirs, the second the small volume; the 560 MB partition in the first is
  copied into the second (`--execute` with a `log_dirs` target: AlterReplicaLogDirs, JBOD), without
  `--replica-alter-log-dirs-throttle`.

Each is watched for `--watch` seconds (or until no move is left); a move still going then is cancelled with
the tool. Measured: when the guard was in force (the sidecar's log line of its write) from `--execute` and
from the crossing of the limit, the lowest free space, whether the volume filled or a log dir went offline,
and the time to the cancel. --write puts the table into docs/benchmarks.md as its section
"## Moves onto a full disk (issue 21)".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

# common first: it puts tests/ on the path, for the harness
from common import LoadWatch, aggregator_running, provenance, table, this_command, write_section
from harness.cluster.kafka_tools import reassign_partitions
from harness.cluster.local_cluster import LocalKafkaCluster
from harness.agents.move_guard_lab import BROKER_PROPERTIES, LIMIT, SMALL, VOLUME, FreeSpace, fill, guard_fleet
from harness.agents.replication_checks import create_topic
from quota_sidecar.common.errors import AdminError
from quota_sidecar.kafka_clients.admin import ClusterAdmin

MiB = 1 << 20
TOTAL = 560_000_000  # more than broker 3's whole volume
SECTION = "## Moves onto a full disk (issue 21)"
SCENARIOS = ("one", "twenty", "slow_guard", "catch_up", "between_dirs")
# The cluster of each scenario, and the broker whose small volume is watched.
BETWEEN_DIRS = {"brokers": 1, "log_dirs": {1: 2}, "small_log_dirs": {(1, 1): VOLUME}}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, of " + ", ".join(SCENARIOS))
    parser.add_argument("--watch", type=float, default=90.0, help="seconds each scenario is watched")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON for machines instead of Markdown")
    output.add_argument("--write", action="store_true", help="also write the figures into docs/benchmarks.md")
    return parser.parse_args(argv)


def scenario(name: str, pipeline: dict, work: Path, watch: float) -> dict:
    """`pipeline`: the sidecars' properties that reach the aggregator (Aggregator.agent_properties)."""
    settings = {"replication.disk.guard.rate.bytes.per.second": "5000000"} if name == "slow_guard" else {}
    shape = BETWEEN_DIRS if name == "between_dirs" else {"brokers": 3, "small_log_dirs": SMALL}
    broker = 1 if name == "between_dirs" else 3
    with LocalKafkaCluster(**shape, broker_properties=BROKER_PROPERTIES) as cluster, \
            ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")}) as admin:
        small_dir = cluster.log_dirs(broker)[-1]
        targets, log_dirs = lay_out(name, cluster, work, admin)

        def moving() -> bool:
            return name == "catch_up" or bool(admin.list_reassignments() or admin.describe_dir_moves(broker))
        (work / name).mkdir()
        fleet = guard_fleet(cluster, pipeline, work / name, **settings)
        fleet.start()
        try:
            with FreeSpace(small_dir) as free_space:
                started = time.monotonic()
                if name == "catch_up":
                    cluster.start_broker(3)
                else:
                    done = reassign_partitions(cluster.bootstrap_servers, targets, "--execute", log_dirs=log_dirs)
                    assert done.returncode == 0, done.stderr or done.stdout
                while time.monotonic() - started < watch and moving():
                    time.sleep(0.5)
                still_moving = name != "catch_up" and moving()
                if still_moving:
                    reassign_partitions(cluster.bootstrap_servers, targets, "--cancel", log_dirs=log_dirs)
            try:
                offline = bool([v for v in admin.describe_volumes([broker], datetime.now(timezone.utc)) if v.error])
            except AdminError as error:  # a broker whose only log dir failed shuts down
                offline = str(error)
            lines = fleet[broker].lines()
        finally:
            fleet.stop()
        print(*[line.text for line in lines if "guard" in line.text or "pass now" in line.text
                or "cancelled" in line.text][:20], sep="\n", file=sys.stderr)
    guard = next((line.at for line in lines if "(disk_guard: a " in line.text), None)
    alarm = next((line.at for line in lines if "pass now: local dir" in line.text), None)
    cancel = next((line.at for line in lines if "cancelled the moves adding replicas" in line.text), None)
    crossed = free_space.crossed_at
    return {
        "scenario": name, "lowest_free_mib": round(free_space.lowest / MiB, 1), "filled": free_space.lowest <= 0,
        "log_dir_offline": bool(offline), "crossed_the_limit": crossed is not None,
        "guard_after_start_s": None if guard is None else round(guard - started, 2),
        "guard_after_crossing_s": next((round(line.at - crossed, 2) for line in lines if crossed is not None
                                        and line.at >= crossed and "(disk_guard: a " in line.text), None),
        "guard_after_the_watch_s": None if guard is None or alarm is None else round(guard - alarm, 2),
        "cancelled_after_s": None if cancel is None else round(cancel - started, 1),
        "still_moving_at_the_end": still_moving,
    }


def lay_out(name: str, cluster: LocalKafkaCluster, work: Path, admin: ClusterAdmin
            ) -> tuple[dict[tuple[str, int], list[int]], dict[tuple[str, int], list[str]] | None]:
    """The scenario's topics, filled; the moves it runs ((topic, partition) -> replicas) and their log dirs."""
    if name == "twenty":
        create_topic(cluster, "moved", {p: [1 + p % 2] for p in range(20)})
        fill(cluster, "moved", TOTAL, work / f"{name}-fill.log")
        return {("moved", p): [3] for p in range(20)}, None
    if name == "catch_up":
        create_topic(cluster, "followed", {p: [1 + p % 2, 3] for p in range(4)})
        cluster.stop_broker(3)  # its leaders take in what it will have to catch up with
        fill(cluster, "followed", TOTAL, work / f"{name}-fill.log")
        return {}, None
    if name == "between_dirs":
        large_dir, small_dir = cluster.log_dirs(1)
        create_topic(cluster, "moved", {0: [1]})
        reassign_partitions(cluster.bootstrap_servers, {("moved", 0): [1]}, "--execute",
                            log_dirs={("moved", 0): [large_dir]})  # a new replica may land in either dir
        while admin.describe_dir_moves(1) or admin.describe_replicas(1, {"moved": [0]})[("moved", 0)][0] != large_dir:
            time.sleep(0.2)
        fill(cluster, "moved", TOTAL, work / f"{name}-fill.log")
        return {("moved", 0): [1]}, {("moved", 0): [small_dir]}
    create_topic(cluster, "moved", {0: [1]})
    fill(cluster, "moved", TOTAL, work / f"{name}-fill.log")
    return {("moved", 0): [3]}, None


def render(results: list[dict], load: LoadWatch) -> str:
    def seconds(value) -> str:
        return "–" if value is None else f"{value:.2f} s"

    rows = [[r["scenario"], f"{r['lowest_free_mib']:.1f} MiB", "yes" if r["crossed_the_limit"] else "no",
             seconds(r["guard_after_start_s"]), seconds(r["guard_after_the_watch_s"]), seconds(r["guard_after_crossing_s"]),
             "–" if r["cancelled_after_s"] is None else f"{r['cancelled_after_s']:.1f} s",
             "yes" if r["filled"] else "no", "yes" if r["log_dir_offline"] else "no"] for r in results]
    return "\n\n".join([
        f"Broker 3's volume (between_dirs: broker 1's second dir) {VOLUME // MiB} MiB, limit {LIMIT // MiB} MiB "
        f"(free space), {TOTAL / 1e6:.0f} MB to move, copy or catch up; sidecars at the default intervals (see the "
        "script's docstring for each scenario).",
        table(["scenario", "lowest free space", "crossed the limit", "guard in force after the start",
               "after the watch's alarm", "after the crossing", "move cancelled after", "volume filled", "log dir offline"], rows),
        provenance(this_command(), load)])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    names = [name for name in args.scenarios.split(",") if name]
    if unknown := [name for name in names if name not in SCENARIOS]:
        print(f"unknown scenario(s) {unknown}; choose from {SCENARIOS}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="move-guard-") as work, aggregator_running() as aggregator, \
            LoadWatch() as load:
        results = []
        for name in names:
            print(f"== {name}", file=sys.stderr, flush=True)
            results.append(scenario(name, aggregator.agent_properties, Path(work), args.watch))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    text = render(results, load)
    print(text)
    if args.write:
        write_section(text, SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
