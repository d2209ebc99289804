"""Move time under the sidecars against the static rate that keeps the same client headroom.

    sudo .venv/bin/python benchmarks/move_time.py [--rounds 2] [--move-mib 128] [--json]

Three brokers, each in a network namespace of its own behind a rate-limited link, with clients on the
source broker whose reads alternate between a peak and a quiet level (tests/harness/network/move_lab.py and
tests/harness/network/netns.py; needs root for `ip netns`, veth and `tc ... tbf`). Each round moves one partition
under the sidecars, one per broker inside its namespace, then another under a static throttle set the
way kafka-reassign-partitions --throttle sets it, at (capacity - client peak) x max%: what leaves the
clients the sidecar's headroom at their peak (tests/integration/test_network_throttle.py says why that is the fair
static rate). Figures per move: duration, average
throttle and replication rate while a throttle was in force (Kafka's replication-quota tests want the
rate between 0.5x and 1.1x the throttle), the bytes moved before the sidecars' first rates, and the
bytes/s the clients read in the peak and quiet phases of the move.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from dataclasses import asdict

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from common import LoadWatch, lab_main  # noqa: E402
from harness.clients.lab_clients import LoadProfile  # noqa: E402
from harness.network.move_lab import LabSettings, MoveLab  # noqa: E402

MB = 1_000_000


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="static + adaptive moves, one pair per round")
    parser.add_argument("--move-mib", type=int, default=128, help="size of each moved partition in MiB")
    parser.add_argument("--capacity", type=int, default=6_000_000, help="bytes/s of every link, each way")
    parser.add_argument("--produce", type=int, default=300_000, help="client bytes/s written and read back, always")
    parser.add_argument("--replay", type=int, default=2_700_000, help="client bytes/s re-read in the peaks")
    parser.add_argument("--peak-seconds", type=float, default=10)
    parser.add_argument("--quiet-seconds", type=float, default=10)
    parser.add_argument("--max-percent", type=float, default=90.0)
    parser.add_argument("--window-seconds", type=int, default=4, help="the sidecars' replication.network.window")
    parser.add_argument("--subnet", type=int, default=1, help="10.231.<subnet>.0/24 (the test uses 0)")
    parser.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict:
    settings = LabSettings(
        capacity=args.capacity,
        load=LoadProfile(args.produce, args.replay, args.peak_seconds, args.quiet_seconds),
        move_bytes=args.move_mib << 20,
        moves=tuple(f"{mode}-{round_}" for round_ in range(1, args.rounds + 1) for mode in ("adaptive", "static")),
        max_percent=args.max_percent,
        network_window_seconds=args.window_seconds,
        subnet=args.subnet,
        move_timeout=600.0,
    )
    started = time.monotonic()
    with LoadWatch() as load, MoveLab(settings) as lab:  # the machine is shared: figures go out with its load
        lab.start_sidecars(wait=False)  # they start while the client load is measured
        peak, quiet = lab.measure_client_traffic()
        static_rate = lab.static_rate()
        rounds = []
        for round_ in range(1, args.rounds + 1):
            if round_ > 1:
                lab.start_sidecars(wait=False)
            lab.wait_for_sidecars()
            adaptive = lab.run_adaptive(f"adaptive-{round_}")
            lab.stop_sidecars()
            static = lab.run_static(static_rate, f"static-{round_}")
            for result in (adaptive, static):  # the time series, for whoever wants to plot them
                (lab.work_dir / f"{result.topic}-samples.json").write_text(
                    json.dumps([asdict(sample) for sample in result.samples]))
            rounds.append({"static": static.figures(), "adaptive": adaptive.figures(),
                           "speed_up": round(static.move_seconds / adaptive.move_seconds, 2)})
        work_dir = str(lab.work_dir)
    return {
        "command": " ".join(shlex.quote(part) for part in [".venv/bin/python", "benchmarks/move_time.py",
                                                           *sys.argv[1:]]),
        "settings": {"capacity": args.capacity, "client_produce": args.produce, "client_replay_peak": args.replay,
                     "peak_seconds": args.peak_seconds, "quiet_seconds": args.quiet_seconds,
                     "move_bytes": settings.move_bytes, "max_percent": args.max_percent,
                     "network_window_seconds": args.window_seconds},
        "client_tx_peak": round(peak), "client_tx_quiet": round(quiet), "static_rate": static_rate,
        "rounds": rounds, "seconds": round(time.monotonic() - started), "work_dir": work_dir,
        "load_average": [round(min(load.samples), 1), round(max(load.samples), 1)],
    }


def render(result: dict) -> str:
    """The figures as Markdown (readable as plain text too); MB = 10^6 bytes."""
    def mb(value) -> str:
        return "–" if value is None else f"{value / MB:.2f}"

    settings = result["settings"]
    lines = [
        f"`{result['command']}`: links of {mb(settings['capacity'])} MB/s each way; clients read "
        f"{mb(settings['client_produce'] + settings['client_replay_peak'])} MB/s from the source for "
        f"{settings['peak_seconds']:g} s, then {mb(settings['client_produce'])} MB/s for "
        f"{settings['quiet_seconds']:g} s; "
        f"partitions of {settings['move_bytes'] >> 20} MiB; max {settings['max_percent']:g}%; sidecar window "
        f"{settings['network_window_seconds']} s. Client traffic on the source's link as the sidecar sees it: "
        f"peak {mb(result['client_tx_peak'])} MB/s, quiet {mb(result['client_tx_quiet'])} MB/s, so the static "
        f"rate is {mb(result['static_rate'])} MB/s.",
        "",
        "| round | throttle | move s | throttle MB/s: all (peaks / quiet) | source's throttle as peaks end MB/s "
        "| replication MB/s: all (peaks / quiet) | replication ÷ throttle | moved before a throttle: MB (s) "
        "| clients read MB/s: peaks / quiet | sidecar pass s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, round_ in enumerate(result["rounds"], 1):
        for mode in ("static", "adaptive"):
            f = round_[mode]
            pass_seconds = "–" if f["sidecar_pass_seconds"] is None else f"{f['sidecar_pass_seconds']:.1f}"
            lines.append(
                f"| {index} | {mode} | {f['move_seconds']:.1f} | {mb(f['throttle_average'])} "
                f"({mb(f['throttle_in_peaks'])} / {mb(f['throttle_in_quiet'])}) | {mb(f['leader_at_peak_ends'])} "
                f"| {mb(f['replication_average'])} "
                f"({mb(f['replication_in_peaks'])} / {mb(f['replication_in_quiet'])}) | {f['rate_ratio']:.2f} "
                f"| {mb(f['unthrottled_bytes'])} ({f['unthrottled_seconds']:.1f}) "
                f"| {mb(f['client_peak_throughput'])} / {mb(f['client_quiet_throughput'])} | {pass_seconds} |")
    speed_ups = ", ".join(f"{round_['speed_up']:.2f}x" for round_ in result["rounds"])
    lines += ["", f"Adaptive over static move time: {speed_ups}. {result['seconds']} s in all; 1-min load average "
                  f"{result['load_average'][0]}–{result['load_average'][1]} during the run (2 cores, shared); "
                  f"logs in {result['work_dir']}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return lab_main("move_time", parse_args(sys.argv[1:] if argv is None else argv), run, render)


if __name__ == "__main__":
    sys.exit(main())
