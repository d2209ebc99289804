"""The fault soak (issue 19): the lab of tests/harness/fault_soak.py for `--minutes`, the nemesis on the schedule of
`--seed` (the same seed, the same faults at the same times), then the report: faults injected by kind, each
invariant's checks and violations (with the faults before them), the time to converge after each kind of fault.
Exit code 1 when an invariant was violated, or the nemesis could not inject a fault.

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--seed 1] [--kinds kill-agent,pause-agent,...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import LoadWatch, Result, print_result, provenance, this_command

from harness.fault_soak import STEADY_RATE, FaultSoak, SoakSettings
from harness.invariants import report
from harness.nemesis import KINDS, schedule

TITLE = "Fault soak"


def run(minutes: float, seed: int, kinds: list[str]) -> tuple[Result, bool]:
    seconds = minutes * 60
    faults = schedule(seed, seconds, [1, 2, 3], kinds)
    print("\n".join(f"  {fault}" for fault in faults), flush=True)
    settings = SoakSettings()
    with LoadWatch() as load, tempfile.TemporaryDirectory(prefix="fault-soak-") as work:
        outcome = FaultSoak(Path(work), settings).run(faults, seconds)
    ledger, events = outcome["ledger"], outcome["events"]
    clean = not ledger.violations and not any(event.error for event in events) and not ledger.unchecked()
    markdown = "\n\n".join([
        f"{minutes:g} minutes, seed {seed}: {len(faults)} faults ({', '.join(kinds)}) on a 3-broker cluster "
        f"(KRaft combined mode, each broker in a network namespace of its own), an agent per broker and the aggregator; Kafka's ProducerPerformance flooding "
        f"broker 3's small filesystem in rounds and {STEADY_RATE} records a second (acks=all) onto a replicated "
        f"topic; check interval {settings.check_interval}, validity {settings.validity:.0f} s. "
        f"**{len(ledger.violations)} violations**.",
        report(ledger, events, outcome["convergence"]),
        provenance(this_command(), load)])
    return Result(TITLE, markdown), clean


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    result, clean = run(args.minutes, args.seed, args.kinds.split(","))
    print_result(result)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
