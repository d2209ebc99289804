"""A replication pass's decision during a move, through the aggregator, per sidecar: wall and CPU time.

The move lab's shape (tests/harness/network/move_lab.py): partitions moving from broker 1 (source and leader) to
broker 3, broker 2 not involved. Each sidecar's pass is its ReplicationDecider.decide as
quota_sidecar.wiring.build_replication wires it, on the same observation (sizes read, growth over the window):
its question goes through the pipeline (wiring.build_pipeline) to one `quota-sidecar aggregate`
(common.aggregator_running: embedded Spark, local[1], its pipeline a local 1-broker cluster) and the pass
waits for the decision naming it. CPU is this process and the aggregator's (its Python and its Spark JVM,
whose query also polls the pipeline between passes), the broker's not: what a pass costs the machine, less
dependent on how busy it is than the wall time.

    .venv/bin/python benchmarks/replication_pass.py [--passes 30] [--moves 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import psutil
from common import aggregator_running, cpu_seconds, table, uptime

from quota_sidecar.common.observation import BrokerLoad, MovingReplica, Overrides, Reassignment, ReplicationObservation
from quota_sidecar.configuration.config import PREFIX, from_properties
from quota_sidecar.wiring import build_pipeline, build_replication

SOURCE, UNINVOLVED, DESTINATION = 1, 2, 3
WARM_UP = 5  # unmeasured passes first: the aggregator's first rates question plans and compiles the rule


def observation(moves: int) -> ReplicationObservation:
    """`moves` partitions half-way through their move, the source busy with clients."""
    reassignments = tuple(Reassignment("moving", p, (DESTINATION, SOURCE), adding=(DESTINATION,), removing=(SOURCE,))
                          for p in range(moves))
    replicas = tuple(MovingReplica("moving", p, DESTINATION, SOURCE, 50 << 20, 30.0, 60 << 20, 8 << 20, 4.0, 1 << 20, 4.0)
                     for p in range(moves))
    loads = {broker: BrokerLoad(3e6, 1e6, 1e6, 2e6) for broker in (SOURCE, UNINVOLVED, DESTINATION)}
    applied = {broker: {"leader_rate": 2_000_000, "follower_rate": 2_000_000} for broker in loads}
    return ReplicationObservation(reassignments, loads, applied, Overrides(), {}, replicas)


def measure(pipeline_servers: str, passes: int, moves: int, aggregator_pid: int) -> list[list[object]]:
    seen = observation(moves)
    rows = []
    for broker, role in ((SOURCE, "source"), (DESTINATION, "destination"), (UNINVOLVED, "not involved")):
        # The watched cluster is the pipeline's (the agent's default); nothing else of it is read here. The
        # timeout is the warm-up's: a first rates question waits while the aggregator compiles the rule.
        config = from_properties({PREFIX + "kafka.admin.bootstrap.servers": pipeline_servers,
                                  PREFIX + "broker.id": str(broker), PREFIX + "poll.timeout": "PT180S",
                                  PREFIX + "storage.per.volume.limit.min.available.bytes": "1",
                                  PREFIX + "replication.capacity.bytes.per.second": "6000000"})
        pipeline = build_pipeline(config, lambda: "replication-pass-benchmark")  # any cluster id will do
        decider = build_replication(config, None, None, pipeline, measure_network=False).decider
        for _ in range(WARM_UP):
            decider.decide(seen, ())
        pids = [psutil.Process().pid, aggregator_pid]
        walls, before = [], cpu_seconds(pids)
        for _ in range(passes):
            started = time.perf_counter()
            decision = decider.decide(seen, ())
            walls.append(time.perf_counter() - started)
        cpu = (cpu_seconds(pids) - before) / passes
        pipeline.close()
        rows.append([f"{broker} ({role})", f"{statistics.median(walls) * 1000:.0f}", f"{min(walls) * 1000:.0f}",
                     f"{cpu * 1000:.0f}", len(decision.moves)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--moves", type=int, default=1, help="moving partitions")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    with aggregator_running() as aggregator:
        rows = measure(aggregator.pipeline_servers, args.passes, args.moves, aggregator.process.process.pid)
    print(table(["sidecar of broker", "wall median ms", "wall min ms", "CPU ms per pass", "moves shown"], rows))
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
