"""Every `cases*` folder of the conformance cases, and the project's own (tests/cases-*), through
`quota-sidecar evaluate` (`make conformance`).

The cases' runner (CONFORMANCE/run.py) starts one `evaluate` per case. Each deciding in a Spark of its own
spent most of its time starting that Spark; here they share one local Spark Connect server
(harness.spark.connect_server: `--set spark.url=...`), started once for all the folders: the same rules, the same
evaluate, a fraction of the time.

    python tests/conformance.py CONFORMANCE_DIR
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness, as pytest's rootdir conftest puts it

from harness.spark.connect_server import ConnectServer  # noqa: E402
from harness.agents.conformance_cases import case_folders  # noqa: E402
from harness.agents.sidecar_process import EXECUTABLE  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {Path(__file__).name} CONFORMANCE_DIR (the folder with run.py and cases*/)", file=sys.stderr)
        return 2
    if not Path(argv[0], "run.py").is_file():
        print(f"no conformance cases at {argv[0]} (no run.py there): make conformance CONFORMANCE=<that folder>",
              file=sys.stderr)
        return 2
    folder = Path(argv[0])
    failed = 0
    with ConnectServer() as server:
        command = f"{shlex.quote(str(EXECUTABLE))} evaluate --set spark.url={server.url}"
        for cases in case_folders(folder):
            failed += subprocess.run([sys.executable, str(folder / "run.py"), str(cases), "--cmd", command]).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
