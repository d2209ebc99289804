"""A MinIO server on 127.0.0.1: the S3-compatible store the lab keeps a history on, through Hadoop's S3A
(`make build/tools/bin/minio` builds it from its Go module).

    with MinioServer(work_dir, buckets=("history",)) as store:
        Aggregator(servers, work_dir, environment=store.client_environment(conf_dir),
                   **{"history.location": "s3a://history/fleet"})
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from harness.cluster.ports import free_loopback_ports

HOST = "127.0.0.1"
SERVER = Path(__file__).resolve().parents[3] / "build" / "tools" / "bin" / "minio"
START_TIMEOUT = 60.0  # s
ACCESS_KEY = "lab-history"
SECRET_KEY = "lab-history-secret-7f3c"  # the lab's own; a test checks it reaches no log


class MinioError(RuntimeError):
    """The server did not come up; the message names its log."""


class MinioServer:
    def __init__(self, work_dir: Path, buckets: tuple[str, ...] = ("history",)):
        self.work_dir, self.buckets = work_dir, buckets
        self.port, self.console_port = free_loopback_ports(2)
        self.data = work_dir / "data"
        self._process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def spark_defaults(self) -> str:
        """spark-defaults.conf lines that point S3A at this server (no credentials: those come from the
        environment, as the AWS SDK's default chain reads them)."""
        return "".join(f"spark.hadoop.fs.s3a.{key} {value}\n" for key, value in (
            ("endpoint", self.endpoint), ("endpoint.region", "us-east-1"), ("path.style.access", "true"),
            ("connection.ssl.enabled", "false")))

    def client_environment(self, spark_conf_dir: Path, more_defaults: str = "") -> dict[str, str]:
        """The environment of a Spark process that uses this server: SPARK_CONF_DIR with spark_defaults() and
        ``more_defaults`` written there, the credentials as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."""
        spark_conf_dir.mkdir(parents=True, exist_ok=True)
        (spark_conf_dir / "spark-defaults.conf").write_text(self.spark_defaults() + more_defaults)
        return {"SPARK_CONF_DIR": str(spark_conf_dir), "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def objects(self, bucket: str, suffix: str = "") -> list[str]:
        """The keys of the bucket's objects ending in ``suffix``, from the server's drive: each object is a folder
        holding its xl.meta there."""
        root = self.data / bucket
        return sorted(str(meta.parent.relative_to(root)) for meta in root.rglob("xl.meta")
                      if str(meta.parent).endswith(suffix))

    def start(self) -> MinioServer:
        if not SERVER.exists():
            raise MinioError(f"no MinIO server at {SERVER}: run `make build/tools/bin/minio`")
        for bucket in self.buckets:  # a top-level folder of a fresh drive is a bucket
            (self.data / bucket).mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, "MINIO_ROOT_USER": ACCESS_KEY, "MINIO_ROOT_PASSWORD": SECRET_KEY,
                       "MINIO_BROWSER": "off", "MINIO_UPDATE": "off"}
        with open(self.work_dir / "minio.log", "ab") as log:
            self._process = subprocess.Popen(
                [str(SERVER), "server", str(self.data), "--address", f"{HOST}:{self.port}",
                 "--console-address", f"{HOST}:{self.console_port}"], stdout=log, stderr=subprocess.STDOUT,
                env=environment, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise MinioError(f"MinIO did not become ready within {START_TIMEOUT:.0f}s; its log: "
                                 f"{self.work_dir / 'minio.log'}")
            time.sleep(0.2)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> MinioServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/minio/health/ready", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False
