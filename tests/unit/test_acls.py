"""`quota-sidecar acls`: the ACLs each process needs with a configuration, and nothing more (decide/acls.py),
printed as kafka-acls commands, a table and JSON (serve/acls_text.py, cli/acls.py)."""

import json

import pytest
from click.testing import CliRunner

from harness.docs import site_pages
from quota_sidecar.cli import main
from quota_sidecar.serve.acls_text import table as acl_table
from quota_sidecar.configuration import config as configuration
from quota_sidecar.decide import acls
from quota_sidecar.decide.acls import (AGGREGATE, ALTER, ALTER_CONFIGS, CLEANUP, CREATE, DESCRIBE, DESCRIBE_CONFIGS,
                                       PIPELINE, PLAN, PROCESSES, READ, RUN, STATUS_DIRECT, WATCHED, WRITE)

WATCHED_SERVERS, PIPELINE_SERVERS = "kafka-1:9092,kafka-2:9092", "pipeline:9092"
BASE = [f"kafka.admin.bootstrap.servers={WATCHED_SERVERS}", "storage.per.volume.limit.min.available.bytes=1000"]
REPLICATION = ["broker.id=1", "replication.capacity.bytes.per.second=100000000"]
GUARDED = REPLICATION + ["storage.local.log.dirs=/var/lib/kafka/data"]  # a local watch: the disk guard
APART = [f"pipeline.bootstrap.servers={PIPELINE_SERVERS}"]
ZOOKEEPER = ["zookeeper.connect=zk:2181/kafka", "state.store=zookeeper", "broker.id=1", "storage.cordon.log.dirs=false"]
EVERYTHING = BASE + GUARDED + APART

CLUSTER = "CLUSTER"
STATE, OBSERVATIONS, DECISIONS, HEARTBEATS = (
    "TOPIC __quota_sidecar_state", "TOPIC __quota_sidecar_observations", "TOPIC __quota_sidecar_decisions",
    "TOPIC __quota_sidecar_heartbeats")
ANY = "TOPIC *"
RECORDS = {(WATCHED, CREATE, STATE), (WATCHED, READ, STATE), (WATCHED, WRITE, STATE)}
ASKING = {(PIPELINE, CREATE, OBSERVATIONS), (PIPELINE, WRITE, OBSERVATIONS), (PIPELINE, CREATE, DECISIONS),
          (PIPELINE, READ, DECISIONS)}
QUOTAS = {(WATCHED, DESCRIBE, CLUSTER), (WATCHED, ALTER_CONFIGS, CLUSTER)}
LISTS = {(WATCHED, DESCRIBE, ANY), (WATCHED, ALTER_CONFIGS, ANY)}
GUARDING = {(WATCHED, ALTER, CLUSTER), (WATCHED, ALTER_CONFIGS, CLUSTER)}  # the disk guard cancels moves
TOPICS_DELETED = {(WATCHED, "DELETE", STATE), (PIPELINE, "DELETE", OBSERVATIONS), (PIPELINE, "DELETE", DECISIONS),
                  (PIPELINE, "DELETE", HEARTBEATS)}  # cleanup --topics
# An agent that knows its broker beats, and covers brokers whose agent is down (cover.after): in its pod it does,
# whether the configuration names its broker or not.
BEATING = {(PIPELINE, CREATE, HEARTBEATS), (PIPELINE, READ, HEARTBEATS), (PIPELINE, WRITE, HEARTBEATS)}


def config(*overrides, aggregator=False):
    return configuration.load((), [*BASE, *overrides], aggregator)


def granted(config, *processes):
    return {(acl.cluster, acl.operation, str(acl.resource)) for acl in acls.required(config, processes)}


@pytest.mark.parametrize("overrides, processes, expected", [
    pytest.param([], [RUN], QUOTAS | RECORDS | ASKING | BEATING, id="default agent"),
    pytest.param(["storage.check.interval=PT0S"], [RUN], {(WATCHED, ALTER_CONFIGS, CLUSTER)} | RECORDS | ASKING,
                 id="no storage check: no DescribeLogDirs"),
    pytest.param(REPLICATION, [RUN], GUARDING | RECORDS | ASKING | LISTS | BEATING,
                 id="replication throttles: in its pod, with its log dirs, the disk guard"),
    pytest.param(REPLICATION + ["storage.local.watch.interval=PT0S"], [RUN], QUOTAS | RECORDS | ASKING | LISTS
                 | BEATING, id="replication throttles without a local watch: no disk guard"),
    pytest.param(REPLICATION + ["cover.after=PT0S"], [RUN], GUARDING | RECORDS | ASKING | LISTS,
                 id="no heartbeats, no cover"),
    pytest.param(GUARDED, [RUN], GUARDING | RECORDS | ASKING | LISTS | BEATING,
                 id="the disk guard cancels moves: ALTER, which implies DESCRIBE"),
    pytest.param(GUARDED + ["storage.cancel.moves.at.limit=false"], [RUN],
                 QUOTAS | RECORDS | ASKING | LISTS | BEATING, id="the disk guard without cancelling"),
    pytest.param(APART, [RUN], QUOTAS | RECORDS | ASKING | BEATING, id="pipeline on another cluster"),
    pytest.param(ZOOKEEPER, [RUN], QUOTAS | ASKING | BEATING, id="ZooKeeper mode: records in a znode, no topic"),
    pytest.param(APART, [STATUS_DIRECT], {(WATCHED, DESCRIBE, CLUSTER), (WATCHED, DESCRIBE_CONFIGS, CLUSTER),
                                          (WATCHED, READ, STATE), (PIPELINE, WRITE, OBSERVATIONS),
                                          (PIPELINE, READ, DECISIONS)},
                 id="status --direct creates and alters nothing"),
    pytest.param(REPLICATION, [STATUS_DIRECT], {(WATCHED, DESCRIBE, CLUSTER), (WATCHED, DESCRIBE_CONFIGS, CLUSTER),
                                                (WATCHED, READ, STATE), (WATCHED, DESCRIBE, ANY),
                                                (PIPELINE, WRITE, OBSERVATIONS), (PIPELINE, READ, DECISIONS)},
                 id="status --direct with replication throttles"),
    pytest.param([], [PLAN], {(WATCHED, DESCRIBE, CLUSTER), (WATCHED, DESCRIBE_CONFIGS, CLUSTER),
                              (WATCHED, DESCRIBE, ANY)}, id="plan"),
    pytest.param(REPLICATION, [CLEANUP], {(WATCHED, ALTER_CONFIGS, CLUSTER), (WATCHED, ALTER_CONFIGS, ANY)}
                 | RECORDS - {(WATCHED, CREATE, STATE)} | TOPICS_DELETED, id="cleanup"),
    pytest.param([], [RUN, CLEANUP], QUOTAS | RECORDS | ASKING | BEATING | {(WATCHED, ALTER_CONFIGS, ANY)}
                 | TOPICS_DELETED, id="run --cleanup"),
])
def test_the_acls_of_a_configuration(overrides, processes, expected):
    assert granted(config(*overrides), *processes) == expected


def conditions(config, *processes):
    return {(acl.operation, str(acl.resource)): acl.condition for acl in acls.required(config, processes)}


@pytest.mark.parametrize("overrides", [[], ["replication.capacity.bytes.per.second=100000000"], APART, ZOOKEEPER[:2]],
                         ids=["default", "replication throttles", "pipeline apart", "ZooKeeper mode"])
def test_what_run_needs_in_its_pod_is_printed_whether_or_not_the_configuration_names_the_broker(overrides, tmp_path):
    """The ACLs printed for the sidecar's own properties (the chart's ConfigMap: no broker id, no log dirs) are those
    of the agent that also reads its broker's server.properties, as it does in its pod."""
    server_properties = tmp_path / "server.properties"
    server_properties.write_text("node.id=1\nlog.dirs=/var/lib/kafka/data\n")
    sidecar_alone = config(*overrides)
    in_its_pod = configuration.load((str(server_properties),), [*BASE, *overrides])
    assert in_its_pod.covering and not sidecar_alone.covering
    assert granted(sidecar_alone, RUN) == granted(in_its_pod, RUN)
    assert not any(conditions(in_its_pod, RUN).values())  # its own configuration names all it needs


def test_without_a_broker_id_the_heartbeats_acls_are_printed_with_their_condition_and_nothing_else_has_one():
    printed = conditions(config(), RUN)
    assert {key for key, condition in printed.items() if condition} == {
        (CREATE, HEARTBEATS), (READ, HEARTBEATS), (WRITE, HEARTBEATS)}
    assert printed[(READ, HEARTBEATS)] == acls.KNOWS_BROKER
    assert "node.id in the broker's server.properties, read in its pod" in acls.KNOWS_BROKER
    # Named by the configuration, nothing depends on the pod.
    assert not any(conditions(config("broker.id=1"), RUN).values())


def test_an_acl_has_a_condition_only_if_each_of_its_needs_has_one():
    """Without log dirs the disk guard's needs depend on them; ALTER on CLUSTER, which they add, serves
    DescribeLogDirs too and is needed either way; ALTER_CONFIGS on CLUSTER serves the quotas and the cordons."""
    found = {(acl.operation, str(acl.resource)): acl for acl in acls.required(config(*REPLICATION), [RUN])}
    alter = found[(ALTER, CLUSTER)]
    assert alter.condition is None
    assert {need.feature for need in alter.needs if need.condition == acls.KNOWS_LOG_DIRS} == {acls.GUARD}
    assert {need.condition for need in alter.needs if need.feature != acls.GUARD} == {None}
    without_broker = {(a.operation, str(a.resource)): a for a in acls.required(config(), [RUN])}
    cordons = [need for need in without_broker[(ALTER_CONFIGS, CLUSTER)].needs if need.feature == acls.CORDONS]
    assert len(cordons) == 2 and {need.condition for need in cordons} == {acls.KNOWS_BROKER}
    assert without_broker[(ALTER_CONFIGS, CLUSTER)].condition is None


def test_what_the_running_agent_calls_is_what_its_own_configuration_says():
    """The refusal lines read the needs of the agent as it runs: one that does not know its broker beats not."""
    assert not [need for need in acls.needed(config(), [RUN]) if str(need.resource) == HEARTBEATS]
    assert {need.condition for need in acls.needed(config(), [RUN], in_pod=True)
            if str(need.resource) == HEARTBEATS} == {acls.KNOWS_BROKER}


def test_the_aggregator_needs_its_two_topics_and_no_consumer_group():
    aggregator = configuration.load((), [f"pipeline.bootstrap.servers={PIPELINE_SERVERS}"], aggregator=True)
    assert granted(aggregator, AGGREGATE) == {(PIPELINE, CREATE, OBSERVATIONS), (PIPELINE, READ, OBSERVATIONS),
                                              (PIPELINE, CREATE, DECISIONS), (PIPELINE, WRITE, DECISIONS)}


def test_topic_names_come_from_the_configuration():
    renamed = config("pipeline.observations.topic=ops.asked", "pipeline.decisions.topic=ops.decided",
                     "pipeline.heartbeats.topic=ops.beats")
    topics = {resource for _, _, resource in granted(renamed, RUN, AGGREGATE) if resource.startswith("TOPIC")}
    assert topics == {STATE, "TOPIC ops.asked", "TOPIC ops.decided", "TOPIC ops.beats"}


def test_one_principal_for_several_processes_gets_the_union_without_repeats():
    everything = config(*GUARDED, *APART)
    together = acls.required(everything, PROCESSES)
    assert len({(a.cluster, a.operation, a.resource) for a in together}) == len(together)
    assert set().union(*(granted(everything, p) for p in PROCESSES)) >= granted(everything, *PROCESSES)
    # the aggregator's READ of the observations and WRITE of the decisions come with the agent's own
    assert {(PIPELINE, READ, OBSERVATIONS), (PIPELINE, WRITE, DECISIONS)} <= granted(everything, *PROCESSES)


@pytest.mark.parametrize("overrides", [[], REPLICATION, GUARDED, GUARDED + APART, ZOOKEEPER])
@pytest.mark.parametrize("process", PROCESSES)
def test_every_api_called_is_allowed_and_every_acl_is_needed_by_itself(overrides, process):
    """Each need is served by an ACL that allows it, and no ACL is implied by the others: removing any one of
    them stops what its needs name (what a live-authorizer test would check one ACL at a time)."""
    conf = configuration.load((), [*BASE, *overrides], process == AGGREGATE)
    needs = acls.needed(conf, [process], in_pod=True)
    found = acls.required(conf, [process])
    keys = [(acl.cluster, acl.operation, acl.resource) for acl in found]
    for need in needs:
        serving = [acl for acl in found if need in acl.needs]
        assert len(serving) == 1, need
        assert acls._implies((serving[0].cluster, serving[0].operation, serving[0].resource),
                             (need.cluster, need.operation, need.resource))
    for key in keys:
        assert not any(acls._implies(other, key) for other in keys if other != key), key


def test_cleanup_needs_nothing_that_run_has_not_but_to_delete_the_topics():
    everything = config(*GUARDED)
    run = [(a.cluster, a.operation, a.resource) for a in acls.required(everything, [RUN])]
    for acl in acls.required(everything, [CLEANUP]):
        if acl.condition == acls.WITH_TOPICS:
            assert acl.operation == "DELETE", acl
            continue
        assert any(acls._implies(key, (acl.cluster, acl.operation, acl.resource)) for key in run), acl


def test_a_read_or_write_implies_describe_and_alter_configs_implies_describe_configs():
    topic = acls.Resource(acls.TOPIC, "t")
    found = acls.acls([acls.Need(RUN, DESCRIBE, topic, "f", "Metadata", "x"),
                       acls.Need(RUN, READ, topic, "f", "Fetch", "y"),
                       acls.Need(RUN, DESCRIBE_CONFIGS, acls.Resource(acls.CLUSTER), "g", "DescribeConfigs", "z"),
                       acls.Need(RUN, ALTER_CONFIGS, acls.Resource(acls.CLUSTER), "g", "IncrementalAlterConfigs", "w"),
                       acls.Need(RUN, DESCRIBE_CONFIGS, topic, "h", "DescribeConfigs", "v")])
    assert [(a.operation, str(a.resource), [n.api for n in a.needs]) for a in found] == [
        ("ALTER_CONFIGS", "CLUSTER", ["IncrementalAlterConfigs", "DescribeConfigs"]),
        ("READ", "TOPIC t", ["Fetch", "Metadata"]),
        ("DESCRIBE_CONFIGS", "TOPIC t", ["DescribeConfigs"]),  # READ does not imply DESCRIBE_CONFIGS
    ]


def test_an_acl_on_one_cluster_implies_nothing_on_the_other():
    topic = acls.Resource(acls.TOPIC, "t")
    found = acls.acls([acls.Need(RUN, READ, topic, "f", "Fetch", "x", WATCHED),
                       acls.Need(RUN, DESCRIBE, topic, "f", "Metadata", "y", PIPELINE)])
    assert [(a.cluster, a.operation) for a in found] == [(WATCHED, READ), (PIPELINE, DESCRIBE)]


def test_an_unknown_process_is_refused():
    with pytest.raises(ValueError, match="status"):
        acls.needed(config(), ["status"])


# ---------------------------------------------------------------- the command

def invoke(*args):
    return CliRunner().invoke(main, ["acls", *args])


def commands(output):
    return [line for line in output.splitlines() if line.startswith("kafka-acls.sh")]


def sets(overrides):
    return [arg for pair in overrides for arg in ("--set", pair)]


def test_the_default_agent_gets_these_commands_each_after_what_needs_it():
    result = invoke("--principal", "User:quota-sidecar", *sets(BASE))
    assert result.exit_code == 0, result.output
    start = f"kafka-acls.sh --bootstrap-server {WATCHED_SERVERS} --add --allow-principal User:quota-sidecar"
    assert commands(result.output) == [
        f"{start} --operation Describe --cluster",
        f"{start} --operation AlterConfigs --cluster",
        f"{start} --operation Create --topic __quota_sidecar_state",
        f"{start} --operation Read --topic __quota_sidecar_state",
        f"{start} --operation Write --topic __quota_sidecar_state",
        f"{start} --operation Create --topic __quota_sidecar_observations",
        f"{start} --operation Write --topic __quota_sidecar_observations",
        f"{start} --operation Create --topic __quota_sidecar_decisions",
        f"{start} --operation Read --topic __quota_sidecar_decisions",
        f"{start} --operation Create --topic __quota_sidecar_heartbeats",
        f"{start} --operation Read --topic __quota_sidecar_heartbeats",
        f"{start} --operation Write --topic __quota_sidecar_heartbeats",
    ]
    lines = result.output.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("kafka-acls.sh"):
            assert lines[index - 1].startswith("# ") and "Without it: " in "\n".join(lines[index - 4:index])
    assert ("# disk protection: DescribeLogDirs of every broker: the volumes. Without it: every poll fails"
            in result.output)


def commented(output) -> list[tuple[str, list[str]]]:
    """Each kafka-acls command with the comment lines right above it."""
    found, comments = [], []
    for line in output.splitlines():
        if line.startswith("kafka-acls.sh"):
            found.append((line, comments))
        comments = comments + [line] if line.startswith("# ") and not line.startswith("# ----") else []
    return found


def test_what_the_agent_needs_once_it_knows_its_broker_says_so_in_the_commands_the_table_and_json():
    """A configuration without broker id (the chart's ConfigMap): the heartbeats' ACLs, each after the condition;
    the cordons' needs of ALTER_CONFIGS on CLUSTER, which the quotas need anyway, in their own lines."""
    result = invoke("--principal", "User:quota-sidecar", *sets(BASE))
    assert result.exit_code == 0, result.output
    assert "# 'Needed when': what depends on more than this configuration says" in result.output
    for command, comments in commented(result.output):
        when = [comment for comment in comments if comment.startswith("# Needed when")]
        assert when == ([f"# Needed when {acls.KNOWS_BROKER}."] if "heartbeats" in command else []), command
        if command.endswith("--operation AlterConfigs --cluster"):
            assert f"# cordoned log dirs, needed when {acls.KNOWS_BROKER}: IncrementalAlterConfigs" in "\n".join(
                comments)
    rows = invoke("--principal", "User:quota-sidecar", "-o", "table", *sets(BASE)).output.splitlines()
    beating = [row for row in rows if "`__quota_sidecar_heartbeats`" in row]
    assert len(beating) == 3 and all(f"| needed when {acls.KNOWS_BROKER}:<br>covering" in row for row in beating)
    assert not [row for row in rows if "needed when" in row and row not in beating and "cordoned" not in row]
    found = json.loads(invoke("--principal", "User:quota-sidecar", "-o", "json", *sets(BASE)).output)
    assert {acl["resource_name"] for acl in found if acl["condition"]} == {"__quota_sidecar_heartbeats"}
    assert all(need["condition"] == acls.KNOWS_BROKER for acl in found if acl["condition"] for need in acl["needs"])
    named = invoke("--principal", "User:quota-sidecar", *sets([*BASE, "broker.id=1"])).output
    assert "eeded when" not in named and len(commands(named)) == len(commands(result.output))


def test_the_pipelines_topics_are_granted_on_the_pipeline_cluster_and_star_is_quoted_and_explained():
    result = invoke("--principal", "User:agent", "--command-config", "admin client.properties", *sets(EVERYTHING))
    assert result.exit_code == 0, result.output
    listed = commands(result.output)
    assert all(f"--bootstrap-server {PIPELINE_SERVERS} " in line for line in listed if "__quota_sidecar_o" in line
               or "__quota_sidecar_d" in line)
    assert all(f"--bootstrap-server {WATCHED_SERVERS} " in line for line in listed if "--cluster" in line
               or "'*'" in line or "__quota_sidecar_state" in line)
    assert all("--command-config 'admin client.properties' " in line for line in listed)
    lines = result.output.splitlines()
    for index, line in enumerate(lines):
        if line.endswith("--topic '*'"):
            assert any("'*'" in comment for comment in lines[index - 6:index] if comment.startswith("# TOPIC '*': "))
        if line.endswith("--operation Alter --cluster"):
            assert lines[index - 1].startswith("# CAUTION: ALTER on CLUSTER also allows CreateAcls")


def test_status_and_plan_of_one_principal_name_the_process_of_each_need():
    result = invoke("--principal", "User:ops", "--for", "status-direct,plan", *sets(BASE))
    assert result.exit_code == 0, result.output
    assert "# status --direct: disk protection: DescribeLogDirs" in result.output
    assert "# plan: plan: DescribeLogDirs of the leaders" in result.output
    assert not [line for line in commands(result.output) if " --operation Create " in line or "Alter" in line]


def test_aggregator_flag_reads_an_aggregators_configuration():
    result = invoke("--principal", "User:aggregator", "--aggregator", "--set",
                    f"pipeline.bootstrap.servers={PIPELINE_SERVERS}")  # no storage limit: the aggregator needs none
    assert result.exit_code == 0, result.output
    assert len(commands(result.output)) == 4


def test_json_for_machines():
    result = invoke("--principal", "User:quota-sidecar", "-o", "json", *sets(EVERYTHING))
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert len(found) == len(acls.required(config(*GUARDED, *APART), [RUN]))
    alter = next(acl for acl in found if acl["operation"] == "ALTER")
    assert alter["resource_type"] == "CLUSTER" and alter["bootstrap_servers"] == WATCHED_SERVERS
    assert alter["caution"].startswith("ALTER on CLUSTER also allows CreateAcls")
    assert {need["api"].split(" ")[0] for need in alter["needs"]} >= {"DescribeLogDirs", "AlterPartitionReassignments"}


def test_the_old_flags_still_work_with_a_line_on_stderr():
    for flag, output in (("--table", "table"), ("--json", "json")):
        old = CliRunner().invoke(main, ["acls", "--principal", "User:a", flag, *sets(BASE)])
        new = CliRunner().invoke(main, ["acls", "--principal", "User:a", "-o", output, *sets(BASE)])
        assert (old.exit_code, old.stdout) == (0, new.stdout) and new.stderr == ""
        assert old.stderr == f"quota-sidecar: {flag} is deprecated and goes in the next release: use -o {output}\n"


@pytest.mark.parametrize("args, says", [
    (["--principal", "quota-sidecar"], "--principal 'quota-sidecar': expected Type:name, e.g. User:quota-sidecar"),
    (["--principal", ":quota-sidecar"], "expected Type:name"),
    (["--principal", "User:"], "expected Type:name"),
    (["--principal", "User:a", "--for", "run,status"], "--for status: expected one of run, aggregate, status-direct, "
                                                       "plan, cleanup"),
    (["--principal", "User:a", "-o", "json", "--apply"], "-o json and --apply: give one of them"),
    (["--principal", "User:a", "--apply"], "--apply needs --command-config FILE"),
    (["--principal", "User:a", "--apply", "--command-config", "/nonexistent/admin.properties"],
     "--command-config /nonexistent/admin.properties: cannot read configuration file"),
    (["--principal", "User:a", "--set", "storage.check.intervall=PT1S"], "storage.check.intervall is not a known key"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, says):
    result = invoke(*args, *sets(BASE))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and says in result.output, result.output


def test_the_least_privilege_page_has_the_table_of_every_process():
    """docs/least-privilege.md's table, made by `quota-sidecar acls --table` once per process when the site is built."""
    table = acl_table(*(acls.required(configuration.load((), EVERYTHING, p == AGGREGATE), [p]) for p in PROCESSES))
    assert site_pages().acl_table() == table


def test_apply_says_in_one_line_that_nothing_was_applied_when_the_cluster_cannot_be_reached(tmp_path):
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=PLAINTEXT\n")
    result = invoke("--principal", "User:a", "--apply", "--command-config", str(admin),
                    *sets(["kafka.admin.bootstrap.servers=no-such-host.invalid:9092", *BASE[1:]]))
    assert result.exit_code == 1
    assert result.output == ("quota-sidecar: nothing applied: cannot reach any bootstrap server "
                             "no-such-host.invalid:9092 (host not found)\n"), result.output


def test_cleanup_names_what_it_needs_beyond_its_configuration_with_the_condition():
    """The configuration cleanup is given may not say the agents throttled replication; its --topics is a flag."""
    printed = conditions(config(), CLEANUP)
    assert printed[(ALTER_CONFIGS, "TOPIC *")] == acls.THROTTLED
    assert printed[("DELETE", "TOPIC __quota_sidecar_state")] == acls.WITH_TOPICS
    assert printed[(ALTER_CONFIGS, "CLUSTER")] is None and printed[(READ, "TOPIC __quota_sidecar_state")] is None
    assert conditions(config(*REPLICATION), CLEANUP)[(ALTER_CONFIGS, "TOPIC *")] is None
