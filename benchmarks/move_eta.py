"""How good the sidecars' ETA is over a move, and what keep_up does for a move throttled below its inbound rate.

    sudo .venv/bin/python benchmarks/move_eta.py [--move-mib 64] [--throttle 1000000] [--json]

Three brokers in network namespaces behind rate-limited links with a sidecar beside each and a steady client
load on the source (tests/harness/move_lab.py; needs root for `ip netns`, veth and `tc ... tbf`).

1. ETA: one partition with no produce moves under `kafka-reassign-partitions --throttle` and the same rate as
   the sidecars' global override. Every second the source's sidecar's reported ETA is noted; once the
   move has ended, each is compared with the time the move actually took from then: the error in % vs
   the time into the move.
2. keep_up: the partition the producer writes into (0.8 MB/s) moves under an operator's throttle of
   0.3 MB/s, first with Kafka's tool alone (no sidecars: the move cannot end; it is given `--limit`
   seconds), then with the sidecars (keep_up raises the source's rate).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import common  # noqa: E402  (and tests/ on the path, for the harness)
from harness import kafka_tools  # noqa: E402
from harness.lab_clients import LoadProfile  # noqa: E402
from harness.move_lab import DESTINATION, SOURCE, LabSettings, MoveLab  # noqa: E402
from harness.sidecar_process import http  # noqa: E402

TOKEN = "benchmark-token"
PRODUCE = 800_000


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--move-mib", type=int, default=64, help="size of the partition moved for the ETA")
    parser.add_argument("--throttle", type=int, default=1_000_000, help="bytes/s of the ETA move's throttle")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds given to the move without keep_up")
    parser.add_argument("--subnet", type=int, default=4, help="10.231.<subnet>.0/24")
    parser.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")
    return parser.parse_args(argv)


def moving(lab: MoveLab, topic: str) -> bool:
    return any(move.topic == topic for move in lab.admin.list_reassignments())


def reassign(lab: MoveLab, topic: str, *arguments: str) -> None:
    kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, {(topic, 0): [DESTINATION]}, *arguments)


def eta_over_a_move(lab: MoveLab, throttle: int) -> dict:
    topic = lab.move_topics["eta"]
    url = lab.sidecars[SOURCE].url + "/throttle"
    http("PUT", url, {"rate": throttle}, token=TOKEN)
    try:
        reassign(lab, topic, "--execute", "--throttle", str(throttle))
        started, reported = time.monotonic(), []
        while moving(lab, topic):
            status = lab.sidecar_get(SOURCE, "/status") or {}
            last_poll = (status.get("throttle") or {}).get("last_poll")
            for move in status.get("replication", {}).get("progress", []):
                if move["topic"] == topic and move["eta_seconds"] is not None and last_poll:
                    age = (datetime.now(timezone.utc)
                           - datetime.fromisoformat(last_poll.replace("Z", "+00:00"))).total_seconds()
                    reported.append((time.monotonic() - started - age, move["eta_seconds"]))  # as of its pass
            time.sleep(1.0)
        took = time.monotonic() - started
    finally:
        http("DELETE", url, token=TOKEN)
        reassign(lab, topic, "--verify")
    reported = sorted(set(reported))  # one per pass
    errors = [{"at": round(at, 1), "eta": round(eta, 1), "actual": round(took - at, 1),
               "error_percent": round(100 * (eta - (took - at)) / (took - at), 1)}
              for at, eta in reported if took - at > 1]
    return {"move_seconds": round(took, 1), "throttle": throttle, "samples": errors}


def keep_up_move(lab: MoveLab, throttle: int, limit: float) -> dict:
    topic = lab.load_topic
    reassign(lab, topic, "--execute", "--throttle", str(throttle))
    started = time.monotonic()
    while moving(lab, topic) and time.monotonic() - started < limit:
        time.sleep(1.0)
    ended = not moving(lab, topic)
    took = time.monotonic() - started
    if ended:
        reassign(lab, topic, "--verify")
    return {"ended": ended, "seconds": round(took, 1)}


def run(args: argparse.Namespace) -> dict:
    settings = LabSettings(
        capacity=6_000_000, sidecar_capacity=3_000_000,
        load=LoadProfile(produce=PRODUCE, replay=1_600_000, peak_seconds=3600, quiet_seconds=1),
        move_bytes=args.move_mib << 20, load_history_bytes=16 << 20, moves=("eta",), subnet=args.subnet,
        network_window_seconds=8,
        sidecar_properties=(("api.token", TOKEN), ("replication.keep.up.margin.percent", 100),
                            ("poll.timeout", "PT60S")))
    low = PRODUCE * 3 // 8
    with MoveLab(settings) as lab:
        without = keep_up_move(lab, low, args.limit)  # no sidecars yet: the operator's throttle alone
        if not without["ended"]:  # cancelled (the partition stays on the source), its throttles removed
            lab.admin.alter_reassignments({(lab.load_topic, 0): None})
            while moving(lab, lab.load_topic):
                time.sleep(1.0)
            lab.clear_static_throttles(lab.load_topic)
        lab.start_sidecars()
        eta = eta_over_a_move(lab, args.throttle)
        back = {(lab.load_topic, 0): [SOURCE]}  # the load partition back on the source, then moved again
        if lab.admin.describe_partitions([lab.load_topic])[(lab.load_topic, 0)].replicas != (SOURCE,):
            kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, back, "--execute")
            while moving(lab, lab.load_topic):
                time.sleep(1.0)
        with_keep_up = keep_up_move(lab, low, 600.0)
        return {"eta": eta, "operator_throttle": low, "produce": PRODUCE, "without_keep_up": without,
                "with_keep_up": with_keep_up, "work_dir": str(lab.work_dir)}


def table(result: dict) -> str:
    eta = result["eta"]
    lines = [f"ETA over a {eta['move_seconds']} s move at {eta['throttle']:,} B/s:",
             "  at s   reported s  actual s  error %"]
    lines += [f"  {s['at']:>5}  {s['eta']:>10}  {s['actual']:>8}  {s['error_percent']:>7}" for s in eta["samples"]]
    for name in ("without_keep_up", "with_keep_up"):
        move = result[name]
        lines.append(f"{name}: {'ended after' if move['ended'] else 'not ended after'} {move['seconds']} s "
                     f"(operator throttle {result['operator_throttle']:,} B/s, produce {result['produce']:,} B/s)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return common.lab_main("move_eta", parse_args(argv), run, table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
