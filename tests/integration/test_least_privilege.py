"""Least privilege: an agent and the aggregator on a cluster with Kafka's StandardAuthorizer, over
SCRAM-SHA-512 and TLS (tests/harness/cluster/secure_lab.py), their pipeline on that cluster, each principal granted exactly
the ACLs `quota-sidecar acls` prints for it and nothing more: disk protection, cordons, replication throttles, the
disk guard, status and clean-up work, and nothing is refused. With any one of the agent's ACLs taken away, it says in
one line which permission was refused and what stops without it, and what does not need that ACL goes on.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timezone

import pytest

from harness.spark.aggregator import Aggregator
from harness.cluster.kafka_tools import kafka_configs, reassign_partitions
from harness.agents.move_guard_lab import BROKER_PROPERTIES, SETTINGS as GUARD_SETTINGS, SLOW_GUARD, VOLUME, FreeSpace, fill
from harness.agents.replication_checks import broker_configs, create_topic
from harness.cluster.secure_lab import LAB_ADMIN, SecureLab, grant, revoke
from harness.agents.sidecar_process import EXECUTABLE, SidecarProcess
from harness.waiting import eventually
from quota_sidecar.configuration.properties import ADMIN_PREFIX, PREFIX
from quota_sidecar.decide.cordons import KEY as CORDONED_LOG_DIRS
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.decide.throttles import FOLLOWER_RATE, LEADER_RATE
from quota_sidecar.observe.admin import ClusterAdmin
from quota_sidecar.pipeline.topics import HEARTBEATS_TOPIC

pytestmark = [pytest.mark.integration]

MiB = 1 << 20
AGENT, AGGREGATOR = "quota-sidecar", "quota-sidecar-aggregator"
PASSWORDS = {AGENT: "s3cret-agent", AGGREGATOR: "s3cret-aggregator"}


def printed(process: SidecarProcess, principal: str, processes: str) -> list[dict]:
    """The ACLs `quota-sidecar acls --json` prints for what `process` runs."""
    answer = subprocess.run([str(EXECUTABLE), "acls", "--principal", f"User:{principal}", "--for", processes,
                             "--config", str(process.config_path), "--json"], capture_output=True, text=True,
                            timeout=60)
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


def least_privileged(make_kafka_cluster, tmp_path, agent_runs: str, brokers: int = 1,
                     agent_settings: dict | None = None, in_pod: bool = False, **cluster_options):
    """A secure cluster of `brokers`, the aggregator and an agent beside each broker, each principal granted exactly
    what `quota-sidecar acls` prints for it (the agents: `agent_runs`); none started. `agent_settings` (keys without
    the prefix) replace the default (every volume violates, a pass every 2 s) and have each agent watch its broker's
    log dirs. `in_pod`: as in a broker pod, the agent reads its broker's node.id and log.dirs from a server.properties
    of their own (a first --config), and the ACLs are printed for its file alone, which names neither. (cluster, the
    agents in broker order, the aggregator, the agents' ACLs, the agents' client properties for Kafka's own tools)."""
    security = SecureLab(tmp_path / "tls", scram_users=PASSWORDS)
    cluster = make_kafka_cluster(brokers=brokers, security=security, **cluster_options)
    secure = cluster.secure_bootstrap_servers()
    # The agent as a Python client names its CA file; the aggregator's Java clients a PEM truststore.
    agent_client = security.sasl_ssl_properties(secure, AGENT)
    aggregator_client = security.java_client_properties(secure, AGGREGATOR)
    aggregator = Aggregator(secure, tmp_path / "aggregator",
                            **{ADMIN_PREFIX + key: value for key, value in aggregator_client.items()})
    settings = agent_settings or {"storage.per.volume.limit.min.available.ratio": "1.0",  # every volume violates
                                  "storage.check.interval": "PT2S"}
    agents = []
    for broker in sorted(cluster.broker_ids):
        server_properties = tmp_path / f"server-{broker}.properties"  # the broker's own, read first in its pod
        if in_pod:
            server_properties.write_text(f"node.id={broker}\nlog.dirs={','.join(cluster.log_dirs(broker))}\n")
        agents.append(SidecarProcess("least-privilege" if brokers == 1 else f"least-privilege-{broker}", tmp_path, {
            **{PREFIX + ADMIN_PREFIX + key: value for key, value in agent_client.items()},
            **{PREFIX + key: value for key, value in settings.items()},
            **({} if in_pod else {PREFIX + "broker.id": str(broker)}),
            **({"log.dirs": ",".join(cluster.log_dirs(broker))} if agent_settings and not in_pod else {}),
            # The aggregator's writes are no client's: a principal of its own is never throttled, as the README says.
            PREFIX + "excluded.principal.name.list": f"User:{AGGREGATOR}"},
            configs=[server_properties] if in_pod else ()))
    # Granted as an operator would: `acls --apply` as their admin over the secure listener, twice (nothing twice).
    # Every agent runs as one principal with the same keys: the first one's ACLs are all of theirs.
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text("".join(f"{key}={value}\n" for key, value in security.sasl_ssl_properties(
        secure, LAB_ADMIN).items() if key != "bootstrap.servers"))
    agent = agents[0]
    agent_acls = printed(agent, AGENT, agent_runs)
    for process, principal, runs in ((aggregator.process, AGGREGATOR, "aggregate"), (agent, AGENT, agent_runs)):
        acls = agent_acls if process is agent else printed(process, principal, runs)
        assert applied(process, principal, runs, admin_config) == ["created"] * len(acls)
        assert applied(process, principal, runs, admin_config) == ["already there"] * len(acls)
    java_tools = tmp_path / "agent-java.properties"  # the agent's settings as Kafka's own tools spell them
    java_tools.write_text("".join(f"{key}={value}\n" for key, value in
                                  security.java_client_properties(secure, AGENT).items() if key != "bootstrap.servers"))
    return cluster, tuple(agents), aggregator, agent_acls, java_tools


def applied(process: SidecarProcess, principal: str, processes: str, admin_config) -> list[str]:
    """What `quota-sidecar acls --apply` did with each ACL, as it says."""
    answer = subprocess.run([str(EXECUTABLE), "acls", "--principal", f"User:{principal}", "--for", processes,
                             "--config", str(process.config_path), "--apply", "--command-config", str(admin_config)],
                            capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0 and "password" not in answer.stdout + answer.stderr, answer.stdout + answer.stderr
    return [line.split(":")[0] for line in answer.stdout.splitlines()]


def test_with_exactly_the_printed_acls_the_agent_and_aggregator_throttle_cordon_show_and_clean_up(
        make_kafka_cluster, tmp_path):
    cluster, (agent,), aggregator, _, java_tools = least_privileged(make_kafka_cluster, tmp_path, "run,cleanup")
    lab = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})  # the super user, to check
    try:
        aggregator.start().wait_ready()
        agent.start(cleanup=True).wait_ready()
        eventually(lambda: lab.describe_user_quotas([None])[None].get(PRODUCE) == 1.0, 120, "the throttle written")
        # Kafka's own kafka-configs, over the same TLS and SCRAM settings, sees what the agent wrote.
        described = kafka_configs(cluster.secure_bootstrap_servers(), "--command-config", str(java_tools), "--describe",
                                  "--entity-type", "users", "--entity-default")
        assert "producer_byte_rate=1.0" in described, described
        (log_dir,) = cluster.log_dirs(1)
        eventually(lambda: lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
                   == log_dir, 60, "the violating dir cordoned")
        status = agent.status()
        assert status["throttle"]["factor"] == 0.0 and status["throttle"]["last_error"] is None, status
        assert agent.stop() == 0  # --cleanup
        assert lab.describe_user_quotas([None])[None] == {}
        assert not lab.describe_configs("broker", [1], [CORDONED_LOG_DIRS])["1"].get(CORDONED_LOG_DIRS)
        for process in (agent, aggregator.process):
            logged = process.log_path.read_text()
            assert "AUTHORIZATION" not in logged.upper() and "Traceback" not in logged, process.log_tail()
            assert not any(password in logged for password in PASSWORDS.values())
    finally:
        agent.stop()
        aggregator.stop()
        lab.close()


def test_granted_what_acls_prints_without_the_brokers_properties_the_agents_in_their_pods_beat_and_cover(
        make_kafka_cluster, tmp_path):
    """As the chart runs them: the ACLs printed for the sidecar's own properties, which name no broker id and no log
    dirs, and the agents run with their broker's server.properties as well, so they know their broker. They beat on
    the heartbeats topic and read each other's beats; with broker 2's agent stopped, broker 1's covers broker 2.
    Nothing is refused."""
    cluster, (agent_1, agent_2), aggregator, agent_acls, _ = least_privileged(
        make_kafka_cluster, tmp_path, "run", brokers=2, in_pod=True)
    try:
        aggregator.start().wait_ready()
        for agent in (agent_1, agent_2):
            agent.start().wait_ready()
        for agent, other in ((agent_1, agent_2), (agent_2, agent_1)):
            eventually(lambda: {"1", "2"} <= set(agent.status()["cover"]["agents_heard"]), 30,
                       f"{agent.name} reads its own beats and {other.name}'s")
        # An agent covers the brokers its last decided pass saw: none before the first decision.
        eventually(lambda: agent_1.status()["throttle"]["last_success"] is not None, 180, "a first decision")
        stopped = time.monotonic()
        assert agent_2.stop() == 0
        agent_1.wait_for_line(r"covering broker 2: no heartbeat", timeout=60, after=stopped)
        eventually(lambda: agent_1.status()["cover"]["covering"] == [2], 30, "its status says so at its next pass")
        for process in (agent_1, agent_2, aggregator.process):
            logged = process.log_path.read_text()
            assert "refused" not in logged and "AUTHORIZATION" not in logged.upper() and "Traceback" not in logged, \
                process.log_tail()
    finally:
        agent_1.stop()
        agent_2.stop()
        aggregator.stop()
    # Printed for a configuration that does not name the broker: with the condition they depend on.
    beating = [acl for acl in agent_acls if acl["resource_name"] == HEARTBEATS_TOPIC]
    assert {acl["operation"] for acl in beating} == {"CREATE", "READ", "WRITE"}, agent_acls
    assert all("node.id" in acl["condition"] for acl in beating), beating


# What a pass needs to decide and write at all: without one of these the throttle waits for the permission.
DECIDING = {"disk protection", "the sidecars' records", "the aggregator's decisions"}


def refused_as(acl: dict, permission: str) -> bool:
    """Whether a refusal's permission ("DESCRIBE or READ on TOPIC t") is one taking `acl` away refuses: its own, or
    one it implies (DESCRIBE_CONFIGS for ALTER_CONFIGS)."""
    operations, _, resources = permission.partition(" on ")
    resource = "CLUSTER" if acl["resource_type"] == "CLUSTER" else f"TOPIC {acl['resource_name']}"
    allowed = {acl["operation"]} | {need["operation"] for need in acl["needs"]}
    return bool(allowed & set(operations.split(" or "))) and resource in resources.split(" or ")


@pytest.mark.security
def test_each_acl_taken_away_is_one_line_naming_it_and_what_stops_and_the_rest_goes_on(make_kafka_cluster, tmp_path):
    cluster, (agent,), aggregator, agent_acls, _ = least_privileged(make_kafka_cluster, tmp_path, "run")
    lab = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})  # the super user
    try:
        aggregator.start().wait_ready()
        agent.start().wait_ready()
        eventually(lambda: lab.describe_user_quotas([None])[None].get(PRODUCE) == 1.0, 120, "the throttle written")
        started = time.monotonic()
        for n, acl in enumerate(agent_acls):
            taken = f"{acl['operation']} on {acl['resource_type']} {acl['resource_name']}"
            revoke(cluster.bootstrap_servers, [acl])
            if acl["operation"] == "CREATE":  # the agent ensures its topics when it starts
                agent.stop()
                agent.start()
            # A tenant with a rate of its own appears: throttling it is a write, recorded first.
            tenant = f"tenant-{n}"
            lab.alter_user_quotas({tenant: {PRODUCE: 5_000_000.0}})
            refusal = eventually(lambda: next((r for r in agent.get("/status")["refused"]
                                               if refused_as(acl, r["permission"])), None)
                                 if agent.get("/status") else None, 60, f"{taken} refused, said in status")
            line = refusal["line"]
            assert "refused for User:quota-sidecar" in line, line
            for need in acl["needs"]:
                assert f"{need['feature']}: {need['without']}" in line, (taken, line)
            logged = agent.log_path.read_text()
            assert line in logged and "Traceback" not in logged, agent.log_tail()
            if not DECIDING & {need["feature"] for need in acl["needs"]}:  # the throttle does not need it: it goes on
                eventually(lambda: lab.describe_user_quotas([tenant])[tenant].get(PRODUCE, 5e6) < 5e6, 30,
                           f"{tenant} throttled without {taken}")
            grant(cluster.bootstrap_servers, [acl])
            eventually(lambda: lab.describe_user_quotas([tenant])[tenant].get(PRODUCE, 5e6) < 5e6
                       and agent.status()["throttle"]["last_error"] is None, 90, f"all well again with {taken}")
        logged = agent.log_path.read_text()
        assert not any(password in logged for password in PASSWORDS.values())
        # No retry storm: a line per pass (PT2S) at most, from the poll and from the heartbeats' thread.
        lines = sum("refused for User:quota-sidecar" in line for line in logged.splitlines())
        assert lines <= 2 * ((time.monotonic() - started) / 2 + len(agent_acls)), lines
    finally:
        agent.stop()
        aggregator.stop()
        lab.close()


@pytest.mark.security
def test_a_read_or_write_taken_from_the_aggregator_is_one_line_naming_it_and_decisions_resume_when_granted(
        make_kafka_cluster, tmp_path):
    """Spark's Kafka source (READ on the observations) and sink (WRITE on the decisions) refused while the aggregator
    runs: each micro-batch's failure is one WARNING naming the permission and what stops, no traceback; granted
    again, the agents get decisions again."""
    cluster, (agent,), aggregator, _, _ = least_privileged(make_kafka_cluster, tmp_path, "run")
    query_acls = [acl for acl in printed(aggregator.process, AGGREGATOR, "aggregate")
                  if acl["operation"] in ("READ", "WRITE")]
    assert len(query_acls) == 2, query_acls
    try:
        aggregator.start().wait_ready()
        agent.start().wait_ready()
        eventually(lambda: agent.status()["throttle"]["last_error"] is None, 120, "the agent's first decision")
        for acl in query_acls:
            taken = f"{acl['operation']} on TOPIC {acl['resource_name']}"
            revoke(cluster.bootstrap_servers, [acl])

            def said():
                return next((line for line in aggregator.process.log_path.read_text().splitlines()
                             if f"refused for User:{AGGREGATOR}" in line and acl["resource_name"] in line), None)

            line = eventually(said, 120, f"{taken} refused, said by the aggregator")
            assert f"{acl['operation']} on TOPIC {acl['resource_name']}" in line and \
                "the aggregator: every micro-batch fails" in line, line
            grant(cluster.bootstrap_servers, [acl])
            granted_at = datetime.now(timezone.utc)
            eventually(lambda: _decided_since(agent, granted_at), 120, f"a decision again with {taken} granted")
        logged = aggregator.process.log_path.read_text()
        assert "Traceback" not in logged and not any(password in logged for password in PASSWORDS.values())
    finally:
        agent.stop()
        aggregator.stop()


def _decided_since(agent: SidecarProcess, moment: datetime) -> bool:
    last = agent.status()["throttle"]["last_success"]
    return last is not None and datetime.fromisoformat(last) > moment


@pytest.mark.security
def test_with_exactly_the_printed_acls_a_move_is_throttled_and_the_guard_cancels_it_before_the_disk_fills(
        make_kafka_cluster, tmp_path):
    """Replication throttles and the disk guard under the authorizer: Kafka's reassign tool (run by the lab's super
    user) moves a partition larger than broker 2's free space onto it; the agents, with exactly the ACLs printed for
    them, throttle the move on both brokers, broker 2's guard (at a rate an operator chose to slow moves rather than
    hold them) cancels it before the volume fills, and their clean-up leaves no config of theirs. Nothing is
    refused."""
    settings = {**GUARD_SETTINGS, "replication.disk.guard.rate.bytes.per.second": str(SLOW_GUARD)}
    cluster, (agent_1, agent_2), aggregator, _, _ = least_privileged(
        make_kafka_cluster, tmp_path, "run,cleanup", brokers=2, agent_settings=settings,
        small_log_dirs={(2, 0): VOLUME}, broker_properties=BROKER_PROPERTIES)
    lab = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})  # the super user, to check
    topic, (small_dir,) = "moved", cluster.log_dirs(2)
    create_topic(cluster, topic, {0: [1]})
    fill(cluster, topic, VOLUME + 40 * MiB, tmp_path / "fill.log")
    try:
        aggregator.start().wait_ready()
        for agent in (agent_1, agent_2):
            agent.start(cleanup=True).wait_ready()
        with FreeSpace(small_dir) as free_space:
            done = reassign_partitions(cluster.bootstrap_servers, {(topic, 0): [2]}, "--execute")
            assert done.returncode == 0, done.stderr or done.stdout
            eventually(lambda: FOLLOWER_RATE in broker_configs(lab, 2) and LEADER_RATE in broker_configs(lab, 1), 30,
                       "the move throttled on both brokers")
            eventually(lambda: lab.list_reassignments() == [], 300, "the move cancelled")
        assert free_space.lowest > 0, "the volume filled"
        eventually(lambda: lab.describe_partitions([topic])[(topic, 0)].replicas == (1,), 10, "back on broker 1")
        assert "cancelled the moves adding replicas to" in agent_2.log_path.read_text(), agent_2.log_tail()
        for agent in (agent_1, agent_2):
            assert agent.stop() == 0  # --cleanup
        eventually(lambda: [broker_configs(lab, broker) for broker in (1, 2)] == [{}, {}], 60, "nothing of theirs left")
        for process in (agent_1, agent_2, aggregator.process):
            logged = process.log_path.read_text()
            assert "AUTHORIZATION" not in logged.upper() and "Traceback" not in logged, process.log_tail()
            assert not any(password in logged for password in PASSWORDS.values())
    finally:
        for agent in (agent_1, agent_2):
            agent.stop()
        aggregator.stop()
        lab.close()
