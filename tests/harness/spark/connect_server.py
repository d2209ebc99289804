"""A local Spark Connect server from the installed pyspark, for tests, the demo and benchmarks.

pyspark 4.1 ships the server in ``pyspark/jars/spark-connect_*.jar``; ``spark-submit --class`` runs it
as a child process (not a daemon), bound to a free port on 127.0.0.1. Everything it writes (its log,
the JVM's temp files) stays in ``work_dir``, removed when it stops; kept, for its log, when it failed
to start.

    with ConnectServer() as server:
        spark = get_session(server.url)
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pyspark

from spark_jobs.session import connect_session

_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_HOST = "127.0.0.1"

# A shell between us and spark-submit (which execs into the JVM) stops the JVM when its stdin, a pipe
# from this process, closes: on stop(), and also when this process dies without running stop().
# (sh gives background jobs /dev/null as stdin, hence the pipe kept on fd 3.)
WATCHDOG = 'exec 3<&0; "$@" </dev/null 3<&- & jvm=$!; (read -r _; kill -TERM "$jvm") <&3 & wait "$jvm"'


class ConnectServerError(RuntimeError):
    """The local Spark Connect server did not start; the message names its log file."""


class ConnectServer:
    def __init__(self, master: str = "local[1]", driver_memory: str = "512m", start_timeout: float = 120.0):
        self.master = master
        self.driver_memory = driver_memory
        self.start_timeout = start_timeout
        self.port = _free_loopback_port()
        self.work_dir = tempfile.mkdtemp(prefix="quota-sidecar-connect-")
        self.log_path = os.path.join(self.work_dir, "connect-server.log")
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The watchdog shell while the server runs; the JVM is its child."""
        return self._process.pid if self._process else None

    def start(self) -> "ConnectServer":
        spark_home = os.path.dirname(pyspark.__file__)  # this pyspark, whatever SPARK_HOME says
        command = [
            os.path.join(spark_home, "bin", "spark-submit"),
            "--master", self.master,
            "--driver-memory", self.driver_memory,
            # Spark Connect leaves a dir per session in <java.io.tmpdir>/spark_connect_model_cache.
            "--driver-java-options", f"-Djava.io.tmpdir={self.work_dir}",
            "--name", "quota-sidecar Spark Connect",
            "--class", _SERVER_CLASS,
            "--conf", f"spark.connect.grpc.binding.address={_HOST}",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.catalogImplementation=in-memory",
            "--conf", f"spark.sql.warehouse.dir={os.path.join(self.work_dir, 'warehouse')}",
        ]  # fmt: skip
        env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": _HOST}
        with open(self.log_path, "ab") as log:
            # Its own process group: a Ctrl-C meant for us does not reach it, and stop() can kill the lot.
            self._process = subprocess.Popen(
                ["/bin/sh", "-c", WATCHDOG, "watchdog", *command], stdin=subprocess.PIPE, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.work_dir, env=env, start_new_session=True,
            )  # fmt: skip
        atexit.register(self.stop)  # no server left behind when a caller forgets to stop it
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(keep_work_dir=True)  # the error names the log in it
            raise
        return self

    def stop(self, timeout: float = 30.0, keep_work_dir: bool = False) -> None:
        """SIGTERM to the JVM (Spark stops its context), SIGKILL after ``timeout`` seconds; then the work
        dir goes."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None:
            process.stdin.close()  # the watchdog's cue
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if not keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "ConnectServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not _accepts_connections(self.port):
            if self._process.poll() is not None:
                raise ConnectServerError(
                    f"Spark Connect server exited with {self._process.returncode}; see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise ConnectServerError(
                    f"Spark Connect server not listening on {self.url} after {self.start_timeout}s; "
                    f"see {self.log_path}"
                )
            time.sleep(0.2)
        try:
            connect_session(self.url).stop()
        except Exception as exc:
            raise ConnectServerError(
                f"Spark Connect server on {self.url} accepts connections but no session ({exc}); see {self.log_path}"
            ) from exc


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((_HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind((_HOST, 0))
        return probe.getsockname()[1]
