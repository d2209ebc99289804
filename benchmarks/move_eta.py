"""How good the sidecars' ETA is over a move, and what keep_up does for a move throttled below its inbound rate.

    sudo .venv/bin/python benchmarks/move_eta.py [--move-mib 64] [--throttle 1000000] [--every 5]
        [--limit 120] [--no-keep-up] [--json | --write]

Three brokers in network namespaces behind rate-limited links with a sidecar beside each and a steady client
load on the source (tests/harness/network/move_lab.py; needs root for `ip netns`, veth and `tc ... tbf`).

1. ETA: one partition with no produce moves under `kafka-reassign-partitions --throttle` and the same rate as
   the sidecars' global override. Every second the source's sidecar's reported ETA is noted; once the
   move has ended, each is compared with the time the move actually took from then: the error in % vs
   the time into the move, one sample every `--every` seconds.
2. keep_up (not with --no-keep-up): the partition the producer writes into (0.8 MB/s) moves under an
   operator's throttle of 0.3 MB/s, first with Kafka's tool alone (no sidecars: the move cannot end; it is
   given `--limit` seconds), then with the sidecars (keep_up raises the source's rate).

The figures print as Markdown, the way benchmarks/run_all.py writes them (tables, then when, by which
command, on what, under which load); --write also puts them into docs/benchmarks.md as the section
"## Moves: ETA accuracy and keep_up (issue 8)", the rest of the file kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import common  # noqa: E402  (and tests/ on the path, for the harness)
from common import LoadWatch, provenance, this_command, write_section  # noqa: E402
from harness.cluster import kafka_tools  # noqa: E402
from harness.clients.lab_clients import LoadProfile  # noqa: E402
from harness.network.move_lab import DESTINATION, SOURCE, LabSettings, MoveLab  # noqa: E402
from harness.agents.sidecar_process import http  # noqa: E402

TOKEN = "benchmark-token"
PRODUCE = 800_000
SECTION = "## Moves: ETA accuracy and keep_up (issue 8)"  # of docs/benchmarks.md


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--move-mib", type=int, default=64, help="size of the partition moved for the ETA")
    parser.add_argument("--throttle", type=int, default=1_000_000, help="bytes/s of the ETA move's throttle")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between two ETA samples shown")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds given to the move without keep_up")
    parser.add_argument("--no-keep-up", action="store_true", help="the ETA move only (a short run)")
    parser.add_argument("--subnet", type=int, default=4, help="10.231.<subnet>.0/24")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON for machines instead of Markdown")
    output.add_argument("--write", action="store_true", help="also write the figures into docs/benchmarks.md")
    return parser.parse_args(argv)


def moving(lab: MoveLab, topic: str) -> bool:
    return any(move.topic == topic for move in lab.admin.list_reassignments())


def reassign(lab: MoveLab, topic: str, *arguments: str) -> None:
    kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, {(topic, 0): [DESTINATION]}, *arguments)


def eta_over_a_move(lab: MoveLab, throttle: int, every: float) -> dict:
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
    errors = [{"at": round(at, 1), "eta": round(eta, 1), "actual": round(took - at, 1),
               "error_percent": round(100 * (eta - (took - at)) / (took - at), 1)}
              for at, eta in every_few_seconds(sorted(set(reported)), every) if took - at > 1]
    return {"move_seconds": round(took, 1), "throttle": throttle, "every": every, "samples": errors}


def every_few_seconds(reported: list[tuple[float, float]], every: float) -> list[tuple[float, float]]:
    """The first (at, eta) of each `every`-second stretch of the move (reported: one per pass, sorted)."""
    kept: list[tuple[float, float]] = []
    for at, eta in reported:
        if not kept or at // every > kept[-1][0] // every:
            kept.append((at, eta))
    return kept


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
    result = {"command": this_command(), "move_mib": args.move_mib, "operator_throttle": low, "produce": PRODUCE}
    with LoadWatch() as load, MoveLab(settings) as lab:  # the machine is shared: figures go out with its load
        if not args.no_keep_up:
            result["without_keep_up"] = keep_up_move(lab, low, args.limit)  # no sidecars yet: the operator's alone
            if not result["without_keep_up"]["ended"]:  # cancelled (it stays on the source), throttles removed
                lab.admin.alter_reassignments({(lab.load_topic, 0): None})
                while moving(lab, lab.load_topic):
                    time.sleep(1.0)
                lab.clear_static_throttles(lab.load_topic)
        lab.start_sidecars()
        result["eta"] = eta_over_a_move(lab, args.throttle, args.every)
        if not args.no_keep_up:
            back = {(lab.load_topic, 0): [SOURCE]}  # the load partition back on the source, then moved again
            if lab.admin.describe_partitions([lab.load_topic])[(lab.load_topic, 0)].replicas != (SOURCE,):
                kafka_tools.reassign_partitions(lab.cluster.bootstrap_servers, back, "--execute")
                while moving(lab, lab.load_topic):
                    time.sleep(1.0)
            result["with_keep_up"] = keep_up_move(lab, low, 600.0)
        result["work_dir"] = str(lab.work_dir)
    result["provenance"] = provenance(result["command"], load)
    return result


def markdown(result: dict) -> str:
    """The figures as Markdown, readable as plain text too."""
    eta = result["eta"]
    lines = [f"ETA over a move of {result['move_mib']} MiB with no produce under `kafka-reassign-partitions "
             f"--throttle {eta['throttle']}` and the same global override; it took {eta['move_seconds']} s. "
             f"Every {eta['every']:g} s, the ETA the source's sidecar had published (dated by its pass) against "
             "the time the move then took:", "",
             common.table(["s into the move", "ETA reported s", "the move took s more", "ETA error %"],
                          [[s["at"], s["eta"], s["actual"], f"{s['error_percent']:+.1f}"] for s in eta["samples"]])]
    moves = [(name, result[key]) for name, key in (("Kafka's tool alone", "without_keep_up"),
                                                   ("the sidecars (keep_up)", "with_keep_up")) if key in result]
    if moves:
        lines += ["", f"`client-load` ({result['produce']:,} B/s produced into it) moved under an operator's "
                      f"throttle of {result['operator_throttle']:,} B/s:", "",
                  common.table(["throttled by", "the move"],
                               [[name, f"{'ended' if move['ended'] else 'not ended'} after {move['seconds']} s"]
                                for name, move in moves])]
    lines += ["", f"{result['provenance']} Logs in {result['work_dir']}."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    def run_and_write(args: argparse.Namespace) -> dict:
        result = run(args)
        if args.write:
            write_section(markdown(result), heading=SECTION)
        return result

    return common.lab_main("move_eta", parse_args(argv), run_and_write, markdown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
