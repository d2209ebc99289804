"""The local verdict with many tenants: from its call to every tenant's quota in force, at 10 to 10,000 tenants.

A tenant is a quota entity with a producer rate of its own (here the users tenant-00000, tenant-00001, ...,
each at 1 GB/s). An in-process sidecar (cli.build_sidecar) beside broker 1 of a local 3-broker cluster runs a
pass, which reads every tenant in one DescribeClientQuotas; then the verdict's write as the local watch makes
it (Sidecar.apply_quotas(decider.judged_locally()): one DescribeClientQuotas, every entity's record written to
the sidecars' state topic with one wait, AlterClientQuotas in requests of up to 1,000 entities). Measured:

- the pass's read of the tenants (DescribeClientQuotas of every entity);
- the verdict's write, from the call to its return, and to the moment a DescribeClientQuotas of another
  broker shows every tenant at 1 B/s;
- the hand-back (apply_quotas at factor 1, what the pass does once the disk has room), the same way.

    .venv/bin/python benchmarks/tenant_verdict.py [--tenants 10,1000,10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone

from common import LoadWatch, Result, Stats, cell, print_result, provenance, table, this_command
from harness.local_cluster import LocalKafkaCluster
from quota_sidecar import config as cfg, quotas, records
from quota_sidecar.admin import ClusterAdmin
from quota_sidecar.cli import build_sidecar
from quota_sidecar.quotas import PRODUCE

TITLE = "The local verdict with many tenants"  # its subsection of "## Disk protection" in docs/benchmarks.md
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


def measure(cluster: LocalKafkaCluster, admin: ClusterAdmin, count: int, rounds: int) -> dict:
    names = tenants(count)
    admin.alter_user_quotas({name: {PRODUCE: OWN_RATE} for name in names})
    until_every(admin, names, OWN_RATE)
    sidecar = build_sidecar(cfg.from_properties({
        cfg.PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, cfg.PREFIX + "broker.id": "1",
        cfg.PREFIX + "poll.timeout": "PT120S", cfg.PREFIX + "produce": "1000000",
        cfg.PREFIX + "storage.per.volume.limit.min.available.bytes": "1"}))
    reads, writes, in_force, hand_backs, back_in_force = [], [], [], [], []
    try:
        sidecar.run_pass()
        for _ in range(rounds):
            started = time.perf_counter()
            sidecar.admin.describe_user_quotas()
            reads.append(time.perf_counter() - started)

            all_records = sidecar.read_records()
            started = time.perf_counter()
            sidecar.apply_quotas(sidecar.decider.judged_locally(datetime.now(timezone.utc)), all_records)
            writes.append(time.perf_counter() - started)
            in_force.append(writes[-1] + until_every(admin, names, 1.0))

            all_records = sidecar.read_records()
            started = time.perf_counter()
            sidecar.apply_quotas(quotas.wanted(sidecar.config.quotas, 1.0, sidecar.decider.tenant_rates), all_records)
            hand_backs.append(time.perf_counter() - started)
            back_in_force.append(hand_backs[-1] + until_every(admin, names, OWN_RATE))
        assert not [key for key in records.owned(sidecar.read_records(), records.QUOTA) if key[0] in set(names)]
    finally:
        sidecar.cleanup()
        sidecar.close()
        admin.alter_user_quotas({name: {PRODUCE: None} for name in names})
    return {"read": Stats.of(reads), "write": Stats.of(writes), "in_force": Stats.of(in_force),
            "hand_back": Stats.of(hand_backs), "back": Stats.of(back_in_force)}


def run(counts: tuple[int, ...] = (10, 1_000, 10_000), rounds: int = 3) -> Result:
    rows = []
    with LoadWatch() as load, LocalKafkaCluster(brokers=3) as cluster, \
            ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers, "request_timeout_ms": 60_000}) as admin:
        for count in counts:
            figures = measure(cluster, admin, count, rounds)
            print(f"  {count:,} tenants: verdict written in {figures['write'].text('s', digits=3)}, "
                  f"in force after {figures['in_force'].text('s', digits=3)}", flush=True)
            rows.append([f"{count:,}", cell(figures["read"], "ms", 1e-3, 0), cell(figures["write"], "ms", 1e-3, 0),
                         cell(figures["in_force"], "ms", 1e-3, 0), cell(figures["hand_back"], "ms", 1e-3, 0),
                         cell(figures["back"], "ms", 1e-3, 0)])
    markdown = "\n\n".join([
        __doc__.split("\n\n")[1].replace("\n", " "),
        table(["tenants", "pass: read every tenant", "verdict: written", "verdict: every tenant in force",
               "hand-back: written", "hand-back: every rate back"], rows),
        f"{rounds} rounds each, median (min–max).",
        provenance(this_command(), load),
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", default="10,1000,10000", help="comma-separated tenant counts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print_result(run(tuple(int(count) for count in args.tenants.split(",")), args.rounds))


if __name__ == "__main__":
    main()
