"""The sidecar's keys, described once: name, parser, default and meaning.

KEYS is the one description of the keys: `quota-sidecar keys` prints it, the docs' configuration page is made
from it (docs/gen_pages.py), and config.py parses a configuration with them.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

import isodate

from .properties import (ADMIN_PREFIX, MIN_DRIVER_MIB, boolean, driver_memory, duration, host, non_negative_int,
                         non_negative_percent, optional_port, optional_readable_file, path_list, percent, port,
                         positive_duration, positive_int, positive_number, principal, principal_list, ratio, spark_url,
                         state_store, text, token, zookeeper_connect)

CAPACITY_KEY = "replication.capacity.bytes.per.second"
HARD_KEYS = ("storage.per.volume.limit.min.available.bytes", "storage.per.volume.limit.min.available.ratio")
SOFT_KEYS = ("storage.per.volume.soft.limit.min.available.bytes", "storage.per.volume.soft.limit.min.available.ratio")
DESCENT_KEYS = ("storage.per.volume.descent.min.available.bytes", "storage.per.volume.descent.min.available.ratio")
# A poll's deadline when poll.timeout is not set: this, or the admin request timeout and a margin when shorter.
DEFAULT_POLL_TIMEOUT = timedelta(seconds=10)
POLL_TIMEOUT_MARGIN = timedelta(seconds=5)
# The pipeline's topics when pipeline.*.topic is not set (their settings and creation: pipeline/topics.py).
OBSERVATIONS_TOPIC = "__quota_sidecar_observations"
DECISIONS_TOPIC = "__quota_sidecar_decisions"
HEARTBEATS_TOPIC = "__quota_sidecar_heartbeats"
# Keys read from the broker's own server.properties (no prefix) when the sidecar sits beside it.
BROKER_ID_KEYS = ("node.id", "broker.id")
LOG_DIR_KEYS = ("log.dirs", "log.dir")  # Kafka reads log.dirs first


# ---------------------------------------------------------------- the pipeline's values

def servers(raw: str) -> str:
    """host:port[,host:port...], as bootstrap.servers; empty for none."""
    value = raw.strip()
    if value and not all(re.fullmatch(r"[A-Za-z0-9._-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}", part.strip())
                         for part in value.split(",")):
        raise ValueError
    return ",".join(part.strip() for part in value.split(",")) if value else ""


servers.allowed = "empty, or host:port[,host:port...] as in bootstrap.servers"


def topic_name(raw: str) -> str:
    """A topic name Kafka accepts: letters, digits, '.', '_' and '-', at most 249 characters."""
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", value) or value in (".", ".."):
        raise ValueError
    return value


topic_name.allowed = "a topic name: letters, digits, '.', '_', '-' (at most 249)"


def location(raw: str) -> str:
    """An absolute path, or a URL Spark's Hadoop layer opens (s3a://bucket/path, hdfs://...); empty for the default."""
    value = raw.strip()
    if value and not (value.startswith("/") or re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+", value)):
        raise ValueError
    return value


location.allowed = "empty, an absolute path, or a URL such as s3a://bucket/path"


def step_ratio(raw: str) -> float:
    """How much lower each step of the descent may be: above 1, at most 3.5 (Kafka's throttle time is
    (ratio - 1) x its quota window: 30 s at 3.5 with a 12 s window)."""
    value = float(raw)
    if not 1.0 < value <= 3.5:
        raise ValueError
    return value


step_ratio.allowed = "a number above 1 and at most 3.5"


# ---------------------------------------------------------------- the keys

@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], object]
    default: object
    doc: str                   # what it means, for the configuration page and `quota-sidecar keys`
    default_doc: str = ""      # the default in words, where the value alone does not say it

    @property
    def allowed(self) -> str:
        return self.parse.allowed

    def shown_default(self) -> str:
        if self.default_doc:
            return self.default_doc
        if isinstance(self.default, timedelta):
            return isodate.duration_isoformat(self.default)
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if self.default in ("", ()):
            return "empty"
        return str(self.default)


KEYS: tuple[Key, ...] = (
    Key("storage.per.volume.limit.min.available.bytes", non_negative_int, None,
        "throttle when a volume's available bytes <= this", "unset"),
    Key("storage.per.volume.limit.min.available.ratio", ratio, None,
        "throttle when a volume's available/total <= this (total 0 counts as 0)", "unset"),
    Key("storage.per.volume.soft.limit.min.available.bytes", non_negative_int, None,
        "opt-in soft zone, above the hard limit and of its kind (needs `produce`): between the two, `produce` is "
        "scaled by (available - hard) / (soft - hard)", "unset (off)"),
    Key("storage.per.volume.soft.limit.min.available.ratio", ratio, None,
        "the same soft zone on available/total", "unset (off)"),
    Key("storage.per.volume.limit.lead.time", duration, timedelta(0),
        "opt-in: a volume also violates (a predicted violation) when at its fill rate it reaches the limit "
        "within this time", "PT0S (off)"),
    Key(DESCENT_KEYS[0], non_negative_int, None,
        "where the producer quotas start down in steps to `produce.floor` while a volume fills (above the hard "
        "limit, of its kind): what is written on the way down must fit between the two",
        "twice the hard limit when the hard limit is in bytes"),
    Key(DESCENT_KEYS[1], ratio, None, "the same on available/total", "twice the hard limit when it is a ratio"),
    Key("storage.per.volume.descent.horizon", duration, None,
        "the descent also starts when at its fill rate a volume reaches the hard limit within this time",
        "2 x (storage.check.interval + produce.descent.step); PT0S: off"),
    Key("storage.fill.window", positive_duration, timedelta(minutes=1),
        "a volume's fill rate: the least-squares slope of its available bytes over the observations this recent "
        "(the current one included; longer than zero)"),
    Key("storage.check.interval", duration, timedelta(minutes=1),
        "time between polls; PT0S disables the storage check (no limit needed then)"),
    Key("storage.local.log.dirs", path_list, (), "this broker's log dirs as the sidecar sees them (a read-only "
        "mount in a pod), watched with statvfs; one not made yet (its parent must exist) is watched once it appears",
        "log.dirs (or log.dir) of the file"),
    Key("storage.local.watch.interval", duration, timedelta(milliseconds=100),
        "how often the local log dirs are sampled; PT0S turns the local watch off", "PT0.1S"),
    Key("storage.local.trigger.horizon", positive_duration, None, "start a pass at once when a local volume would reach "
        "the limit within this, at its current fill rate", "3 x the last pass's duration"),
    Key("poll.timeout", positive_duration, DEFAULT_POLL_TIMEOUT,
        "deadline of one poll or replication pass (admin calls, their retries, the aggregator's decision); "
        "once it runs out the poll fails and the factor's timeline goes on",
        "PT10S (kafka.admin.request.timeout.ms + 5 s when that is shorter)"),
    Key("storage.cordon.log.dirs", boolean, True,
        "while a log dir of this broker violates the limit, add it to the broker's cordoned.log.dirs (KIP-1066, "
        "Kafka >= 4.3: no new replicas there) and remove it on recovery; needs broker.id"),
    Key("storage.cancel.moves.at.limit", boolean, True,
        "with replication throttles on: cancel the moves adding replicas to a log dir of this broker, and the "
        "copies into it from another dir of the broker, when its free space keeps falling under the disk guard, "
        "below the limit by more than the guarded fetches bring"),
    Key("cover.after", duration, timedelta(seconds=2),
        "an agent whose heartbeat (every cover.after / 4, on pipeline.heartbeats.topic) no other has read for this "
        "long is down: the live agent of the lowest broker id watches that broker's volumes until it is back; "
        "PT0S turns heartbeats and covering off"),
    Key("cover.interval", positive_duration, timedelta(milliseconds=200),
        "how often the covering agent asks a broker whose agent is down for its volumes (DescribeLogDirs)"),
    Key("throttle.factor.fallback", ratio, 1.0, "factor once no valid factor is left"),
    Key("throttle.factor.validity.duration", duration, timedelta(minutes=5),
        "how long a factor stays valid while polls fail"),
    Key("zookeeper.connect", zookeeper_connect, "", "the cluster's ZooKeeper (Kafka 3.x in ZooKeeper mode): the "
        "sidecars publish their broker's local volumes in ephemeral znodes under <chroot>/quota-sidecar/volumes, "
        "the volume source for brokers whose DescribeLogDirs has no sizes (Kafka < 3.3)", "empty (off)"),
    Key("zookeeper.session.timeout", positive_duration, timedelta(seconds=10),
        "the sidecar's ZooKeeper session: how long after it dies its znode goes (ZooKeeper bounds it by its tick)"),
    Key("state.store", state_store, "topic", "where the sidecars keep their records and the overrides: the compacted "
        "topic, or the znode <chroot>/quota-sidecar/state (versioned writes)"),
    Key("produce", positive_number, None, "producer quota in bytes/s per principal, scaled by the factor",
        "unset (unlimited)"),
    Key("produce.floor", positive_number, 26_214, "the lowest producer quota in bytes/s per principal the descent "
        "writes before the hard limit (the soft zone's `produce` x factor goes where it says): a request of "
        "max.request.size (1 MiB) then waits at most 30 s; raise it N times for N producers of one principal "
        "writing at once", "26214 (1 MiB / 40 s)"),
    Key("produce.descent.ratio", step_ratio, 3.0, "each step of the descent lowers a producer quota at most this "
        "many times, from the lower of the quota in force and the fastest broker's fill (its fill rate, or its "
        "growth over Kafka's quota window when faster): Kafka's throttle time stays under (ratio - 1) x that window"),
    Key("produce.descent.step", positive_duration, timedelta(seconds=36), "the time between two steps down: at "
        "least the throttle a step causes and one quota window (ratio x the window, 12 s at most with Kafka's "
        "defaults); passes come this often while the descent lasts"),
    Key("fetch", positive_number, None, "consumer quota in bytes/s per principal, never scaled", "unset (no quota)"),
    Key("request", positive_number, None, "request-time quota in percent per principal, never scaled",
        "unset (no quota)"),
    Key("excluded.principal.name.list", principal_list, (), "principals never throttled"),
    Key("sidecar.principal", principal, None, "the principal the sidecar's own clients authenticate as (User:NAME, "
        "as the brokers name it: with mutual TLS, the mapped certificate name): their writes are exempt from the "
        "throttle as that user with the sidecar's client id, which no other principal can borrow",
        "the user of kafka.admin.sasl.jaas.config; none with PLAINTEXT or SSL"),
    Key("sidecar.produce", positive_number, 1_000_000, "producer quota in bytes/s of the sidecar's client id while "
        "its clients have no principal of their own: above what its records, heartbeats and observations write, "
        "far below a flood (any client that takes that client id shares it)"),
    Key("spark.url", spark_url, "", "where the aggregator (and evaluate, plan) runs Spark: empty for an embedded "
        "local Spark, sc:// for a Spark Connect server, else a Spark master URL; the agent runs none"),
    Key("pipeline.bootstrap.servers", servers, "", "the cluster of the pipeline between the agents and the aggregator "
        "(its observations and decisions topics), reached with the kafka.admin.* settings: a separate cluster's "
        "bootstrap servers keep the decisions flowing when the watched cluster is in trouble",
        "the watched cluster (kafka.admin.bootstrap.servers)"),
    Key("pipeline.observations.topic", topic_name, OBSERVATIONS_TOPIC,
        "the agents' observations (kept an hour, 8 MiB a partition)"),
    Key("pipeline.decisions.topic", topic_name, DECISIONS_TOPIC, "the aggregator's decisions (compacted)"),
    Key("pipeline.heartbeats.topic", topic_name, HEARTBEATS_TOPIC, "the agents' heartbeats (one partition, kept "
        "10 minutes)"),
    Key("aggregator.checkpoint.location", location, "", "the aggregator's Spark checkpoint (offsets read): a restart "
        "resumes after the last micro-batch it decided; put it on a volume. It belongs to one pipeline (cluster id, "
        "observations and decisions topics), named in its quota-sidecar-pipeline.json: an aggregator of another "
        "pipeline refuses it at start (not checked for a URL or on a Spark Connect server)",
        "<temp dir>/quota-sidecar-aggregator-<hash of the pipeline's cluster id and topics>"),
    Key("history.location", location, "", "where the aggregator appends every volume observation (Parquet, partitioned "
        "by cluster and day) for quota-sidecar report's forecast", "empty (no history kept)"),
    Key("history.jars", path_list, (), "the jars of the history's filesystem that Spark lacks, loaded by the "
        "aggregator and quota-sidecar report (never downloaded at run time): for s3a://, Hadoop's hadoop-aws and the "
        "AWS SDK's bundle", "those of build/s3a.classpath (make s3a) for an s3a:// location; none else"),
    Key("history.retention", positive_duration, timedelta(days=90), "the aggregator deletes the history's days older "
        "than this (keep several of Kafka's retention cycles: the forecast regresses their peaks)"),
    Key("history.interval", positive_duration, timedelta(minutes=5), "how often the aggregator appends the "
        "observations since its last append to the history (each append a file per cluster and day: shorter makes "
        "more, smaller files)"),
    Key("aggregator.metrics.port", optional_port, None, "the aggregator's Prometheus endpoint (/metrics) on http.host: "
        "each volume's days to the storage limit from the forecast of the history (hourly); needs history.location",
        "none (no endpoint)"),
    Key("aggregator.kafka.jars", path_list, (), "the jars of Spark's Kafka connector the aggregator loads (never "
        "downloaded at run time)", "those of build/spark-kafka.classpath (make setup); none in the "
        "quota-sidecar-spark image, which has them on Spark's classpath"),
    Key("aggregator.driver.memory", driver_memory, f"{MIN_DRIVER_MIB}m", "the heap of the aggregator's Spark "
        "driver. The default serves a fleet of up to ~30 brokers in ~550 MiB of RSS (docs/benchmarks.md), on the serial "
        "collector with C2's code in 64 MiB; a larger heap, for hundreds of brokers and more, runs the JVM's own "
        "collector (G1 on two cores or more) and code cache"),
    Key("http.host", host, "127.0.0.1", "address of the HTTP endpoint (metrics, status, overrides)"),
    Key("http.port", port, 8080, "its port (0 picks a free one, logged)"),
    Key("api.token", token, "", "bearer token for override changes; empty refuses changes"),
    Key("http.tls.cert.file", optional_readable_file, "", "the endpoint's TLS certificate (PEM, its chain after it): "
        "with http.tls.key.file the endpoint speaks https only; both are read again when either file changes (as "
        "cert-manager renews them)", "empty (plain HTTP)"),
    Key("http.tls.key.file", optional_readable_file, "", "the private key of http.tls.cert.file (PEM)",
        "empty (plain HTTP)"),
    Key("http.plain.port", optional_port, None, "with TLS, a second listener on http.host in plain HTTP for "
        "/metrics, the probes and /status (Prometheus and the kubelet then need no TLS); changes are refused there "
        "unless they come from this host", "none"),
    Key("http.plain.changes", boolean, False, "take override changes over plain HTTP from any address (the token "
        "travels in clear text); otherwise only over https or from this host"),
    Key("broker.id", non_negative_int, None, "the broker beside this sidecar (needed by replication throttles)",
        "node.id/broker.id of the file"),
    Key(CAPACITY_KEY, positive_int, None, "network capacity of every broker in bytes/s "
        f"({CAPACITY_KEY}.<broker id> for one broker)", "unset (replication throttles off)"),
    Key("replication.max.tx.percent", percent, 90.0, "share of free outbound capacity a source may use"),
    Key("replication.max.rx.percent", percent, 90.0, "share of free inbound capacity a destination may use"),
    Key("replication.min.rate.bytes.per.second", positive_int, 10_000_000, "floor and fail-safe rate in bytes/s"),
    Key("replication.change.threshold.percent", non_negative_percent, 10.0,
        "a new rate is written only when it moves at least this much"),
    Key("replication.failure.threshold", non_negative_int, 1,
        "failed network reads in a row tolerated before the fail-safe rate"),
    Key("replication.disk.guard.rate.bytes.per.second", positive_int, 1,
        "follower rate of a destination whose volume violates the limit"),
    Key("replication.network.interface", text, "",
        "interface measured with psutil; name it on a host with bridges or veths, where the default counts "
        "bytes crossing a bridge twice (in a pod, the default sees just the pod's interface)", "empty (all but lo)"),
    Key("replication.network.window", positive_duration, timedelta(seconds=30),
        "network figures averaged over this window"),
    Key("replication.check.interval", positive_duration, timedelta(seconds=10),
        "time between replication passes (moves, network, rates; the storage check keeps its own interval); "
        "the shorter of the two applies"),
    Key("replication.stuck.after", positive_duration, timedelta(minutes=2),
        "a moving replica whose bytes behind have not fallen for this long is reported stuck (no_progress)"),
    Key("replication.keep.up.margin.percent", non_negative_percent, 20.0,
        "keep_up: a move's throttle stays this much above the traffic its partitions take in (KIP-73's lower "
        "bound), or the move never ends"),
    Key("replication.throttle.catch.up", boolean, False,
        "opt-in: throttle this broker as a destination, by the same rule, while it catches up outside any move "
        "(out-of-sync replicas after a restart or a replacement; KIP-73 Q&A 2), with no override needed"),
    Key("replication.cleanup.foreign.after", duration, None,
        "opt-in: clear throttle rates other tools left on this broker once no move was seen this long",
        "unset (off)"),
    Key("remote.copy.max.bytes.per.second", positive_int, None,
        "KIP-956 remote.log.manager.copy.max.bytes.per.second of this broker", "unset (untouched)"),
    Key("remote.fetch.max.bytes.per.second", positive_int, None,
        "KIP-956 remote.log.manager.fetch.max.bytes.per.second of this broker", "unset (untouched)"),
    Key("remote.copy.lift.on.violation", boolean, False,
        "lift the copy quota while this broker has a violating volume, so uploads free local disk sooner"),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
PER_BROKER_CAPACITY = re.compile(re.escape(CAPACITY_KEY) + r"\.(\d+)$")
# The admin client's keys are checked by admin_client.client_kwargs; the configuration page lists what it accepts.
ADMIN_KEYS_DOC = (
    (ADMIN_PREFIX + "bootstrap.servers", "required", "a comma-separated list of host:port",
     "the cluster the sidecar watches"),
    (ADMIN_PREFIX + "*", "", "see below", "admin client properties (security included), as the Java client names them"),
)


def _rows(pattern: str | None) -> list[tuple[str, str, str, str]]:
    """(name, default, allowed, meaning) of every key, or of those whose name contains `pattern`, or matches it as a
    glob when it has * ? or [."""
    rows = [*ADMIN_KEYS_DOC, *((key.name, key.shown_default(), key.allowed, key.doc) for key in KEYS)]
    if pattern is None:
        return rows
    if any(c in pattern for c in "*?["):
        return [row for row in rows if fnmatch.fnmatchcase(row[0], pattern)]
    return [row for row in rows if pattern in row[0]]


def keys_table(pattern: str | None = None) -> str:
    """The keys as a Markdown table: the README's, and `quota-sidecar keys`."""
    lines = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {default} | {allowed} | {doc} |" for name, default, allowed, doc in _rows(pattern)]
    return "\n".join(lines)


def keys_json(pattern: str | None = None) -> list[dict]:
    """The keys for machines: `quota-sidecar keys -o json`."""
    return [{"key": name, "default": default, "allowed": allowed, "meaning": doc}
            for name, default, allowed, doc in _rows(pattern)]
