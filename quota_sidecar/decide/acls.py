"""The ACLs each process needs under Kafka's authorizer, and nothing more, decided from the
configuration it runs with. No I/O.

Every Kafka API a process calls is one `Need`: the operation and resource Kafka's authorizer checks for it
(KafkaApis and ControllerApis, ConfigHelper for DescribeConfigs), the feature that calls it and what happens
when it is refused. `needed` lists them; `acls` groups them into the ACLs to grant, and leaves out an ACL
that another of the same set implies: an ALLOW on READ, WRITE, DELETE or ALTER implies DESCRIBE on the same
resource, ALTER_CONFIGS implies DESCRIBE_CONFIGS, and a literal `*` covers every name (StandardAuthorizerData;
AclAuthorizer in ZooKeeper mode likewise). Each ACL left is then needed by itself: removing one stops what
its needs name.

- Kafka answers CreateTopics of a topic the principal may not CREATE with TOPIC_AUTHORIZATION_FAILED, also
  when the topic exists: whoever ensures a topic at start (the agent, the aggregator) needs CREATE on it.
- An idempotent producer's InitProducerId is allowed by WRITE on any topic (KIP-679): no IDEMPOTENT_WRITE.
- DescribeCluster and Metadata of the cluster's brokers need no ACL.
- ZooKeeper (`zookeeper.connect`, `state.store=zookeeper`) is reached with ZooKeeper's own authentication,
  not through Kafka: no Kafka ACL.
- In a broker pod the agent reads its broker id and log dirs from the broker's server.properties (another
  --config), which the sidecar's own properties (the chart's ConfigMap) need not name: what `run` needs once it
  knows them is listed as well, with that condition (`_in_pod`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations
from typing import Iterable

from ..common import records
from ..configuration.settings import SidecarConfig

RUN, AGGREGATE, STATUS_DIRECT, PLAN, CLEANUP = "run", "aggregate", "status-direct", "plan", "cleanup"
PROCESSES = (RUN, AGGREGATE, STATUS_DIRECT, PLAN, CLEANUP)
SHOWN = {RUN: "run", AGGREGATE: "aggregate", STATUS_DIRECT: "status --direct", PLAN: "plan",
         CLEANUP: "cleanup"}
# The cluster an ACL is granted on: the watched one, or the pipeline's (pipeline.bootstrap.servers, which is the
# watched one unless set). The pipeline's topics are its own in either case, so no ACL of one implies one of the other.
WATCHED, PIPELINE = "watched", "pipeline"
CLUSTER, TOPIC = "CLUSTER", "TOPIC"
CLUSTER_NAME = "kafka-cluster"  # the one name of Kafka's CLUSTER resource
ANY_TOPIC = "*"
# Operations, as Kafka's AclOperation names them.
DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, ALTER, CREATE, READ, WRITE, DELETE = (
    "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER", "CREATE", "READ", "WRITE", "DELETE")
_IMPLIED_BY = {DESCRIBE: {READ, WRITE, DELETE, ALTER}, DESCRIBE_CONFIGS: {ALTER_CONFIGS}}
_ORDER = (CREATE, READ, WRITE, DELETE, DESCRIBE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)

ANY_TOPIC_WHY = ("the literal resource name '*' matches every topic: a move (or a plan) may touch any topic, and the "
                 "throttled-replica lists are written on every topic a move touches, which is not known in advance")


# What an ACL allows beyond what the sidecar does with it (KafkaApis, ControllerApis, AclApis).
CAUTIONS = {
    (ALTER, CLUSTER): "ALTER on CLUSTER also allows CreateAcls, DeleteAcls and AlterUserScramCredentials: whoever "
                      "holds it can grant itself any ACL. Only the disk guard's cancelling needs it; with "
                      "storage.cancel.moves.at.limit=false it is not needed (DESCRIBE on CLUSTER is listed instead)",
    (ALTER_CONFIGS, CLUSTER): "ALTER_CONFIGS on CLUSTER also allows every dynamic broker config: Kafka checks "
                              "AlterClientQuotas against it, and has no narrower ACL for quotas",
    (ALTER_CONFIGS, TOPIC): "ALTER_CONFIGS on every topic also allows any topic config (retention.ms...): Kafka has no "
                            "narrower ACL for the throttled-replica lists",
}


@dataclass(frozen=True)
class Resource:
    kind: str  # CLUSTER or TOPIC
    name: str = CLUSTER_NAME  # a topic's name, or ANY_TOPIC (a literal '*': every topic)

    def covers(self, other: Resource) -> bool:
        return self.kind == other.kind and (self.name == other.name or self.name == ANY_TOPIC)

    def __str__(self) -> str:
        return CLUSTER if self.kind == CLUSTER else f"TOPIC {self.name}"


@dataclass(frozen=True)
class Need:
    """One Kafka API a process calls: the operation on the resource the authorizer checks for it."""
    process: str
    operation: str
    resource: Resource
    feature: str  # the feature that calls it
    api: str  # the Kafka API and what it is for
    without: str  # what happens when the authorizer refuses it
    cluster: str = WATCHED
    condition: str | None = None  # when it is needed, if only with what the configuration does not say (in_pod)


@dataclass(frozen=True)
class Acl:
    """An ALLOW to grant: one operation on one resource of one cluster, and every need it serves (the needs of
    the ACLs it implies included)."""
    cluster: str
    operation: str
    resource: Resource
    needs: tuple[Need, ...]

    @property
    def processes(self) -> tuple[str, ...]:
        return tuple(p for p in PROCESSES if any(need.process == p for need in self.needs))

    @property
    def condition(self) -> str | None:
        """When this ACL is needed, if each of its needs has a condition: theirs, any of them."""
        if any(need.condition is None for need in self.needs):
            return None
        return " or ".join(dict.fromkeys(need.condition for need in self.needs))

    @property
    def caution(self) -> str | None:
        """What else this ACL allows, when that matters."""
        return CAUTIONS.get((self.operation, self.resource.kind))

    def grants(self, need: Need) -> bool:
        """Whether `need` is this ACL's own operation on its own resource (else the ACL implies it)."""
        return (need.operation, need.resource) == (self.operation, self.resource)


def needed(config: SidecarConfig, processes: Iterable[str], in_pod: bool = False) -> list[Need]:
    """Every API each of `processes` calls with `config`, as Needs, in the processes' order. `in_pod`: run's also
    with the broker id and log dirs it reads in a broker pod, if `config` does not name them (_in_pod)."""
    processes = tuple(processes)
    unknown = set(processes) - set(PROCESSES)
    if unknown:
        raise ValueError(f"unknown processes {sorted(unknown)}: expected some of {', '.join(PROCESSES)}")
    run = (lambda c: _run(c) + _in_pod(c)) if in_pod else _run
    build = {RUN: run, AGGREGATE: _aggregate, STATUS_DIRECT: _status_direct, PLAN: _plan, CLEANUP: _cleanup}
    return [need for process in PROCESSES if process in processes for need in build[process](config)]


def acls(needs: Iterable[Need]) -> tuple[Acl, ...]:
    """The ACLs that grant `needs`: one per (cluster, operation, resource), but for those another of them implies,
    whose needs go to the one that implies them (the same resource first: READ of a topic rather than DESCRIBE of
    '*'). A kept ACL implies them directly, as covering and implying both compose."""
    grouped: dict[tuple[str, str, Resource], list[Need]] = {}
    for need in needs:
        grouped.setdefault((need.cluster, need.operation, need.resource), []).append(need)
    resources = list(dict.fromkeys(resource for _, _, resource in grouped))  # in the order first needed

    def rank(key: tuple[str, str, Resource]) -> tuple:
        cluster, operation, resource = key
        return cluster != WATCHED, resource.kind != CLUSTER, resources.index(resource), _ORDER.index(operation)

    kept = [key for key in grouped if not any(_implies(other, key) for other in grouped if other != key)]
    served = {key: list(grouped[key]) for key in kept}
    for key, needs_of_key in grouped.items():
        if key not in served:
            served[min((k for k in kept if _implies(k, key)), key=lambda k: (k[2] != key[2], rank(k)))] += needs_of_key
    return tuple(Acl(cluster, operation, resource, tuple(dict.fromkeys(served_needs)))
                 for (cluster, operation, resource), served_needs in sorted(served.items(), key=lambda i: rank(i[0])))


def required(config: SidecarConfig, processes: Iterable[str]) -> tuple[Acl, ...]:
    """The ACLs a principal needs to run each of `processes` with `config`, run's as in a broker pod."""
    return acls(needed(config, processes, in_pod=True))


def _implies(key: tuple[str, str, Resource], other: tuple[str, str, Resource]) -> bool:
    """Whether the ACL (cluster, operation, resource) `key` allows what `other` needs."""
    cluster, operation, resource = key
    other_cluster, other_operation, other_resource = other
    return cluster == other_cluster and resource.covers(other_resource) and (
        operation == other_operation or operation in _IMPLIED_BY.get(other_operation, ()))


# ---------------------------------------------------------------- what an agent knows in its pod

# What the agent reads in its pod from the broker's server.properties (node.id or broker.id, log.dirs or log.dir),
# if the configuration does not name it. No ACL depends on which broker or which dirs.
KNOWS_BROKER = ("the agent knows its broker (node.id in the broker's server.properties, read in its pod, or the "
                "sidecar's broker.id)")
KNOWS_LOG_DIRS = ("the agent knows its broker's log dirs (log.dirs in the broker's server.properties, read in its "
                  "pod, or storage.local.log.dirs)")
_SOME_BROKER, _SOME_LOG_DIRS = 0, ("/var/lib/kafka/data",)
# What cleanup needs besides what the configuration it is given says.
THROTTLED = "the sidecars throttled replication (replication.capacity.bytes.per.second set for the agents)"
WITH_TOPICS = "cleanup runs with --topics"


def _in_pod(config: SidecarConfig) -> list[Need]:
    """What run needs besides _run(config) once it knows what `config` does not name, its broker and its log dirs,
    each with the condition it needs: knowing one, the other, or both."""
    unknown = []
    if config.broker_id is None:
        unknown.append(({"broker_id": _SOME_BROKER}, KNOWS_BROKER))
    if not config.local_watch.log_dirs:
        unknown.append(({"local_watch": replace(config.local_watch, log_dirs=_SOME_LOG_DIRS)}, KNOWS_LOG_DIRS))
    found: dict[Need, str | None] = dict.fromkeys(_run(config))
    for size in range(1, len(unknown) + 1):
        for known in combinations(unknown, size):
            assumed = replace(config, **{key: value for values, _ in known for key, value in values.items()})
            for need in _run(assumed):
                found.setdefault(need, " and ".join(condition for _, condition in known))
    return [replace(need, condition=condition) for need, condition in found.items() if condition is not None]


# ---------------------------------------------------------------- what each process calls

_CLUSTER = Resource(CLUSTER)
_ANY_TOPIC = Resource(TOPIC, ANY_TOPIC)

DISK = "disk protection"
RECORDS = "the sidecars' records"
ASKING = "the aggregator's decisions"
REPLICATION = "replication throttles"
GUARD = "the disk guard"
CORDONS = "cordoned log dirs"
COVER = "covering a broker whose agent is down"

NO_POLL = "every poll fails: the factor keeps its last valid value, then the fallback"
NO_DECISION = ("no decision: every poll fails and the factor goes to its fallback; only the local verdict "
               "throttles, for this broker's own dirs")
NO_MOVES = "every replication pass fails: moves run unthrottled, the disk guard included"


def _run(config: SidecarConfig) -> list[Need]:
    needs = []
    if config.storage_check_enabled:
        needs.append(Need(RUN, DESCRIBE, _CLUSTER, DISK, "DescribeLogDirs of every broker: the volumes", NO_POLL))
    needs += [
        Need(RUN, DESCRIBE_CONFIGS, _CLUSTER, DISK, "DescribeClientQuotas: the quotas in force, the tenants' own rates",
             NO_POLL),
        Need(RUN, ALTER_CONFIGS, _CLUSTER, DISK, "AlterClientQuotas: the throttle, the exemptions",
             "no quota is written: disk protection cannot throttle producers"),
    ]
    needs += _records(RUN, config, create=True)
    needs += _asking(RUN, config, create=True)
    needs += _covering(config)
    if config.replication.enabled:
        needs += _replication(RUN)
        needs += [
            Need(RUN, DESCRIBE_CONFIGS, _CLUSTER, REPLICATION, "DescribeConfigs of its broker's throttle rates",
                 "the rates are not read: its broker is not throttled, the rest goes on"),
            Need(RUN, ALTER_CONFIGS, _CLUSTER, REPLICATION,
                 "IncrementalAlterConfigs of its broker's leader/follower rates (and KIP-956 remote quotas)",
                 "its broker's rates are not written: moves run at whatever rate is set, or unthrottled"),
            Need(RUN, DESCRIBE_CONFIGS, _ANY_TOPIC, REPLICATION,
                 "DescribeConfigs of the throttled-replica lists of the topics a move touches",
                 "the lists are not written: the rates throttle no replica"),
            Need(RUN, ALTER_CONFIGS, _ANY_TOPIC, REPLICATION,
                 "IncrementalAlterConfigs of leader/follower.replication.throttled.replicas of every topic a move "
                 "touches",
                 "the lists are not written: the rates throttle no replica, moves run unthrottled"),
        ]
        if _guarded(config):
            unguarded = "a dir at the limit is not guarded: moves onto it run at full speed"
            needs += [
                Need(RUN, DESCRIBE, _CLUSTER, GUARD, "ListPartitionReassignments, DescribeLogDirs of its broker: the "
                     "moves onto it, the dir each replica is in", unguarded),
                Need(RUN, DESCRIBE, _ANY_TOPIC, GUARD, "Metadata of every topic: the replicas catching up onto it",
                     unguarded),
                Need(RUN, ALTER_CONFIGS, _CLUSTER, GUARD,
                     "IncrementalAlterConfigs of its broker's follower and dir-copy rates at the guard rate",
                     unguarded),
                Need(RUN, ALTER_CONFIGS, _ANY_TOPIC, GUARD,
                     "IncrementalAlterConfigs APPEND to the follower lists of the topics moving onto it", unguarded),
            ]
            if config.cancel_moves_at_limit:
                needs += [
                    Need(RUN, DESCRIBE_CONFIGS, _CLUSTER, GUARD, "DescribeConfigs of its broker's fetch sizes",
                         "the moves onto a dir at the limit are not cancelled"),
                    Need(RUN, ALTER, _CLUSTER, GUARD,
                         "AlterPartitionReassignments (cancel) and AlterReplicaLogDirs of the moves onto a dir at the "
                         "limit", "the moves onto a dir at the limit are not cancelled: they may fill it"),
                ]
    if config.broker_id is not None and config.cordon_log_dirs:
        needs += [
            Need(RUN, DESCRIBE_CONFIGS, _CLUSTER, CORDONS, "DescribeConfigs of its broker's cordoned.log.dirs",
                 "its dirs are not cordoned (one WARNING a pass); the rest goes on"),
            Need(RUN, ALTER_CONFIGS, _CLUSTER, CORDONS,
                 "IncrementalAlterConfigs APPEND/SUBTRACT of its broker's cordoned.log.dirs",
                 "a dir at the limit is not cordoned: Kafka may place new replicas in it (one WARNING a pass); "
                 "the rest goes on"),
        ]
    return needs


def _cleanup(config: SidecarConfig) -> list[Need]:
    """What `cleanup` does (and `run --cleanup` once its loop has stopped): hand back what the sidecars set, on every
    broker the records name; with --topics, delete the sidecars' topics."""
    nothing = "clean-up stops: what the sidecars set stays in force"
    needs = _records(CLEANUP, config, create=False, without=nothing)
    needs += [
        Need(CLEANUP, DESCRIBE_CONFIGS, _CLUSTER, "clean-up",
             "DescribeClientQuotas and DescribeConfigs: the quotas and broker configs the sidecars set", nothing),
        Need(CLEANUP, ALTER_CONFIGS, _CLUSTER, "clean-up",
             "AlterClientQuotas, and IncrementalAlterConfigs of the brokers' rates and cordoned.log.dirs: the values "
             "they replaced put back", nothing),
    ]
    moved = None if config.replication.enabled else THROTTLED
    needs += [
        Need(CLEANUP, DESCRIBE_CONFIGS, _ANY_TOPIC, "clean-up", "DescribeConfigs of the throttled-replica lists",
             nothing, condition=moved),
        Need(CLEANUP, ALTER_CONFIGS, _ANY_TOPIC, "clean-up",
             "IncrementalAlterConfigs: the sidecars' entries out of the throttled-replica lists", nothing,
             condition=moved),
    ]
    gone = "cleanup --topics leaves the topic"
    topics = [(records.TOPIC, WATCHED)] if config.state_store == "topic" else []
    topics += [(topic, PIPELINE) for topic in (config.pipeline.observations_topic, config.pipeline.decisions_topic,
                                               config.pipeline.heartbeats_topic)]
    return needs + [Need(CLEANUP, DELETE, Resource(TOPIC, topic), "clean-up", "DeleteTopics", gone, cluster,
                         condition=WITH_TOPICS) for topic, cluster in topics]


def _status_direct(config: SidecarConfig) -> list[Need]:
    """One pass that reads the watched cluster and writes nothing there (serve/direct_status.look); it asks the aggregator as a
    pass does, so it publishes an observation."""
    unreadable = "status --direct fails: cannot read the cluster (exit 1)"
    needs = []
    if config.storage_check_enabled:
        needs.append(Need(STATUS_DIRECT, DESCRIBE, _CLUSTER, DISK, "DescribeLogDirs of every broker", unreadable))
    needs.append(Need(STATUS_DIRECT, DESCRIBE_CONFIGS, _CLUSTER, DISK, "DescribeClientQuotas", unreadable))
    needs += _records(STATUS_DIRECT, config, create=False, without=unreadable)
    needs += _asking(STATUS_DIRECT, config, create=False,
                     without="no decision: status shows the failed poll instead of the factor")
    if config.replication.enabled:
        needs += _replication(STATUS_DIRECT, without="status shows no moves and no rates")
        needs.append(Need(STATUS_DIRECT, DESCRIBE_CONFIGS, _CLUSTER, REPLICATION,
                          "DescribeConfigs of its broker's throttle rates", "status shows no rates"))
    if config.broker_id is not None:
        needs.append(Need(STATUS_DIRECT, DESCRIBE_CONFIGS, _CLUSTER, CORDONS,
                          "DescribeConfigs of its broker's cordoned.log.dirs", unreadable))
    return needs


def _plan(config: SidecarConfig) -> list[Need]:
    feature = "plan"
    unreadable = "plan fails: cannot read the cluster (exit 1)"
    return [
        Need(PLAN, DESCRIBE, _ANY_TOPIC, feature, "Metadata of every topic: the partitions and their leaders",
             "the plan is refused: partitions of topics this principal cannot describe are missing from Metadata"),
        Need(PLAN, DESCRIBE, _CLUSTER, feature, "DescribeLogDirs of the leaders: the moving partitions' sizes",
             unreadable),
        Need(PLAN, DESCRIBE_CONFIGS, _CLUSTER, feature, "DescribeConfigs of the brokers' throttle rates in force",
             unreadable),
    ]


def _aggregate(config: SidecarConfig) -> list[Need]:
    """The aggregator, on the pipeline cluster: the topics ensured at start, Spark's Kafka source and sink. The
    source uses no consumer group: its driver reads offsets with an AdminClient (Spark >= 3.4's default), its
    executors assign their partitions and seek, and nothing is committed (the offsets are in the checkpoint)."""
    feature, cluster = "the aggregator", PIPELINE
    observations = Resource(TOPIC, config.pipeline.observations_topic)
    decisions = Resource(TOPIC, config.pipeline.decisions_topic)
    at_start = "the aggregator stops at start: cannot reach the pipeline cluster (exit 1)"
    none = "every micro-batch fails (one WARNING, a new start 5 s later): no agent gets a decision"
    return [
        Need(AGGREGATE, CREATE, observations, feature, "CreateTopics at every start (the topic ensured)", at_start,
             cluster),
        Need(AGGREGATE, CREATE, decisions, feature, "CreateTopics at every start (the topic ensured)", at_start,
             cluster),
        Need(AGGREGATE, DESCRIBE, observations, feature, "Metadata and ListOffsets: its end offsets at start", at_start,
             cluster),
        Need(AGGREGATE, DESCRIBE, observations, feature,
             "Metadata and ListOffsets: Spark's source, from its driver's AdminClient", none, cluster),
        Need(AGGREGATE, READ, observations, feature, "Fetch: Spark's source, from its executors (no consumer group)",
             none, cluster),
        Need(AGGREGATE, DESCRIBE, decisions, feature, "Metadata: Spark's sink", none, cluster),
        Need(AGGREGATE, WRITE, decisions, feature, "Produce: Spark's sink writes the decisions", none, cluster),
    ]


def _records(process: str, config: SidecarConfig, create: bool, without: str | None = None) -> list[Need]:
    """The state topic (state.store=topic): read at every pass, written before every change."""
    if config.state_store != "topic":
        return []
    state = Resource(TOPIC, records.TOPIC)
    unreadable = without or "every pass fails reading the records: nothing is written"
    needs = []
    if create:
        needs.append(Need(process, CREATE, state, RECORDS, "CreateTopics at first use (the topic ensured)",
                          without or "every pass fails at its start: nothing is read or written"))
    needs += [
        Need(process, DESCRIBE, state, RECORDS, "Metadata and ListOffsets", unreadable),
        Need(process, READ, state, RECORDS, "Fetch: all of them, from the beginning", unreadable),
    ]
    if process != STATUS_DIRECT:
        needs.append(Need(process, WRITE, state, RECORDS,
                          "Produce (idempotent: InitProducerId, allowed by WRITE on a topic): a write is recorded "
                          "first",
                          without or "no quota, throttle or cordon is written, each being recorded first; "
                                     "no override can be set"))
    return needs


def _asking(process: str, config: SidecarConfig, create: bool, without: str = NO_DECISION) -> list[Need]:
    """The agent's end of the pipeline: it publishes observations and reads the decisions on them."""
    cluster = PIPELINE
    observations = Resource(TOPIC, config.pipeline.observations_topic)
    decisions = Resource(TOPIC, config.pipeline.decisions_topic)
    needs = []
    if create:
        needs += [Need(process, CREATE, topic, ASKING, "CreateTopics at start (the topic ensured)", without, cluster)
                  for topic in (observations, decisions)]
    return needs + [
        Need(process, DESCRIBE, observations, ASKING, "Metadata", without, cluster),
        Need(process, WRITE, observations, ASKING, "Produce: its observations", without, cluster),
        Need(process, DESCRIBE, decisions, ASKING, "Metadata and ListOffsets", without, cluster),
        Need(process, READ, decisions, ASKING, "Fetch: the decisions on them", without, cluster),
    ]


def _covering(config: SidecarConfig) -> list[Need]:
    """The heartbeats on the pipeline cluster (decide/cover.py); DescribeLogDirs of a covered broker is the
    poll's own ACL."""
    if not config.covering:
        return []
    heartbeats, cluster = Resource(TOPIC, config.pipeline.heartbeats_topic), PIPELINE
    alone = "the other agents take it for down and cover its broker; it covers none"
    return [
        Need(RUN, CREATE, heartbeats, COVER, "CreateTopics at start (the topic ensured)", alone, cluster),
        Need(RUN, DESCRIBE, heartbeats, COVER, "Metadata and ListOffsets", alone, cluster),
        Need(RUN, WRITE, heartbeats, COVER, "Produce: its heartbeat", alone, cluster),
        Need(RUN, READ, heartbeats, COVER, "Fetch: the other agents' heartbeats", alone, cluster),
    ]


def _replication(process: str, without: str = NO_MOVES) -> list[Need]:
    """What a replication pass reads of the moves (replication.py observe)."""
    return [
        Need(process, DESCRIBE, _CLUSTER, REPLICATION,
             "ListPartitionReassignments, DescribeLogDirs of the moving replicas' sizes", without),
        Need(process, DESCRIBE, _ANY_TOPIC, REPLICATION,
             "Metadata of the topics a move touches (of every topic while catch-ups are throttled or guarded)",
             without),
    ]


def _guarded(config: SidecarConfig) -> bool:
    """Whether run has a disk guard (wiring.assemble): replication throttles and a local watch."""
    return (config.local_watch.enabled and config.storage_limit is not None and config.storage_check_enabled)

