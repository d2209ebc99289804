"""What the disk-protection benchmarks share: statistics, machine facts, the load watch, a flooding
producer, a disk sampler, `quota-sidecar run` as a subprocess and the aggregator deciding for it, and the
writer of docs/benchmarks.md.

Every benchmark module has `run() -> Result` (its figures as Markdown, for run_all.py) and a `main()`
that prints them, so it can also be run alone: `.venv/bin/python benchmarks/<name>.py`. The modules
import each other by plain name: Python puts the script's directory, benchmarks/, on the path.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before anything imports pyspark
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the lab (tests/harness) is not installed with the sidecar

import psutil  # noqa: E402
from kafka import KafkaAdminClient  # noqa: E402

from harness.spark.aggregator import Aggregator  # noqa: E402
from harness.clients.flood import Flood  # noqa: E402
from harness.periodic import Periodic  # noqa: E402
from harness.cluster.local_cluster import DEFAULT_CLASSPATH_FILE, LocalKafkaCluster  # noqa: E402
from harness.agents.sidecar_process import SidecarProcess  # noqa: E402
from quota_sidecar.configuration.properties import PREFIX  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
DOC = REPO / "docs" / "benchmarks.md"
SECTION = "## Disk protection"


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Stats:
    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values) -> Stats | None:
        values = list(values)
        return cls(statistics.median(values), min(values), max(values), len(values)) if values else None

    def text(self, unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
        """'1.23 s (0.98–1.50, n=5)'; with one value only '1.23 s (n=1)'."""
        median, low, high = (f"{value / scale:,.{digits}f}" for value in (self.median, self.low, self.high))
        suffix = f" {unit}" if unit else ""
        if self.n == 1:
            return f"{median}{suffix} (n=1)"
        return f"{median}{suffix} ({low}–{high}, n={self.n})"


def cell(stats: Stats | None, unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
    return "–" if stats is None else stats.text(unit, scale, digits)


@dataclass
class Result:
    """One benchmark's figures: a Markdown subsection of "## Disk protection", and the same printed."""
    title: str
    markdown: str


def table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- the machine and its load


def uptime() -> str:
    """`uptime`'s load averages: '1-min 5-min 15-min'."""
    return "%.2f %.2f %.2f" % os.getloadavg()


class LoadWatch(Periodic):
    """Samples the 1-minute load average every few seconds while a benchmark runs.

    The machine is shared: other people's tests run at the same time, so every figure goes out with the
    load it was measured under.
    """

    def __init__(self, every: float = 5.0):
        super().__init__(every)
        self.samples: list[float] = []
        self.started_at = self.ended_at = ""

    def __enter__(self) -> LoadWatch:
        self.started_at = uptime()
        return super().__enter__()

    def __exit__(self, *exc_info) -> None:
        super().__exit__(*exc_info)
        self.ended_at = uptime()

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def text(self) -> str:
        samples = self.samples or [os.getloadavg()[0]]
        return (f"1-min load average {min(samples):.1f}–{max(samples):.1f} during the run "
                f"(uptime at start: {self.started_at}; at end: {self.ended_at or uptime()})")


def kafka_version() -> str:
    match = re.search(r"kafka_[\d.]+-([\w.]+)\.jar", Path(DEFAULT_CLASSPATH_FILE).read_text())
    return match.group(1) if match else "unknown"


def machine_facts() -> str:
    import kafka
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return (f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / (1 << 30):.0f} GiB; "
            f"Kafka {kafka_version()} (local KRaft cluster, brokers with the C1 compiler and a 384 MiB heap "
            f"unless said otherwise), pyspark {pyspark.__version__}, kafka-python {kafka.__version__}, "
            f"Python {platform.python_version()}, {java}")


def code_version() -> str:
    """The commit measured, and whether the sidecar's code differed from it."""
    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "quota_sidecar", "spark_jobs")
    commit = git("rev-parse", "--short", "HEAD")
    return f"commit {commit}" + (" with uncommitted changes to the sidecar" if dirty else "")


def provenance(command: str, load: LoadWatch) -> str:
    """The paragraph under every figure: when, by which command, on what, under which load."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"Measured {now} by `{command}` on {code_version()}. {machine_facts()}. {load.text()}."


def this_command() -> str:
    """The command line that started this process, as one would type it in the repository."""
    script = os.path.relpath(sys.argv[0], REPO) if sys.argv[0] else "python"
    return shlex.join([".venv/bin/python", script, *sys.argv[1:]])


def cpu_seconds(pids: list[int]) -> float:
    """CPU of the processes and their descendants; one that ended meanwhile (a Spark Python worker) counts in
    its parent's children times once reaped."""
    total = 0.0
    for pid in pids:
        root = psutil.Process(pid)
        for process in (root, *root.children(recursive=True)):
            try:
                total += sum(process.cpu_times()[:4])  # user, system, and of its reaped children
            except psutil.NoSuchProcess:
                pass
    return total


# ---------------------------------------------------------------- Kafka helpers


def raise_file_limit() -> None:
    """Brokers inherit this process's limit; thousands of partitions need thousands of open files."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def create_topics(bootstrap: str, topics: dict[str, dict], timeout_ms: int = 120_000) -> None:
    """{name: {"num_partitions"/"replication_factor"/"assignments"/"configs": ...}} (kafka-python's form)."""
    with KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms) as admin:
        admin.create_topics(topics, timeout_ms=timeout_ms)


def delete_topics(bootstrap: str, names: list[str]) -> None:
    with KafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        admin.delete_topics(names, timeout_ms=30_000)


def flood_producer(bootstrap: str, topic: str) -> Flood:
    """16 KiB records in requests of up to 64 KiB, at most 64 of them waiting (harness.clients.flood)."""
    return Flood({"bootstrap_servers": bootstrap}, topic, record_bytes=16 * KiB, max_unacked=64,
                 batch_size=64 * KiB, linger_ms=5)


def per_master(script: str, masters: list[str], *arguments: str) -> dict[str, dict[int, dict]]:
    """`script --child MASTER arguments` in a fresh process per Spark master (a session each, as a new aggregator
    or report starts one); its last line of output: JSON of {size: figures}. One line and exit when one fails."""
    results = {}
    for master in masters:
        done = subprocess.run([sys.executable, script, "--child", master, *arguments], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{master}: {done.stderr.strip().splitlines()[-1:]}")
        results[master] = {int(size): figures for size, figures in json.loads(done.stdout.splitlines()[-1]).items()}
    return results


def connect_server():
    """A local Spark Connect server (harness.spark.connect_server) to use in a with block; it starts on entry and
    its work dir goes when it stops."""
    from harness.spark.connect_server import ConnectServer

    return ConnectServer()


@contextlib.contextmanager
def aggregator_running():
    """One `quota-sidecar aggregate` (harness.spark.aggregator) for a with block, warmed up with one question, its
    pipeline on a 1-broker cluster of its own. Like the integration tests' session aggregator it decides for
    the agents of any cluster (given `**aggregator.agent_properties`), and nothing of it sits on a volume a
    benchmark fills or a broker it stops. Its work dir goes when it stops."""
    with tempfile.TemporaryDirectory(prefix="bench-aggregator-") as work_dir, \
            LocalKafkaCluster(brokers=1) as pipeline_cluster, \
            Aggregator(pipeline_cluster.bootstrap_servers, Path(work_dir)) as aggregator:
        yield aggregator.warm_up()


# ---------------------------------------------------------------- `quota-sidecar run` as a subprocess


def sidecar_properties(bootstrap: str, **keys) -> dict[str, str]:
    """Sidecar properties: `keys` are client.quota.callback.static. keys without the prefix, dots as given."""
    return {PREFIX + "kafka.admin.bootstrap.servers": bootstrap,
            **{PREFIX + key: str(value) for key, value in keys.items()}}


@contextlib.contextmanager
def sidecar_running(properties: dict[str, str], work_dir: Path, name: str = "sidecar"):
    """`quota-sidecar run` (harness.agents.sidecar_process) for a with block; its warnings and errors shown after."""
    sidecar = SidecarProcess(name, work_dir, properties)
    try:
        yield sidecar.start()
    finally:
        sidecar.stop(timeout=60)
        if problems := sidecar.problems():  # shown, not judged: a benchmark's figures stand on their own
            print(f"  {name} logged {len(problems)} warning(s)/error(s), the first ones:",
                  *problems[:5], sep="\n    ", flush=True)


class PassWatch(Periodic):
    """Scrapes a running sidecar's /metrics every `every` seconds: the wall time of each pass it made."""

    def __init__(self, sidecar: SidecarProcess, every: float = 0.2):
        super().__init__(every)
        self.sidecar = sidecar
        self.durations: dict[int, float] = {}  # pass number -> its wall time

    def sample(self) -> None:
        with contextlib.suppress(OSError):
            metrics = self.sidecar.metrics()
            passes = int(metrics["quota_sidecar_polls_total"])
            self.durations[passes] = metrics["quota_sidecar_poll_duration_seconds"]


# ---------------------------------------------------------------- docs/benchmarks.md


DOC_HEADER = """# Benchmarks

`make bench` runs `benchmarks/run_all.py`, which rewrites only its own sections of this file; other
sections are kept as they are.
"""


def write_section(body: str, heading: str = SECTION, path: Path = DOC) -> None:
    """Replace `heading`'s section (up to the next "## " heading) in `path` with `body`, or append it.

    Read, replace, write: sections that others write into the same file stay as they are.
    """
    text = path.read_text() if path.exists() else DOC_HEADER
    section = f"{heading}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^{re.escape(heading)}[ \t]*\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)


def print_result(result: Result) -> None:
    print(f"\n### {result.title}\n\n{result.markdown}\n", flush=True)


def lab_main(name: str, args, run, render) -> int:
    """The end of a rate-limited-lab benchmark's main: 2 with one line when this machine has no lab (not
    root, no network namespaces), else its result as JSON (--json) or as text."""
    import json

    from harness.network.netns import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"{name}: skipped: needs rate-limited network namespaces: {reason}", file=sys.stderr)
        return 2
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
