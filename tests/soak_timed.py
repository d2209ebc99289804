"""Runs the integration tests that assert a rate, a size at a moment or a latency N times, optionally beside a
CPU load, and prints each test's pass count (`make soak-tests`; RUNS=5 LOAD=2 by default there).

A test that passes alone but not beside two busy processes measures the machine, not Kafka: on a shared CI
runner that is a submission that does not land. Each run is one pytest session over the listed tests (the
clusters and sidecars they share start once a run), its results read from pytest's JUnit XML.

    python tests/soak_timed.py --runs 5 --load 2 [-k EXPR] [--list]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every test whose assertion is a rate, a size at a moment or a time (tests/integration).
TIMED_TESTS = (
    "tests/integration/replication_throttles/test_overrides.py::"
    "test_a_broker_override_throttles_the_catch_up_of_a_restarted_broker",
    "tests/integration/replication_throttles/test_disk_guard.py",
    "tests/integration/test_soft_zone.py",
    "tests/integration/test_local_verdict.py",
    "tests/integration/test_java_producer_flood.py",
    "tests/integration/test_tenant_quotas.py",
    "tests/integration/test_failing_well.py",
    "tests/integration/test_plan.py",
    "tests/integration/test_network_throttle.py",
    "tests/integration/test_move_progress.py",
)


def busy() -> None:
    while True:
        pass


def results(junit: Path) -> dict[str, str]:
    """Test id -> passed, failed or skipped, with the first line of a failure's message."""
    outcome = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            message = (failure.get("message") or "").strip()
            outcome[name] = f"failed: {message.splitlines()[0][:200]}" if message else "failed"
        elif case.find("skipped") is not None:
            outcome[name] = "skipped"
        else:
            outcome[name] = "passed"
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the tests (0: none)")
    parser.add_argument("-k", dest="keyword", help="pytest -k: only the matching tests")
    parser.add_argument("--list", action="store_true", help="print the tests and exit")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "soak-tests")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(TIMED_TESTS))
        return 0
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")

    args.out.mkdir(parents=True, exist_ok=True)
    load = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for process in load:
        process.start()
    per_test: dict[str, list[str]] = {}
    started = time.monotonic()
    try:
        for run in range(1, args.runs + 1):
            junit = args.out / f"run-{run}.xml"
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
                       "-o", "junit_logging=system-out",  # a passing test's printed figures kept too
                       *(["-k", args.keyword] if args.keyword else []), *TIMED_TESTS]
            run_started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            outcome = results(junit) if junit.exists() else {}
            for name, result in outcome.items():
                per_test.setdefault(name, []).append(result)
            counts = Counter(result.split(":")[0] for result in outcome.values())
            print(f"run {run}/{args.runs}: {dict(counts)} in {time.monotonic() - run_started:.0f} s "
                  f"(pytest exit {done.returncode}, load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        for process in load:
            process.terminate()

    print(f"\n{args.runs} runs beside {args.load} busy processes, {(time.monotonic() - started) / 60:.0f} min\n")
    print("| test | passed |\n|---|---|")
    for name, outcomes in sorted(per_test.items()):
        print(f"| `{name.removeprefix('tests.integration.')}` | {outcomes.count('passed')}/{len(outcomes)} |")
    failures = [(name, result) for name, outcomes in sorted(per_test.items()) for result in outcomes
                if result.startswith("failed")]
    for name, result in failures:
        print(f"- {name}: {result}")
    # A skip is no pass: a target whose tests skip proves nothing.
    return 0 if per_test and all(result == "passed" for outcomes in per_test.values() for result in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
