"""Does a Java producer throttled at 1 B/s (the hard limit's quota) send again once the quota is removed?

A 1-broker cluster, Kafka's ProducerPerformance at `--rate` records a second of 1 KB (acks=1); the default user's
producer_byte_rate set to 1 B/s after `--before` seconds, removed `--held` seconds later; then the records the
producer reports sent each second for `--after` seconds. Kafka's bandwidth throttle time is (rate - quota) / quota x
window, bounded by nothing: the broker mutes the connection that long and the client (KIP-219) waits it out.

    .venv/bin/python benchmarks/throttle_resume.py [--rate 2000] [--before 15] [--held 15] [--after 90]
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

from common import LoadWatch, Result, print_result, provenance, this_command
from harness.kafka_tools import producer_performance
from harness.local_cluster import LocalKafkaCluster
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.observe.admin import ClusterAdmin

TITLE = "A producer throttled at 1 B/s after the quota is removed"


def run(rate: int, before: float, held: float, after: float) -> Result:
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="throttle-resume-") as work, \
            LocalKafkaCluster(brokers=1) as cluster, ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("resume", 1, 1, {})
        output = Path(work) / "producer.log"
        producer = producer_performance(cluster.bootstrap_servers, "resume", 10**9, 1024, rate, output,
                                        reporting_interval_ms=1000, acks="1")
        try:
            time.sleep(before)
            admin.alter_user_quotas({None: {PRODUCE: 1.0}})
            time.sleep(held)
            admin.alter_user_quotas({None: {PRODUCE: None}})
            removed_lines = len(_sent(output))
            time.sleep(after)
        finally:
            producer.send_signal(signal.SIGTERM)
            producer.wait(30)
        sent = _sent(output)
    since_removed = sum(sent[removed_lines:])
    markdown = (f"ProducerPerformance at {rate} records/s of 1 KB on a 1-broker cluster; the default user's "
                f"producer_byte_rate 1 B/s from +{before:g} s, removed at +{before + held:g} s. Records reported sent "
                f"each second before the quota: {sent[:3]}…; **after the removal, in {after:g} s: {since_removed}**.")
    return Result(TITLE, markdown + "\n\n" + provenance(this_command(), load))


def _sent(output: Path) -> list[int]:
    return [int(line.split()[0]) for line in output.read_text().splitlines() if " records sent, " in line
            and line.split()[0].isdigit()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--before", type=float, default=15.0)
    parser.add_argument("--held", type=float, default=15.0)
    parser.add_argument("--after", type=float, default=90.0)
    args = parser.parse_args()
    print_result(run(args.rate, args.before, args.held, args.after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
