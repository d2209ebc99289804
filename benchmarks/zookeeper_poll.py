"""One poll's volume reading on a ZooKeeper-mode cluster: the Admin API against the sidecars' znode volumes.

On a local 3-broker Kafka 3.9 cluster in ZooKeeper mode (one ZooKeeper server), each way a sidecar can
see every broker's volumes:

- Admin API: ClusterAdmin.live_broker_ids() + describe_volumes() (DescribeCluster, then DescribeLogDirs
  with an empty topic list to every broker at once), as on KRaft;
- znode volumes (zookeeper.connect): one sidecar's ZnodeVolumes.publish() of its own broker's dirs (statvfs)
  and read() of all three brokers' znodes (the children watch keeps the list; one getData each), the other
  two sidecars having published theirs.

    .venv/bin/python benchmarks/zookeeper_poll.py [--polls 20]
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone

from common import LoadWatch, Result, Stats, cell, print_result, provenance, table, this_command, uptime
from harness.cluster.local_cluster import LocalKafkaCluster
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.observe.local_watch import own_volumes
from quota_sidecar.observe.znode_volumes import ZnodeVolumes
from quota_sidecar.observe.zookeeper_session import ZooKeeperSession

TITLE = "ZooKeeper mode: one poll, Admin API against znode volumes"  # its subsection of "## Disk protection"


def timed(polls: int, one_poll) -> Stats:
    times = []
    for poll in range(polls + 2):  # the first two warm up (connections, the children watch)
        started = time.perf_counter()
        one_poll()
        if poll >= 2:
            times.append(time.perf_counter() - started)
    return Stats.of(times)


def run(polls: int = 20) -> Result:
    with LoadWatch() as load, LocalKafkaCluster(brokers=3, zookeeper=True) as cluster, \
            ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        sidecars = {broker: ZnodeVolumes(ZooKeeperSession(cluster.zookeeper_connect, 10.0), broker)
                    for broker in cluster.broker_ids}
        try:
            def now():
                return datetime.now(timezone.utc)

            for broker, znodes in sidecars.items():
                znodes.publish(own_volumes(broker, cluster.log_dirs(broker), now()))
            ours = sidecars[1]

            def admin_poll():
                assert len(admin.describe_volumes(admin.live_broker_ids(), now())) == 3

            def znode_poll():
                ours.publish(own_volumes(1, cluster.log_dirs(1), now()))
                assert len(ours.read(now())) == 3

            started_load = uptime()
            admin_times, znode_times = timed(polls, admin_poll), timed(polls, znode_poll)
        finally:
            for znodes in sidecars.values():
                znodes.close()
    print(f"  Admin API {admin_times.text('s', digits=4)}, znodes {znode_times.text('s', digits=4)}", flush=True)
    markdown = "\n\n".join([
        f"{polls} polls after 2 warm-up ones, median (min–max), on a local 3-broker Kafka 3.9.2 cluster in "
        "ZooKeeper mode (ZooKeeper 3.8.4 on loopback). Admin API: `live_broker_ids()` + `describe_volumes()` "
        "(DescribeCluster, then DescribeLogDirs `[]` to the three brokers at once). Znode volumes: one sidecar "
        "publishes its broker's dirs when they changed (one setData; the local watch's thread does it between "
        "polls) and reads the three znodes (one getData each; the children "
        "watch keeps their list). The znode path is what a Kafka < 3.3 broker needs; on 3.9 the sidecar uses "
        "the Admin API and shows the znodes beside it.",
        table(["volume source", "one poll's wall time", "1-min load at start"],
              [["Admin API (DescribeCluster + DescribeLogDirs)", cell(admin_times, "ms", 1e-3, 2),
                started_load.split()[0]],
               ["znode volumes (publish + read 3)", cell(znode_times, "ms", 1e-3, 2), started_load.split()[0]]]),
        provenance(this_command(), load) + " (The Kafka version named there is the KRaft clusters'; these brokers "
        "are 3.9.2.)",
    ])
    return Result(TITLE, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=20)
    print_result(run(parser.parse_args().polls))


if __name__ == "__main__":
    main()
