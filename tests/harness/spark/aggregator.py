"""`quota-sidecar aggregate` for the lab's agents: one Spark Structured Streaming query deciding for every agent
that publishes to its pipeline cluster, whichever cluster that agent watches."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.agents.sidecar_process import SidecarProcess
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.pipeline.transport import Pipeline

START_TIMEOUT = 240.0  # s: Spark's JVM, the query's start


class Aggregator:
    def __init__(self, pipeline_servers: str, work_dir: Path, name: str = "aggregator",
                 environment: dict[str, str] | None = None, **keys: object):
        """`keys`: configuration keys over the lab's (`**{"aggregator.checkpoint.location": ""}`: the default);
        `environment`: over this process's for the aggregator's (TMPDIR...)."""
        self.pipeline_servers = pipeline_servers
        work_dir.mkdir(parents=True, exist_ok=True)
        self.process = SidecarProcess(name, work_dir, {
            PREFIX + "pipeline.bootstrap.servers": pipeline_servers,
            PREFIX + "aggregator.checkpoint.location": work_dir / f"{name}-checkpoint",
            **{PREFIX + key: value for key, value in keys.items()}}, command="aggregate", environment=environment)

    @property
    def agent_properties(self) -> dict[str, str]:
        """What an agent's properties need to be decided for by this aggregator."""
        return {PREFIX + "pipeline.bootstrap.servers": self.pipeline_servers}

    @property
    def name(self) -> str:
        """How the agents' status names it (`decided_by.aggregator`): host/pid of the running process."""
        return f"{os.uname().nodename}/{self.process.process.pid}"

    def start(self) -> Aggregator:
        self._started = time.monotonic()
        self.process.start()
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> Aggregator:
        """Until this start's query decides (its log is appended across restarts)."""
        self.process.wait_for_line("deciding for the agents of", timeout, after=self._started)
        return self

    def stop(self, sig=None) -> int | None:
        return self.process.stop() if sig is None else self.process.stop(sig)

    def warm_up(self, timeout: float = 180.0) -> Aggregator:
        """One question of volumes answered, as the first agent's would be: a rule's first micro-batch with
        rows plans and compiles its code (seconds, tens on a loaded 2-core machine; a real fleet's aggregator
        pays it once too), which a test's short poll deadline must not meet."""
        asker = Pipeline({"bootstrap_servers": self.pipeline_servers}, lambda: "lab-warm-up", None, timeout)
        volume = {"broker_id": 1, "log_dir": "/warm-up", "total_bytes": 1 << 30, "usable": True}
        rows = [{**volume, "available_bytes": (512 << 20) - second * (1 << 20), "at_seconds": float(second)}
                for second in range(-4, 1)]
        try:
            factor, judged = asker.judge_volumes(rows, {"min_available_bytes": 1})
        finally:
            asker.close()
        assert factor == 1.0 and len(judged) == 1, (factor, judged)
        return self

    def __enter__(self) -> Aggregator:
        self.start()
        try:
            return self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def report_section(self) -> tuple[str, str]:
        return self.process.report_section()
