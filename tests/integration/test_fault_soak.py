"""The fault soak's short version (benchmarks/soak.py runs it for half an hour): a fixed seed, every kind
of fault once, and no invariant violated. Each invariant was checked, and the nemesis injected every fault."""

from __future__ import annotations

import pytest

from harness.faults.fault_soak import FaultSoak, SoakSettings
from harness.faults.invariants import report
from harness.faults.nemesis import KINDS, schedule

pytestmark = pytest.mark.integration
SEED = 19
SECONDS = 240.0  # faults in the first 190 s, then quiet; ~1.5 min more to start the lab and end it: 5 min at most


def test_every_fault_once_and_no_invariant_violated(tmp_path):
    settings = SoakSettings(check_interval="PT5S", validity=30.0)
    faults = schedule(SEED, SECONDS - settings.final_quiet(), [1, 2, 3], gap=(12.0, 16.0), hold=(6.0, 10.0))
    assert sorted({fault.kind for fault in faults}) == sorted(KINDS), faults  # the seed fits them all in

    outcome = FaultSoak(tmp_path, settings).run(faults, SECONDS)

    ledger, events = outcome["ledger"], outcome["events"]
    print(report(ledger, events, outcome["convergence"]))
    assert [event for event in events if event.error] == []
    assert ledger.unchecked() == []
    assert ledger.violations == []
