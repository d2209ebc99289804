"""The Spark session behind the decisions: built or connected once per URL, then reused for every poll.

- no URL: one embedded local Spark in this process (first query takes seconds, warm ones a fraction of one);
- ``sc://host:port``: a session on a shared Spark Connect server;
- anything else (``spark://...``, ``local[2]``...): a master URL for an in-process driver.

An in-process driver's JVM logs through spark_jobs/log4j2.properties: errors only, so that its chatter stays
out of the sidecar's log. Failures are told in one line (``reason``).
"""
import os
import re
import signal
import subprocess
import tempfile
import threading

from pyspark.sql import SparkSession

EMBEDDED = "embedded local[1]"  # how messages name the session of no URL
LOG4J2_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
_LOG4J2_OPTION = f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}"  # in every driver's JVM options
# Where an in-process driver's JVM writes its console output (stdout and stderr).
CONSOLE_LOG = os.path.join(tempfile.gettempdir(), f"quota-sidecar-spark-{os.getpid()}.log")

# Each poll aggregates a few dozen rows: one shuffle partition is plenty and far faster than 200, and
# adaptive execution would only run the shuffle as a job of its own (two jobs per poll instead of one).
# For the same reason no broadcast joins: each broadcast is a job of its own, and a join of a few rows
# is cheaper in the same job.
_SMALL_DATA_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                    "spark.sql.autoBroadcastJoinThreshold": "-1"}

# A batch job over much data (the capacity report's history: up to 10^8 rows) needs the opposite: its shuffles
# spread over the cores, merged by adaptive execution, and the small side of a join broadcast.
_LARGE_DATA_CONF = {"spark.sql.shuffle.partitions": "16", "spark.sql.adaptive.enabled": "true",
                    "spark.sql.autoBroadcastJoinThreshold": str(10 << 20)}

# An embedded driver's heap, and the aggregator's by default (aggregator.driver.memory): about the least Spark takes.
MIN_DRIVER_MEMORY = "512m"

# The driver runs small queries now and then: the C2 compiler's work never pays for itself, and under a flood it
# takes the cores the decision needs.
_DRIVER_CONF = {"spark.driver.extraJavaOptions": f"{_LOG4J2_OPTION} -XX:TieredStopAtLevel=1"}

# `quota-sidecar report` is one batch job over up to 10^8 history rows that a person waits for: it pays the C2
# compiler back many times over (docs/benchmarks.md, Capacity report at scale), on every core.
_BATCH_CONF = {"spark.driver.extraJavaOptions": _LOG4J2_OPTION,
               "spark.driver.memory": "1g"}

# The aggregator parses every observation of a micro-batch (10^6 volumes of 2,000 clusters: 150 MB of JSON): its filter
# on the parsed fields would otherwise be pushed below the parse as one more parse per field. Its driver runs the C2
# compiler, as the report's does, for large micro-batches and for the latency of small ones, with the native memory
# C2's compilations leave behind given back to the system every 5 s: without that the aggregator's RSS grows for as
# long as it runs (docs/benchmarks.md, Aggregator micro-batch at scale). A JVM older than 17.0.9 lacks the flag and
# ignores it rather than fail to start.
#
# Its decisions' query starts a micro-batch as soon as the last one ended ("0 seconds"), and between observations
# Spark asks the pipeline's brokers for the topic's end offsets every pollingDelay (10 ms by default): most of the
# aggregator's CPU at rest, and as many ListOffsets requests at the brokers. A tenth as often costs no latency.
AGGREGATOR_POLLING_DELAY = "100ms"
# What Spark's status store keeps of past runs, UI or not (spark.ui.* and spark.sql.ui.*).
STATUS_STORE_LIMITS = ("spark.ui.retainedJobs", "spark.ui.retainedStages", "spark.ui.retainedTasks",
                       "spark.sql.ui.retainedExecutions")
AGGREGATOR_CONF = {"spark.sql.optimizer.enableJsonExpressionOptimization": "false",
                   "spark.sql.streaming.pollingDelay": AGGREGATOR_POLLING_DELAY,
                   "spark.driver.extraJavaOptions": f"{_LOG4J2_OPTION} -XX:+UnlockExperimentalVMOptions "
                   "-XX:+IgnoreUnrecognizedVMOptions -XX:TrimNativeHeapInterval=5000",
                   # Spark's status store keeps 1,000 jobs, stages and SQL executions and 100,000 tasks in the
                   # driver, UI or not: micro-batches fill it over days and the heap in use grows with it. The
                   # aggregator reads none of it.
                   **dict.fromkeys(STATUS_STORE_LIMITS, "100")}
# glibc's malloc gives each thread that allocates an arena of its own (up to 8 per core), which the trim above
# cannot shrink below what each holds; two bound them. Set before the driver's JVM starts, which inherits it.
AGGREGATOR_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2"}
# The aggregator's driver at the default heap (aggregator.driver.memory), for a fleet of up to ~30 brokers
# (docs/benchmarks.md, Memory): the serial collector, which has none of G1's ~45 MiB of remembered sets and gives back
# the heap it does not use, and C2's code in 64 MiB. A larger heap is for a larger fleet: the JVM's own collector
# (G1 on two cores or more) and code cache.
_SMALL_DRIVER_OPTIONS = ("-XX:+UseSerialGC -Xms32m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 "
                         "-XX:ReservedCodeCacheSize=64m")

_EMBEDDED_CONF = {
    **_SMALL_DATA_CONF,
    **_DRIVER_CONF,
    "spark.driver.memory": MIN_DRIVER_MEMORY,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.catalogImplementation": "in-memory",  # no Hive, no metastore_db/ in the cwd
    "spark.sql.debug.maxToStringFields": "100",  # the replication rows are wider than the warning's 25
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}

# The Connect client retries an unreachable server for ten minutes by default. A poll must fail within
# seconds instead (the loop counts it and the factor timeline takes over), and so must start-up and exit.
_CONNECT_RETRIES = 4  # backoffs of 0.05, 0.2, 0.8 and 3.2 s

_sessions: dict[str, SparkSession] = {}
_lock = threading.Lock()


class SparkStartError(RuntimeError):
    """No Spark session could be started or connected for the configured URL."""


def get_session(spark_url: str | None = None, app_name: str = "quota-sidecar",
                settings: dict[str, str] | None = None, batch: bool = False) -> SparkSession:
    """The session for ``spark_url``, built on the first call and cached for the life of the process.

    ``app_name`` names the Spark application this process starts; a Connect session joins the server's.
    ``settings`` go to a driver this process starts (e.g. spark.jars), not to a Connect server's. ``batch``: a
    driver this process starts runs one large job (`report`): the embedded one on every core, both with C2.
    """
    url = spark_url or ""
    with _lock:
        if url not in _sessions:
            _sessions[url] = _start(url, app_name, {**(_BATCH_CONF if batch else {}), **(settings or {})}, batch)
        return _sessions[url]


def aggregator_session(spark_url: str | None, app_name: str, driver_memory: str = MIN_DRIVER_MEMORY,
                       settings: dict[str, str] | None = None) -> SparkSession:
    """The aggregator's session (`quota-sidecar aggregate`, and the benchmarks that time it): its settings for a
    driver this process starts (`aggregator_settings`) in AGGREGATOR_ENVIRONMENT, one shuffle partition per core."""
    for name, value in AGGREGATOR_ENVIRONMENT.items():
        os.environ.setdefault(name, value)  # an operator's own setting wins
    spark = get_session(spark_url, app_name, aggregator_settings(driver_memory, settings or {}))
    spread_over_cores(spark)
    return spark


def aggregator_settings(driver_memory: str, settings: dict[str, str]) -> dict[str, str]:
    """AGGREGATOR_CONF and `settings`, a heap of `driver_memory`; the small driver's options at the least heap."""
    merged = {**AGGREGATOR_CONF, **settings, "spark.driver.memory": driver_memory}
    if driver_memory == MIN_DRIVER_MEMORY:
        merged["spark.driver.extraJavaOptions"] += f" {_SMALL_DRIVER_OPTIONS}"
    return merged


def for_large_data(spark: SparkSession) -> SparkSession:
    """A session of its own over the same Spark, set for a batch job over much data; the aggregator's queries keep
    theirs. Made once and kept by its user (each holds its own state in the driver for as long as the process runs).
    Spark Connect's client cannot make one: there the session as it is (its jobs slower, not wrong)."""
    try:
        large = spark.newSession()
    except Exception:  # Spark Connect
        return spark
    for key, value in _LARGE_DATA_CONF.items():
        large.conf.set(key, value)
    return large


def spread_over_cores(spark: SparkSession) -> None:
    """One shuffle partition per core of a driver in this process (the aggregator's micro-batches, whose
    observations are independent); a Spark Connect server's session keeps its own setting."""
    try:
        cores = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect: no SparkContext in this process
        return
    spark.conf.set("spark.sql.shuffle.partitions", str(cores))


def is_connect(spark_url: str | None) -> bool:
    """True for a Spark Connect URL: a shared server, not a driver in this process."""
    return (spark_url or "").startswith("sc://")


def reason(error: BaseException) -> str:
    """A Spark failure in one line: its error class (or type) and the first line of its message (of a gRPC
    error, its status and details; of a Java error through py4j, the Java one's: their first lines say nothing)."""
    text = str(error)
    grpc = re.search(r'status = StatusCode\.(\w+)\s+details = "([^"]*)"', text)
    if grpc:
        return f"{grpc.group(1)}: {grpc.group(2)}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = _python_exception(lines)
    if raised:  # a foreachBatch function's: its own exception says what went wrong, the wrapper does not
        return raised
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling "):  # py4j's: the Java error follows
        return lines[1].lstrip(": ")
    first = lines[0] if lines else ""
    if first.startswith("["):  # pyspark's messages start with their error class already
        return first
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _python_exception(lines: list[str]) -> str | None:
    """What a Python traceback that Spark wrapped says: the root cause of a Java error in it (its last
    "Caused by:"), else its last "Name: message" line."""
    start = next((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), None)
    if start is None:
        return None
    causes = [line[len("Caused by: "):] for line in lines[start + 1:] if line.startswith("Caused by: ")]
    raised = [line for line in lines[start + 1:] if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    return causes[-1] if causes else raised[-1] if raised else None


def discard(spark_url: str | None) -> None:
    """Forget the cached session of ``spark_url`` (e.g. its Connect server restarted): the next
    get_session connects anew. An embedded session is kept: it does not go away by itself."""
    url = spark_url or ""
    if url:
        with _lock:
            _sessions.pop(url, None)


def stop_sessions() -> None:
    """Stop every cached session; the next get_session builds a new one."""
    with _lock:
        for session in _sessions.values():
            session.stop()
        _sessions.clear()


def connect_session(url: str) -> SparkSession:
    """A new, uncached session on the Spark Connect server at ``url``, checked to answer."""
    # The Connect builder, not the classic one: the classic builder refuses while an embedded Spark
    # runs in this process, and switches every later pyspark.sql call of the process to Connect mode.
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSparkSession

    # No builder options: create() would send them before our retry policy is in place.
    session = ConnectSparkSession.builder.remote(url).create()
    session.client.set_retry_policies([DefaultPolicy(max_retries=_CONNECT_RETRIES)])
    try:
        for key, value in _SMALL_DATA_CONF.items():
            session.conf.set(key, value)  # also the first call to the server: fails if none answers
    except BaseException:
        session.client.close()  # else the client's exit hook calls the absent server once more
        raise
    return session


def _start(url: str, app_name: str, settings: dict[str, str], batch: bool) -> SparkSession:
    try:
        if url.startswith("sc://"):
            return connect_session(url)
        _refuse_second_driver(url)
        if not url:
            return _embedded_session(app_name, settings, "local[*]" if batch else "local[1]")
        return _master_session(url, app_name, settings)
    except Exception as exc:
        raise SparkStartError(f"cannot start a Spark session for {url or EMBEDDED}: {reason(exc)}") from exc


def _embedded_session(app_name: str, settings: dict[str, str], master: str) -> SparkSession:
    # Spark creates the warehouse directory only when a table is written; keep it out of the cwd anyway.
    warehouse = os.path.join(tempfile.gettempdir(), f"quota-sidecar-warehouse-{os.getpid()}")
    session = _driver_session(master, app_name, {**_EMBEDDED_CONF, "spark.sql.warehouse.dir": warehouse,
                                                                **settings})
    session.sparkContext.setLogLevel("ERROR")
    return session


def _master_session(url: str, app_name: str, settings: dict[str, str]) -> SparkSession:
    return _driver_session(url, app_name, {**_SMALL_DATA_CONF, **_DRIVER_CONF, **settings})


def _driver_session(master: str, app_name: str, settings: dict) -> SparkSession:
    """A session on a driver in this process. Its JVM's console goes to CONSOLE_LOG, not to the sidecar's
    stderr: errors only (log4j2.properties), and what a JVM that cannot start says, for the one-line reason."""
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    if SparkContext._gateway is not None:  # a JVM from an earlier, stopped session of this process
        return SparkSession(SparkContext.getOrCreate(conf))
    with open(CONSOLE_LOG, "ab") as console:
        start = console.tell()
        try:
            gateway = _launch_gateway_deaf_to_sigterm(conf, {"stdout": console, "stderr": subprocess.STDOUT})
        except Exception as error:
            said = _first_line(CONSOLE_LOG, start)
            raise RuntimeError(f"{reason(error)}{f' It said: {said}' if said else ''} (the JVM's output: {CONSOLE_LOG})") \
                from error
    return SparkSession(SparkContext(conf=conf, gateway=gateway))


def _launch_gateway_deaf_to_sigterm(conf, popen_kwargs: dict):
    """pyspark's JVM, started with SIGTERM ignored (a JVM keeps a signal ignored at its start): a stop of the
    process group or of systemd's cgroup then stops this process, which stops its queries and Spark in order,
    not Spark's shutdown hook under them. The JVM exits with this process (its stdin closes). pyspark sets a
    preexec_fn of its own, so its Popen is wrapped for the launch."""
    from pyspark import java_gateway

    popen = java_gateway.Popen

    def popen_ignoring_sigterm(command, preexec_fn=None, **kwargs):
        def preexec():
            if preexec_fn is not None:
                preexec_fn()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return popen(command, preexec_fn=preexec, **kwargs)

    java_gateway.Popen = popen_ignoring_sigterm
    try:
        return java_gateway.launch_gateway(conf, popen_kwargs=popen_kwargs)
    finally:
        java_gateway.Popen = popen


def _first_line(path: str, offset: int) -> str:
    with open(path, "rb") as output:
        output.seek(offset)
        lines = [line.strip() for line in output.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[0] if lines else ""


def _refuse_second_driver(url: str) -> None:
    # One process holds one SparkContext, and getOrCreate would silently hand back the one running.
    running = [other for other in _sessions if not other.startswith("sc://")]
    if running:
        raise RuntimeError(f"this process already runs Spark for {running[0] or EMBEDDED}, and can run only one")
