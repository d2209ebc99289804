"""The sidecar's resident memory, embedded Spark against a shared Spark Connect server.

`quota-sidecar run` as subprocesses against a local 3-broker cluster, three at once (one per broker, as
deployed), check interval PT1S, a limit no volume reaches. Each one's RSS (psutil) after the first poll
and after 20 polls:

- embedded: the Python process plus everything it started (the JVM of the local Spark, via spark-submit);
- shared: the Python process alone (a Spark Connect client starts no JVM; children are counted anyway),
  and, separately, the local Spark Connect server's RSS (harness.connect_server: local[1], 512 MiB
  driver), which all sidecars share.

    .venv/bin/python benchmarks/memory.py [--sidecars 3] [--polls 20]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

import psutil

from common import (MiB, LoadWatch, Result, Stats, cell, connect_server, print_result, provenance, sidecar_running,
                    sidecar_properties, table, this_command, uptime)
from harness.local_cluster import LocalKafkaCluster

TITLE = "Memory"  # its subsection of "## Disk protection" in docs/benchmarks.md


def rss(pid: int) -> dict:
    """Resident bytes of a process and of all its descendants."""
    process = psutil.Process(pid)
    children = process.children(recursive=True)
    return {"own": process.memory_info().rss, "children": sum(child.memory_info().rss for child in children),
            "child_count": len(children), "child_names": [child.name() for child in children]}


def sidecars(cluster: LocalKafkaCluster, work_dir: Path, mode: str, count: int, polls: int,
             spark_url: str = "") -> list[dict]:
    """`count` sidecars at once (one per broker, as deployed): the RSS of each after poll 1 and after `polls`."""
    keys = {"storage.check.interval": "PT1S", "storage.per.volume.limit.min.available.bytes": MiB}
    if spark_url:
        keys["spark.url"] = spark_url
    properties = sidecar_properties(cluster.bootstrap_servers, **keys)
    with contextlib.ExitStack() as stack:
        running = [stack.enter_context(sidecar_running(properties, work_dir, name=f"{mode}-{index}"))
                   for index in range(count)]
        results = []
        for sidecar in running:
            sidecar.wait_for_polls(1, timeout=300)
            results.append({"first": rss(sidecar.process.pid)})
        for sidecar, result in zip(running, results):
            sidecar.wait_for_polls(polls, timeout=300)
            result.update(last=rss(sidecar.process.pid), load=uptime())
    return results


def run(count: int = 3, polls: int = 20) -> Result:
    results = {}
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="bench-memory-") as work_dir, \
            LocalKafkaCluster(brokers=3) as cluster:
        results["embedded"] = sidecars(cluster, Path(work_dir), "embedded", count, polls)
        with connect_server() as server:
            results["shared"] = sidecars(cluster, Path(work_dir), "shared", count, polls, server.url)
            server_rss = rss(server.pid)
    for mode in results:
        for index, result in enumerate(results[mode]):
            report(mode, index, result)
    print(f"  Spark Connect server: {(server_rss['own'] + server_rss['children']) / MiB:.0f} MiB", flush=True)

    def mib(values) -> str:
        return cell(Stats.of(values), "MiB", MiB, 0)

    rows = []
    for mode, label in (("embedded", "embedded Spark (`local[1]`, 512 MiB driver)"),
                        ("shared", "shared Spark Connect (`spark.url=sc://…`)")):
        last, first = [r["last"] for r in results[mode]], [r["first"] for r in results[mode]]
        rows.append([label, mib(r["own"] for r in last), mib(r["children"] for r in last),
                     ", ".join(sorted({name for r in last for name in r["child_names"]})) or "none",
                     mib(r["own"] + r["children"] for r in last),
                     mib(r["own"] + r["children"] for r in first),
                     f"{(server_rss['own'] + server_rss['children']) / MiB:.0f} MiB" if mode == "shared" else "–",
                     ", ".join(r["load"].split()[0] for r in results[mode])])
    markdown = "\n\n".join([
        f"`quota-sidecar run` as subprocesses against a local 3-broker cluster, check interval `PT1S`, "
        f"{count} sidecars per mode running at once (one per broker, as deployed; in shared mode all on "
        f"the same Connect server), RSS (psutil) of each after {polls} polls (and after its first), median "
        "(min–max) over the sidecars. The sidecar's total is its Python process plus every process it started "
        "(the embedded Spark JVM, and for some the shell of spark-submit, a few MiB); the shared Spark Connect "
        "server (local, `local[1]`, 512 MiB driver) is shown on its own: every sidecar of the cluster shares it.",
        table(["Spark", "Python process", "child processes", "which", f"sidecar total after {polls} polls",
               "sidecar total after poll 1", "Spark Connect server (shared)", "1-min load when measured"], rows),
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def report(mode: str, index: int, result: dict) -> None:
    last = result["last"]
    print(f"  {mode} sidecar {index + 1}: python {last['own'] / MiB:.0f} MiB + {last['child_count']} children "
          f"{last['children'] / MiB:.0f} MiB ({', '.join(last['child_names'])}), load {result['load']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sidecars", type=int, default=3, help="sidecars per mode, running at once")
    parser.add_argument("--polls", type=int, default=20)
    args = parser.parse_args()
    print_result(run(args.sidecars, args.polls))


if __name__ == "__main__":
    main()
