"""The decision cases' folders: the conformance cases' (CONFORMANCE/cases*) and the project's own beside them
(tests/cases-*, in the same format, run by the same run.py)."""

from __future__ import annotations

from pathlib import Path

PROJECT_CASES = Path(__file__).resolve().parents[2]


def case_folders(conformance: Path) -> list[Path]:
    return sorted(p for p in conformance.glob("cases*") if p.is_dir()) + \
        sorted(p for p in PROJECT_CASES.glob("cases-*") if p.is_dir())
