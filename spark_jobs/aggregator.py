"""The aggregator's process: its streaming queries started on one Spark session, started again when they stop,
and stopped.

The decisions' query (``aggregation.start``) and, with ``history.enabled``, the history's
(``aggregation.start_history``) share the pipeline's topics, the checkpoint claimed for this pipeline and the
offsets a first start reads from. What cannot start is a ``CannotAggregate``: the one line the command ends
with, and whether the pipeline cluster was out of reach.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
import threading
import time

import isodate

from quota_sidecar.common.errors import AdminError, AuthorizationRefused
from quota_sidecar.common.refusals import REFUSALS
from quota_sidecar.configuration import config as configuration
from quota_sidecar.configuration.properties import SIDECAR_CLIENT_ID
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.pipeline.topics import ensure_topics
from quota_sidecar.pipeline.transport import end_offsets
from spark_jobs import aggregation, capacity_metrics, checkpoint as checkpoints, history, session

RESTART_AFTER = 5.0  # s: between a failed micro-batch and the query's new start
HISTORY_RETRY_EVERY = 60.0  # s: a failing history is tried again this often; the decisions go on without it
_log = logging.getLogger("quota_sidecar")


class CannotAggregate(Exception):
    def __init__(self, line: str, unreachable: bool = False):
        super().__init__(line)
        self.line, self.unreachable = line, unreachable


class Aggregator:
    """``serve_forecast`` (before any JVM: a port in use is said first), ``start``, ``supervise`` until a stop is
    asked for, ``stop``."""

    def __init__(self, config: configuration.SidecarConfig):
        self.config, self.pipeline = config, config.pipeline
        self.forecast: capacity_metrics.CapacityForecast | None = None
        self.spark = self.decisions = self.recording = None
        self._history_retry_at = 0.0
        self._stopped_before = False  # the decisions' query stopped since the start

    def serve_forecast(self) -> None:
        """The history's forecast on aggregator.metrics.port, when it is set."""
        config = self.config
        if self.pipeline.metrics_port is None:
            return
        self.forecast = capacity_metrics.CapacityForecast(config.history.location, config.storage_limit)
        try:
            port = capacity_metrics.serve(self.forecast, config.http_host, self.pipeline.metrics_port)
        except OSError as error:
            raise CannotAggregate(f"cannot listen on {config.http_host}:{self.pipeline.metrics_port} "
                                  f"({configuration.PREFIX}aggregator.metrics.port): {error.strerror or error}")
        _log.info("the history's forecast on http://%s:%d/metrics, made every %s", config.http_host, port,
                  capacity_metrics.FORECAST_EVERY)

    def start(self) -> None:
        """The topics made if missing, the checkpoint claimed, the session and the queries started."""
        config, pipeline = self.config, self.pipeline
        jars = [*(pipeline.kafka_jars or connector_jars(config.spark_url)),
                *history.filesystem_jars(config.history.location, config.history.jars)]
        try:
            with ClusterAdmin(pipeline.client) as admin:
                ensure_topics(admin, pipeline.observations_topic, pipeline.decisions_topic)
                owner = checkpoints.Owner(admin.cluster_id(), pipeline.observations_topic, pipeline.decisions_topic)
            self.checkpoint = claimed_checkpoint(pipeline.checkpoint, owner, config.spark_url, tempfile.gettempdir())
            self.starting = end_offsets(pipeline.client, pipeline.observations_topic)
            self.spark = session.aggregator_session(
                config.spark_url, "quota-sidecar-aggregator", pipeline.driver_memory,
                {"spark.jars": ",".join(jars), "spark.sql.session.timeZone": "UTC"})
            # The agents' client id: the exemption they write keeps the pipeline out of the throttle it carries.
            self.kafka_options = {"client.id": SIDECAR_CLIENT_ID, **pipeline.java_properties}
            self.decisions = self._start_decisions()
            if config.history.enabled:
                self.recording = self._start_history()
                _log.info("appending the volumes observed to the history at %s every %s, kept %s",
                          config.history.location, isodate.duration_isoformat(config.history.interval),
                          isodate.duration_isoformat(config.history.retention))
        except AdminError as error:
            raise CannotAggregate(f"cannot reach the pipeline cluster: {error}", unreachable=True) from None
        except CannotAggregate:
            raise
        except Exception as error:  # Spark's errors come as many types; one line says which
            raise CannotAggregate(f"cannot start the aggregation: {self.why(error)}") from None
        if self.forecast is not None:
            self.forecast.start(self.spark)
        _log.info("deciding for the agents of %s: %s -> %s (checkpoint %s, Spark %s)", pipeline.bootstrap_servers,
                  pipeline.observations_topic, pipeline.decisions_topic, self.checkpoint,
                  config.spark_url or "embedded")

    def supervise(self, stopping: threading.Event) -> None:
        """Until `stopping` is set: a decisions' query that stopped (a micro-batch failed: a write timed out...)
        resumes from its checkpoint; a history that stopped is started again once a minute."""
        while not stopping.wait(1.0):
            if not self.decisions.isActive:
                failure, first, self._stopped_before = self.decisions.exception(), not self._stopped_before, True
                if first and replay_metrics_failed(failure):
                    _log.info("Spark's Kafka source failed to report the metrics of the aggregation's first "
                              "micro-batch from its checkpoint (a bug of Spark 4.1); starting it again at once")
                else:
                    _log.warning("the aggregation stopped: %s; starting it again in %.0fs", self.why(failure),
                                 RESTART_AFTER)
                    if stopping.wait(RESTART_AFTER):
                        return
                try:
                    self.decisions = self._start_decisions()
                except Exception as error:
                    raise CannotAggregate(f"cannot start the aggregation again: {self.why(error)}", unreachable=True)
            recording = self.recording
            if recording is not None and not recording.isActive and time.monotonic() >= self._history_retry_at:
                self._history_retry_at = time.monotonic() + HISTORY_RETRY_EVERY
                _log.warning("the history at %s stopped: %s; starting it again", self.config.history.location,
                             self.why(recording.exception()))
                try:
                    self.recording = self._start_history()
                except Exception as error:
                    _log.warning("cannot start the history at %s again: %s", self.config.history.location,
                                 self.why(error))

    def stop(self) -> None:
        if self.forecast is not None:
            self.forecast.stop()
        for running in (self.decisions, self.recording):
            if running is not None and running.isActive:
                running.stop()
        session.stop_sessions()

    def why(self, error: BaseException) -> str:
        """One line for an error of Spark's: a permission refused names what stops without it."""
        pipeline = self.pipeline
        return (refused_topic(error, REFUSALS, pipeline.observations_topic, pipeline.decisions_topic)
                or session.reason(error))

    def _start_decisions(self):
        pipeline = self.pipeline
        return aggregation.start(self.spark, self.kafka_options, pipeline.observations_topic,
                                 pipeline.decisions_topic, self.checkpoint, f"{socket.gethostname()}/{os.getpid()}",
                                 self.starting)

    def _start_history(self):
        kept = self.config.history
        return aggregation.start_history(self.spark, self.kafka_options, self.pipeline.observations_topic,
                                         f"{self.checkpoint}-history", kept.location, kept.retention,
                                         kept.interval, self.starting)


def replay_metrics_failed(error: BaseException | None) -> bool:
    """Whether the query stopped as Spark 4.1's Kafka source stops a micro-batch a restart replays from the
    checkpoint (offsets logged, not committed: a kill), once it was written: its metrics read the latest offsets,
    which only a new batch fetches (SPARK-55271). The query's next start goes on from the batch after it."""
    return 'Cannot invoke "scala.collection.IterableOps.map(scala.Function1)" because the return value of ' \
        '"scala.Option.get()" is null' in str(error or "")


def claimed_checkpoint(configured: str, owner: checkpoints.Owner, spark_url: str, temp_dir: str) -> str:
    """The checkpoint's location (configured, else derived from the pipeline), checked to be this pipeline's before
    Spark reads it: another pipeline's stops the aggregator with one line."""
    location = configured or checkpoints.default_location(temp_dir, owner)
    named = f"{configuration.PREFIX}aggregator.checkpoint.location={location}"
    local = checkpoints.local_path(location)
    if local is None or session.is_connect(spark_url):
        _log.info("%s: on %s filesystem, so which pipeline wrote it is not checked: give each pipeline a location "
                  "of its own", named, "another" if local is None else "the Spark Connect server's")
        return location
    try:
        said = checkpoints.claim(local, owner, named)
    except checkpoints.CheckpointError as error:
        raise CannotAggregate(str(error)) from None
    if said:
        _log.info("%s", said)
    return location


def refused_topic(error: BaseException, refusals, observations_topics: str, decisions_topic: str) -> str | None:
    """The one line of a refusal when Kafka's authorizer refused Spark's Kafka source or sink a topic: the permission
    and what stops without it. The consumer's and the producer's exceptions name the topics (the decisions topic is
    the sink's); the admin client's, through which the source reads offsets (ListOffsets), names none: the source's."""
    said = str(error)
    named = re.search(r"TopicAuthorizationException: Not authorized to access topics: \[([^\]]*)\]", said)
    if named is not None:
        topics = frozenset(topic.strip() for topic in named.group(1).split(",") if topic.strip())
    elif "TopicAuthorizationException: Topic authorization failed" in said:
        topics = frozenset(topic.strip() for topic in observations_topics.split(",") if topic.strip())
    else:
        return None
    sink = decisions_topic in topics
    apis = ("Produce", "Metadata") if sink else ("Fetch", "Metadata", "ListOffsets")
    return str(refusals.refused(AuthorizationRefused(f"Spark's Kafka {'sink' if sink else 'source'}", apis, "TOPIC",
                                                     topics)))


CONNECTOR_CLASSPATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build",
                                   "spark-kafka.classpath")
# The connector's jars as pom-spark-kafka.xml resolves them (what Spark's own jars lack), by file name.
_CONNECTOR_JARS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")


def connector_jars(spark_url: str | None = None) -> list[str]:
    """The jars of Spark's Kafka connector that `make setup` resolved (build/spark-kafka.classpath); else, where
    they are on Spark's own classpath already (the quota-sidecar-spark image puts them in pyspark's jars), none,
    but for a standalone cluster's executors (``spark://``), whose Spark is not this one: those jars, shipped."""
    try:
        with open(CONNECTOR_CLASSPATH, encoding="utf-8") as file:
            return [jar for jar in file.read().strip().split(":") if jar]
    except OSError:
        on_classpath = _sparks_own_connector_jars()
        if on_classpath:
            return on_classpath if (spark_url or "").startswith("spark://") else []
        raise CannotAggregate(f"no jars of Spark's Kafka connector: set {configuration.PREFIX}aggregator.kafka.jars, "
                              f"or run `make setup` in the checkout ({CONNECTOR_CLASSPATH})") from None


def _sparks_own_connector_jars() -> list[str]:
    jars = spark_jars_dir()
    names = sorted(os.listdir(jars)) if os.path.isdir(jars) else []
    if not any(name.startswith(_CONNECTOR_JARS[0]) for name in names):
        return []
    return [os.path.join(jars, name) for name in names if name.startswith(_CONNECTOR_JARS)]


def spark_jars_dir() -> str:
    """pyspark's own jars: Spark's classpath in this process."""
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")
