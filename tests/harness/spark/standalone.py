"""A Spark standalone cluster from the installed pyspark: Spark's own Master and Workers, started as Spark's
distribution starts them (`spark-class org.apache.spark.deploy.master.Master`, `...worker.Worker`), each a child
process on 127.0.0.1 that stops when this process does.

    with StandaloneSpark(work_dir, workers=2) as spark:
        Aggregator(servers, work_dir, **{"spark.url": spark.url})
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

from harness.cluster.ports import free_loopback_ports
from harness.spark.connect_server import WATCHDOG

HOST = "127.0.0.1"
START_TIMEOUT = 120.0  # s: the Master's JVM, then each Worker's registration


class StandaloneSparkError(RuntimeError):
    """The cluster did not come up; the message names the logs."""


class StandaloneSpark:
    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        """`cores` and `memory` each Worker offers: an executor takes spark.executor.memory (1g by default)."""
        self.work_dir = work_dir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port, *self._worker_ui_ports = free_loopback_ports(2 + workers)
        self._processes: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def start(self) -> StandaloneSpark:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(self.port),
                    "--webui-port", str(self.ui_port))
        try:
            self._wait(lambda state: state is not None, "the Master's web UI")
            for number, ui_port in enumerate(self._worker_ui_ports, 1):
                work = self.work_dir / f"worker-{number}"
                work.mkdir(exist_ok=True)
                self._start(f"worker-{number}", "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                            "--webui-port", str(ui_port), self.url)
            self._wait(lambda state: state is not None and len(alive(state)) == self.workers,
                       f"{self.workers} workers registered")
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict | None:
        """The Master's view (its web UI's /json/): workers, their cores used, the applications; None unanswered."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as answer:
                return json.load(answer)
        except OSError:
            return None

    def applications(self, name: str, finished: bool = False) -> list[dict]:
        """The running (or with `finished`, the finished) applications of that name, as the Master lists them."""
        state = self.state() or {}
        return [app for app in state.get("completedapps" if finished else "activeapps", []) if app.get("name") == name]

    def stop(self, timeout: float = 30.0) -> None:
        """Workers first (they kill their executors), then the Master; SIGKILL to what outlives `timeout`."""
        for name in sorted(self._processes, key=lambda name: name == "master"):
            process = self._processes.pop(name)
            process.stdin.close()  # the watchdog's cue: SIGTERM to the JVM
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def __enter__(self) -> StandaloneSpark:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _start(self, name: str, main_class: str, *arguments: str) -> None:
        spark_home = os.path.dirname(pyspark.__file__)  # this pyspark, whatever SPARK_HOME says
        environment = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": HOST}
        with open(self.work_dir / f"{name}.log", "ab") as log:
            self._processes[name] = subprocess.Popen(
                ["/bin/sh", "-c", WATCHDOG, "watchdog", os.path.join(spark_home, "bin", "spark-class"), main_class,
                 *arguments], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir,
                env=environment, start_new_session=True)

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready(self.state()):
            exited = [name for name, process in self._processes.items() if process.poll() is not None]
            if exited or time.monotonic() > deadline:
                why = f"{', '.join(exited)} exited" if exited else f"not within {START_TIMEOUT:.0f}s"
                raise StandaloneSparkError(f"Spark standalone: waiting for {what}: {why}; logs in {self.work_dir}")
            time.sleep(0.5)


def alive(state: dict) -> list[dict]:
    return [worker for worker in state.get("workers", []) if worker.get("state") == "ALIVE"]
