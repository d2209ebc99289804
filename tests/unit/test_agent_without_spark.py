"""The agent is pure Python: no module of quota_sidecar loads Spark, its client or what that brings, and the
commands that need Spark are listed by `quota-sidecar --help` without it (spark_jobs/commands.py)."""

import subprocess
import sys

from harness.agents.sidecar_process import EXECUTABLE

SPARK_PACKAGES = {"pyspark", "pandas", "pyarrow", "numpy", "py4j", "spark_jobs", "matplotlib"}


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{name.split('.')[0] for name in sys.modules}})))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_importing_every_agent_module_loads_no_spark():
    loaded = loaded_after("import importlib, pkgutil, quota_sidecar\n"
                          "for module in pkgutil.walk_packages(quota_sidecar.__path__, 'quota_sidecar.'):\n"
                          "    importlib.import_module(module.name)")
    assert "quota_sidecar" in loaded and "kafka" in loaded
    assert loaded & SPARK_PACKAGES == set()


def test_the_command_line_loads_no_spark_and_lists_the_spark_commands():
    assert loaded_after("import quota_sidecar.cli") & SPARK_PACKAGES == set()
    result = subprocess.run([str(EXECUTABLE), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert {"aggregate", "evaluate", "plan", "run", "status", "replication-overrides", "keys"} <= listed
