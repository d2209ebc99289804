"""Tenants: a Java producer with a quota of its own, and the local verdict with up to 10,000 tenants.

First, java_flood.py's run as a tenant: Kafka's ProducerPerformance at full speed over SASL as a principal
whose own entity has producer_byte_rate 1 GB/s (set with kafka-configs): alice with a user quota, bob with a
user + client-id quota; default settings (check interval PT1M, the local watch on). Measured: the crossing of
the limit to the sidecar's line throttling the tenant's own entity, the lowest free space, the log dir.

Then the local verdict at scale. A tenant is a quota entity with a producer rate of its own (here the users tenant-00000, tenant-00001, ...,
each at 1 GB/s). An in-process sidecar (wiring.build_sidecar) beside broker 1 of a local 3-broker cluster runs a
pass, which reads every tenant in one DescribeClientQuotas; then the verdict's write as the local watch makes
it (Sidecar.quota_writer.apply(decider.judged_locally()): one DescribeClientQuotas, every entity's record written to
the sidecars' state topic with one wait, AlterClientQuotas in requests of up to 1,000 entities). Measured:

- the pass's read of the tenants (DescribeClientQuotas of every entity);
- the verdict's write, from the call to its return, and to the moment a DescribeClientQuotas of another
  broker shows every tenant at 1 B/s;
- the hand-back (quota_writer.apply at factor 1, what the pass does once the disk has room), the same way.

    .venv/bin/python benchmarks/tenant_verdict.py [--tenants 10,1000,10000] [--rounds 3] [--floods 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import java_flood
from common import (MiB, LoadWatch, Result, Stats, aggregator_running, cell, print_result, provenance, table,
                    this_command)
from harness.cluster.local_cluster import LocalKafkaCluster
from quota_sidecar.common import records
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide import quotas
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.wiring import build_sidecar

TITLE = "Tenants: producers with a quota of their own"  # its subsection of "## Disk protection" in docs/benchmarks.md
OWN_RATE = 1e9


def tenants(count: int) -> list[str]:
    return [f"tenant-{index:05d}" for index in range(count)]


def until_every(admin: ClusterAdmin, names: list[str], rate: float, timeout: float = 120.0) -> float:
    """Seconds until a DescribeClientQuotas shows every tenant at `rate`."""
    started = time.perf_counter()
    while True:
        in_force = admin.describe_user_quotas()
        if all(in_force.get(name, {}).get(PRODUCE) == rate for name in names):
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"not every tenant at {rate:g} B/s after {timeout:.0f} s")
        time.sleep(0.02)


def measure(cluster: LocalKafkaCluster, admin: ClusterAdmin, count: int, rounds: int, pipeline: dict) -> dict:
    """`pipeline`: the sidecar's properties that reach the aggregator, which decides its first pass only."""
    names = tenants(count)
    admin.alter_user_quotas({name: {PRODUCE: OWN_RATE} for name in names})
    until_every(admin, names, OWN_RATE)
    sidecar = build_sidecar(cfg.from_properties({
        cfg.PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, cfg.PREFIX + "broker.id": "1",
        cfg.PREFIX + "poll.timeout": "PT120S", cfg.PREFIX + "produce": "1000000",
        cfg.PREFIX + "storage.per.volume.limit.min.available.bytes": "1", **pipeline}))
    reads, writes, in_force, hand_backs, back_in_force = [], [], [], [], []
    try:
        sidecar.run_pass()
        for _ in range(rounds):
            started = time.perf_counter()
            sidecar.admin.describe_user_quotas()
            reads.append(time.perf_counter() - started)

            all_records = sidecar.read_records()
            started = time.perf_counter()
            sidecar.quota_writer.apply(sidecar.decider.judged_locally(datetime.now(timezone.utc)), all_records)
            writes.append(time.perf_counter() - started)
            in_force.append(writes[-1] + until_every(admin, names, 1.0))

            all_records = sidecar.read_records()
            started = time.perf_counter()
            sidecar.quota_writer.apply(quotas.wanted(sidecar.config.quotas, 1.0, sidecar.decider.tenant_rates), all_records)
            hand_backs.append(time.perf_counter() - started)
            back_in_force.append(hand_backs[-1] + until_every(admin, names, OWN_RATE))
        assert not [key for key in records.owned(sidecar.read_records(), records.QUOTA) if key[0] in set(names)]
    finally:
        sidecar.cleanup()
        sidecar.close()
        admin.alter_user_quotas({name: {PRODUCE: None} for name in names})
    return {"read": Stats.of(reads), "write": Stats.of(writes), "in_force": Stats.of(in_force),
            "hand_back": Stats.of(hand_backs), "back": Stats.of(back_in_force)}


def floods(runs: int, pipeline: dict) -> list[list[str]]:
    """java_flood.py's run with the producer as each kind of tenant, default settings."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-tenant-flood-") as work_dir:
        for tenant in ("user", "user + client id"):
            results = [java_flood.one_run("PT1M", "on", java_flood.SPEEDS["full speed"], Path(work_dir), pipeline,
                                          tenant=tenant) for _ in range(runs)]
            for r in results:
                print(f"  a tenant's {tenant} quota: crossing {java_flood.seconds(r['crossing'])}, throttled "
                      f"{java_flood.written_text(r)}, lowest free {r['lowest'] / MiB:.0f} MiB", flush=True)
            rows.append([tenant, cell(Stats.of(r["written"] for r in results if r["written"] is not None), "s"),
                         f"{min(r['lowest'] for r in results) / MiB:.0f} MiB",
                         f"{sum(r['offline'] for r in results)} of {runs}"])
    return rows


def run(counts: tuple[int, ...] = (10, 1_000, 10_000), rounds: int = 3, flood_runs: int = 3) -> Result:
    with LoadWatch() as load, aggregator_running() as aggregator:
        flood_rows = floods(flood_runs, aggregator.agent_properties) if flood_runs else []
        rows = []
        with LocalKafkaCluster(brokers=3) as cluster, \
                ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers, "request_timeout_ms": 60_000}) as admin:
            for count in counts:
                figures = measure(cluster, admin, count, rounds, aggregator.agent_properties)
                print(f"  {count:,} tenants: verdict written in {figures['write'].text('s', digits=3)}, "
                      f"in force after {figures['in_force'].text('s', digits=3)}", flush=True)
                rows.append([f"{count:,}", cell(figures["read"], "ms", 1e-3, 0), cell(figures["write"], "ms", 1e-3, 0),
                             cell(figures["in_force"], "ms", 1e-3, 0), cell(figures["hand_back"], "ms", 1e-3, 0),
                             cell(figures["back"], "ms", 1e-3, 0)])
    about_floods, about_verdict, measured = __doc__.split("\n\n")[1:4]
    markdown = "\n\n".join([
        about_floods.replace("\n", " ") + f" {flood_runs} runs each, median (min–max).",
        table(["the tenant's quota on", "its entity throttled after the crossing", "lowest free", "offline"],
              flood_rows),
        about_verdict.replace("\n", " "), measured + f"\n\n{rounds} rounds each, median (min–max).",
        table(["tenants", "pass: read every tenant", "verdict: written", "verdict: every tenant in force",
               "hand-back: written", "hand-back: every rate back"], rows),
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", default="10,1000,10000", help="comma-separated tenant counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floods", type=int, default=3, help="Java producer runs per kind of tenant (0: none)")
    args = parser.parse_args()
    print_result(run(tuple(int(count) for count in args.tenants.split(",")), args.rounds, args.floods))


if __name__ == "__main__":
    main()
