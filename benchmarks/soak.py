"""The fault soak: the lab of tests/harness/faults/fault_soak.py for `--minutes`, the nemesis on the schedule of
`--seed` (the same seed, the same faults at the same times), then the report: faults injected by kind, each
invariant's checks and violations (with the faults before them), the time to converge after each kind of fault.
Exit code 1 when an invariant was violated, or the nemesis could not inject a fault.

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--seed 1] [--kinds kill-agent,pause-agent,...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from common import LoadWatch, Result, print_result, provenance, this_command

from harness.faults.fault_soak import FLOOD_RATE, LIMIT, RESERVE, MiB, STEADY_RATE, WARM_UP, FaultSoak, SoakSettings
from harness.faults.invariants import report
from harness.faults.nemesis import KINDS, schedule

TITLE = "Fault soak"


def run(minutes: float, seed: int, kinds: list[str], keep: str | None = None) -> tuple[Result, bool]:
    seconds = minutes * 60
    settings = SoakSettings()
    # a long quiet after every 4th fault, in which the quotas must converge (faults come closer than that otherwise)
    faults = schedule(seed, seconds - settings.final_quiet(), [1, 2, 3], kinds,
                      long_gap=(4, settings.final_quiet()))
    print("\n".join(f"  {fault}" for fault in faults), flush=True)
    if keep:
        Path(keep).mkdir(parents=True)
    with LoadWatch() as load, (contextlib.nullcontext(keep) if keep else
                               tempfile.TemporaryDirectory(prefix="fault-soak-")) as work:
        outcome = FaultSoak(Path(work), settings).run(faults, seconds)
    ledger, events = outcome["ledger"], outcome["events"]
    returned = outcome["returned"]
    clean = not ledger.violations and not any(event.error for event in events) and not ledger.unchecked()
    markdown = "\n\n".join([
        f"{minutes:g} minutes, seed {seed}: {len(faults)} faults ({', '.join(kinds)}) on a 3-broker cluster "
        f"(beside 3 KRaft controllers, each broker in a network namespace of its own), an agent per broker and the aggregator; Kafka's ProducerPerformance flooding "
        f"broker 3's small filesystem in rounds at {FLOOD_RATE / MiB:.0f} MiB/s ({RESERVE / MiB:.0f} MiB above the "
        f"hard limit for the descent) and {STEADY_RATE} records a second (acks=all, the same principal) onto a "
        f"replicated topic; check interval {settings.check_interval}, validity {settings.validity:.0f} s. "
        f"**{len(ledger.violations)} violations**. The small filesystem's lowest free space: "
        f"**{outcome['lowest_free'] / MiB:.0f} MiB** (its hard limit {LIMIT / MiB:.0f} MiB: what the flood wrote "
        f"past it, {max(0, LIMIT - outcome['lowest_free']) / MiB:.0f} MiB, is the reserve the faults needed). "
        f"The default user's produce quota was 1 B/s in {outcome['throttled']} of the seconds checked, in "
        f"**{outcome['last_resorts']} last-resort episodes**; the steady producer had {outcome['acknowledged']:,} "
        f"records acknowledged. **{len(returned)} lifts judged**, the steady producer back to 90 % of its rate "
        + (f"**{max(returned):.0f} s** after the slowest" if returned else "after none")
        + f"; {outcome['after_last_resort']} lifts after the last resort (the steady producer restarted "
        f"{outcome['restarts']} times, as the WARNING tells an operator) and {outcome['not_judged']} near a fault "
        f"that stalls it (or at the end) not judged. The run ended with "
        f"{settings.final_quiet():.0f} s without faults. RSS grown from when each process was warm (run "
        f"{WARM_UP / 60:.0f} minutes, the soak half over) to the end: "
        + (", ".join(f"{name} {grown / MiB:+.1f} MiB" for name, grown in outcome["memory_grown"].items()) or "none")
        + " (each second's in `timeline.csv`).",
        report(ledger, events, outcome["convergence"]),
        provenance(this_command(), load)])
    return Result(TITLE, markdown), clean


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--keep", metavar="DIR", help="run in DIR (a new one) and keep it: the brokers', agents' and "
                        "aggregator's logs, the producers' output")
    args = parser.parse_args()
    if args.keep and Path(args.keep).exists():
        parser.error(f"--keep {args.keep}: exists already; name a new directory")
    result, clean = run(args.minutes, args.seed, args.kinds.split(","), args.keep)
    print_result(result)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
