"""Resident memory of the quota work: the agent beside each broker and the one aggregator of the fleet.

`quota-sidecar run` as subprocesses against a local 3-broker cluster, one per broker as deployed (its
pipeline the same cluster, the default), check interval PT1S, a limit no volume reaches; one
`quota-sidecar aggregate` deciding for them (harness.spark.aggregator: embedded Spark, `local[1]`). RSS (psutil)
of each agent after its first pass and after 20, with every process it started (none: it runs no JVM);
the aggregator's Python process and its Spark JVM once the agents have made their 20 passes.

Then the same aggregator deciding for simulated fleets of 30 and 300 agents (fleet_of: their observations as
agents publish them, one each a check interval). The cluster's total for the quota work at 3, 30 and 300 brokers
is N agents and the aggregator deciding for them, next to the per-sidecar embedded Spark it replaces (its figure
kept in this section of docs/benchmarks.md, EMBEDDED_SIDECAR_MIB).

    .venv/bin/python benchmarks/memory.py [--agents 3] [--polls 20] [--fleets 30,300] [--fleet-seconds 180]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil
from kafka import KafkaProducer

from common import (MiB, LoadWatch, Result, Stats, cell, print_result, provenance, sidecar_properties,
                    sidecar_running, table, this_command, uptime)
from harness.spark.aggregator import Aggregator
from harness.cluster.local_cluster import LocalKafkaCluster
from quota_sidecar.pipeline.messages import encode, key, observation
from quota_sidecar.pipeline.topics import OBSERVATIONS_TOPIC

TITLE = "Memory"  # its subsection of "## Disk protection" in docs/benchmarks.md
EMBEDDED_SIDECAR_MIB = 605  # one sidecar with its own embedded Spark, as this section last measured it
TARGET_MIB = 64  # the target for the agent's RSS, median after 20 passes
CHECK_INTERVAL = 60.0  # s: storage.check.interval's default, each simulated agent's pace
FLEET_LIMITS = {"min_available_bytes": 1 << 30}


def rss(pid: int) -> dict:
    """Resident bytes of a process and of all its descendants."""
    process = psutil.Process(pid)
    children = process.children(recursive=True)
    return {"own": process.memory_info().rss, "children": sum(child.memory_info().rss for child in children),
            "child_names": sorted({child.name() for child in children})}


def total(sample: dict) -> int:
    return sample["own"] + sample["children"]


def agents(cluster: LocalKafkaCluster, aggregator: Aggregator, work_dir: Path, count: int,
           polls: int) -> tuple[list[dict], dict]:
    """`count` agents at once: the RSS of each after pass 1 and after `polls`; the aggregator's then."""
    properties = sidecar_properties(cluster.bootstrap_servers, **{
        "storage.check.interval": "PT1S", "storage.per.volume.limit.min.available.bytes": MiB})
    with contextlib.ExitStack() as stack:
        running = [stack.enter_context(sidecar_running({**properties, **aggregator.agent_properties}, work_dir,
                                                       name=f"agent-{index}")) for index in range(count)]
        results = []
        for agent in running:
            agent.wait_for_polls(1, timeout=300)
            results.append({"first": rss(agent.process.pid)})
        for agent, result in zip(running, results):
            agent.wait_for_polls(polls, timeout=300)
            result.update(last=rss(agent.process.pid), load=uptime())
        aggregator_rss = rss(aggregator.process.process.pid)
    return results, aggregator_rss


def fleet_of(brokers: int, aggregator: Aggregator, seconds: float) -> tuple[dict, int]:
    """The aggregator deciding for `brokers` agents of one simulated cluster for `seconds`: each asks once a
    check interval (the default, PT1M), as an agent publishes its observation: every broker's 2 log dirs with 2
    measurements in the fill window, and its own dirs with a minute of local samples (every 0.1 s). Published
    with one producer, the agents' turns spread over the interval. The aggregator's RSS then, and how many
    observations were published."""
    producer = KafkaProducer(bootstrap_servers=aggregator.pipeline_servers, linger_ms=5)
    now = datetime.now(timezone.utc)
    everyone = [{"broker_id": b, "log_dir": f"/data/{d}", "total_bytes": 1 << 40, "available_bytes": 1 << 39,
                 "usable": True, "at_seconds": float(at)}
                for b in range(1, brokers + 1) for d in (0, 1) for at in (-60, 0)]
    published, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        agent = published % brokers + 1
        own = [{**row, "broker_id": agent, "at_seconds": -i / 10} for row in everyone[:2] for i in range(600)]
        message = observation("simulated-fleet", agent, now, everyone + own, FLEET_LIMITS)
        producer.send(OBSERVATIONS_TOPIC, key=key("simulated-fleet", agent).encode(), value=encode(message))
        published += 1
        time.sleep(max(0.0, started + published * CHECK_INTERVAL / brokers - time.monotonic()))
    producer.flush(60)
    producer.close()
    return rss(aggregator.process.process.pid), published


def run(count: int = 3, polls: int = 20, fleets: tuple[int, ...] = (30, 300), fleet_seconds: float = 180) -> Result:
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="bench-memory-") as work_dir, \
            LocalKafkaCluster(brokers=3) as cluster, \
            Aggregator(cluster.bootstrap_servers, Path(work_dir) / "aggregator") as aggregator:
        aggregator.warm_up()
        results, aggregator_rss = agents(cluster, aggregator, Path(work_dir), count, polls)
        deciding_for = {count: (aggregator_rss, None)}
        for brokers in fleets:
            deciding_for[brokers] = fleet_of(brokers, aggregator, fleet_seconds)
            print(f"  aggregator deciding for {brokers} agents: {total(deciding_for[brokers][0]) / MiB:.0f} MiB "
                  f"({deciding_for[brokers][1]} observations)", flush=True)
    for index, result in enumerate(results):
        last = result["last"]
        print(f"  agent {index + 1}: {last['own'] / MiB:.0f} MiB, children {last['children'] / MiB:.0f} MiB "
              f"{last['child_names']}, load {result['load']}", flush=True)
    print(f"  aggregator: python {aggregator_rss['own'] / MiB:.0f} MiB + {aggregator_rss['children'] / MiB:.0f} MiB "
          f"{aggregator_rss['child_names']}", flush=True)

    def mib(values) -> str:
        return cell(Stats.of(values), "MiB", MiB, 0)

    last = [r["last"] for r in results]
    agent_mib = Stats.of([total(r) for r in last]).median / MiB
    aggregator_mib = total(aggregator_rss) / MiB
    measured = table(
        ["process", f"after {polls} passes", "after pass 1", "child processes", "1-min load when measured"],
        [[f"agent (`quota-sidecar run`, target ≤ {TARGET_MIB} MiB)", mib(total(r) for r in last),
          mib(total(r["first"]) for r in results), ", ".join(sorted({n for r in last for n in r["child_names"]}))
          or "none", ", ".join(r["load"].split()[0] for r in results)],
         ["aggregator (`quota-sidecar aggregate`: Python + Spark JVM, `local[1]`)", f"{aggregator_mib:.0f} MiB",
          "–", ", ".join(aggregator_rss["child_names"]), "–"]])
    fleet = table(
        ["brokers", "the aggregator deciding for their agents", "agents + one aggregator",
         "one sidecar with embedded Spark per broker (before)"],
        [[str(n), f"{total(deciding_for[n][0]) / MiB:,.0f} MiB" + ("" if deciding_for[n][1] is None else
                                                                   f" ({deciding_for[n][1]:,} observations)"),
          f"{n * agent_mib + total(deciding_for[n][0]) / MiB:,.0f} MiB", f"{n * EMBEDDED_SIDECAR_MIB:,} MiB"]
         for n in sorted(deciding_for)])
    markdown = "\n\n".join([
        f"{count} `quota-sidecar run` agents as subprocesses against a local 3-broker cluster (one per broker, as "
        "deployed; their pipeline on the same cluster), check interval `PT1S`, one `quota-sidecar aggregate` "
        "deciding for them (embedded Spark, `local[1]`, warmed up with one question first). RSS (psutil) with "
        f"every process each started, median (min–max) over the agents, after {polls} passes and after the first.",
        measured,
        "A cluster's memory for the quota work: N agents (the median above) and one aggregator, measured deciding "
        f"for the 3 agents above, then for {' and '.join(map(str, fleets))} simulated ones for {fleet_seconds:.0f} s "
        "each (`fleet_of`: one observation per agent a minute, as at the default check interval, every broker's "
        "2 dirs and a minute of the agent's own local samples), against one sidecar with its own embedded Spark "
        f"per broker ({EMBEDDED_SIDECAR_MIB} MiB, measured on 2026-11-21 at 34e12e6).",
        fleet,
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=3, help="agents running at once")
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--fleets", default="30,300", help="simulated fleets' sizes the aggregator decides for")
    parser.add_argument("--fleet-seconds", type=float, default=180.0)
    args = parser.parse_args()
    print_result(run(args.agents, args.polls, tuple(int(n) for n in args.fleets.split(",") if n), args.fleet_seconds))


if __name__ == "__main__":
    main()
