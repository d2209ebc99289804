"""The Spark part of a replication pass during a move, per sidecar: wall and CPU time.

The move lab's shape (tests/harness/move_lab.py): partitions moving from broker 1 (source and leader) to
broker 3, broker 2 not involved. Each sidecar's pass is its ReplicationDecider.decide as
quota_sidecar.cli.build_replication wires it, on the same observation (sizes read, growth over the window),
embedded or over a local Spark Connect server (harness.connect_server, local[1]) as in the lab. CPU is this
process and its children (the embedded driver's JVM) plus the Connect server's JVM: what a pass costs the
machine, less dependent on how busy it is than the wall time.

    .venv/bin/python benchmarks/replication_pass.py [--connect] [--passes 30] [--moves 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import psutil
from common import table, uptime

from quota_sidecar.cli import build_replication
from quota_sidecar.common.observation import BrokerLoad, MovingReplica, Overrides, Reassignment, ReplicationObservation
from quota_sidecar.configuration.config import PREFIX, from_properties

SOURCE, UNINVOLVED, DESTINATION = 1, 2, 3
WARM_UP = 5  # unmeasured passes first: the first plans and compiles the query


def observation(moves: int) -> ReplicationObservation:
    """`moves` partitions half-way through their move, the source busy with clients."""
    reassignments = tuple(Reassignment("moving", p, (DESTINATION, SOURCE), adding=(DESTINATION,), removing=(SOURCE,))
                          for p in range(moves))
    replicas = tuple(MovingReplica("moving", p, DESTINATION, SOURCE, 50 << 20, 30.0, 60 << 20, 8 << 20, 4.0, 1 << 20, 4.0)
                     for p in range(moves))
    loads = {broker: BrokerLoad(3e6, 1e6, 1e6, 2e6) for broker in (SOURCE, UNINVOLVED, DESTINATION)}
    applied = {broker: {"leader_rate": 2_000_000, "follower_rate": 2_000_000} for broker in loads}
    return ReplicationObservation(reassignments, loads, applied, Overrides(), {}, replicas)


def cpu_seconds(pids: list[int]) -> float:
    processes = [process for pid in pids for process in (psutil.Process(pid), *psutil.Process(pid).children(True))]
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def measure(spark_url: str, passes: int, moves: int, server_pid: int | None) -> list[list[object]]:
    seen = observation(moves)
    rows = []
    for broker, role in ((SOURCE, "source"), (DESTINATION, "destination"), (UNINVOLVED, "not involved")):
        config = from_properties({PREFIX + "kafka.admin.bootstrap.servers": "127.0.0.1:9092",
                                  PREFIX + "broker.id": str(broker), PREFIX + "spark.url": spark_url,
                                  PREFIX + "storage.per.volume.limit.min.available.bytes": "1",
                                  PREFIX + "replication.capacity.bytes.per.second": "6000000"})
        decider = build_replication(config, None, None, measure_network=False).decider
        for _ in range(WARM_UP):
            decider.decide(seen, ())
        pids = [psutil.Process().pid, *([server_pid] if server_pid else [])]
        walls, before = [], cpu_seconds(pids)
        for _ in range(passes):
            started = time.perf_counter()
            decision = decider.decide(seen, ())
            walls.append(time.perf_counter() - started)
        cpu = (cpu_seconds(pids) - before) / passes
        rows.append([f"{broker} ({role})", f"{statistics.median(walls) * 1000:.0f}", f"{min(walls) * 1000:.0f}",
                     f"{cpu * 1000:.0f}", len(decision.moves)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", action="store_true", help="over a local Spark Connect server (else embedded)")
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--moves", type=int, default=1, help="moving partitions")
    args = parser.parse_args()
    from spark_jobs.session import stop_sessions

    print(f"load before: {uptime()}")
    server = None
    if args.connect:
        from harness.connect_server import ConnectServer
        server = ConnectServer().start()
    try:
        rows = measure(server.url if server else "", args.passes, args.moves, server.pid if server else None)
    finally:
        stop_sessions()
        if server:
            server.stop()
    print(table(["sidecar of broker", "wall median ms", "wall min ms", "CPU ms per pass", "moves shown"], rows))
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
