"""`quota-sidecar cleanup`, as an uninstall runs it: agents stopped as a pod stops them (SIGTERM, no --cleanup)
left their throttles in force, and a fresh process hands back what every one of them set, but for a value an
operator changed since; a second run finds nothing to do. Kafka's own kafka-configs reads what is left.
"""

from __future__ import annotations

import time

import pytest

from harness.cluster.kafka_tools import kafka_configs
from harness.agents.replication_checks import (RATE_KEYS, TOKEN, broker_configs, broker_down, cli,
                                        create_topic, assert_equal, eventually, lists, produce, sidecar_properties)
from harness.agents.sidecar_process import SidecarFleet, http
from quota_sidecar.decide.cordons import KEY as CORDONED
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]

EVERY_VOLUME = str(1 << 50)  # a limit every volume is below: producers throttled, dirs cordoned
TENANT_RATE, OPERATORS_RATE, DEFAULT_RATE = 1e9, 2e9, 5000.0


def test_cleanup_hands_back_what_every_stopped_agent_left_but_a_value_changed_since(
        settled, cluster, admin, store, pipeline, work_dir, report, unique_name):
    """Agents beside brokers 1-3 throttle every producer (the default user's 5000 B/s and tenant alice's own 1e9
    replaced by 1 B/s), cordon broker 1's dir, throttle a move T-0 [1, 2] -> [2, 3] and apply an override on
    broker 2; agents 2 and 3 stop without handing back (agent 1 runs on, as in an uninstall's pre-delete hook), and
    the operator raises alice's quota to 2e9. `cleanup --dry-run` changes nothing; `cleanup` leaves only the
    operator's 2e9 and the quotas as they were before, and agent 1 writes nothing more; again, nothing to do."""
    fleet, topic, alice = settled, unique_name, f"{unique_name}-alice"
    assert fleet.stop() == {1: 0, 2: 0, 3: 0}
    (work_dir / "uninstall").mkdir(exist_ok=True)
    agents = SidecarFleet(cluster.broker_ids, work_dir / "uninstall", lambda broker: sidecar_properties(
        cluster, broker, pipeline, {"storage_per_volume_limit_min_available_bytes": EVERY_VOLUME,
                                    "storage_cordon_log_dirs": str(broker == 1).lower()}))
    report.sources += list(agents)
    create_topic(cluster, topic, {0: [1, 2]})
    produce(cluster, topic, [0])  # before the default user's quota: at 5000 B/s it would take ten minutes
    admin.alter_user_quotas({None: {PRODUCE: DEFAULT_RATE}, alice: {PRODUCE: TENANT_RATE}})
    eventually(lambda: assert_equal(admin.describe_user_quotas([None, alice]),
                             {None: {PRODUCE: DEFAULT_RATE}, alice: {PRODUCE: TENANT_RATE}}))
    before = _left(cluster)
    try:
        agents.start(cleanup=False)
        assert http("PUT", agents[2].url + "/throttle/2", {"rate": 2_000_002}, TOKEN)[0] == 200
        with broker_down(cluster, 3):
            admin.alter_reassignments({(topic, 0): [2, 3]})
            eventually(lambda: assert_equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2"}))
        eventually(lambda: assert_equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3"}))
        eventually(lambda: assert_equal(set(broker_configs(admin, 3)), {FOLLOWER_RATE}))  # 1 B/s: its disk is "full"
        eventually(lambda: assert_equal(broker_configs(admin, 2), {LEADER_RATE: 2_000_002, FOLLOWER_RATE: 2_000_002}))
        eventually(lambda: assert_equal(admin.describe_user_quotas([None, alice]), {None: {PRODUCE: 1.0},
                                                                             alice: {PRODUCE: 1.0}}))
        eventually(lambda: assert_equal(admin.describe_configs("broker", [1], [CORDONED])["1"],
                                 {CORDONED: cluster.log_dirs(1)[0]}))
        assert agents.stop([2, 3]) == {2: 0, 3: 0}  # as a pod stops: nothing handed back; agent 1 runs on
        admin.alter_user_quotas({alice: {PRODUCE: OPERATORS_RATE}})  # an operator, meanwhile
        eventually(lambda: assert_equal(admin.describe_user_quotas([alice]), {alice: {PRODUCE: OPERATORS_RATE}}))
        in_force = _left(cluster)
        config = str(agents[1].config_path)

        rehearsed = cli("cleanup", "--dry-run", "--config", config)
        assert rehearsed.returncode == 0, rehearsed.stderr
        assert "producer_byte_rate: 1 -> 5000" in rehearsed.stdout, rehearsed.stdout
        assert _left(cluster) == in_force and store.read_all(), "the dry run changed the cluster"

        done = cli("cleanup", "--config", config)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "changed by someone else" in done.stdout, done.stdout  # alice's 2e9
        assert list(store.read_all()) == ['["cleanup"]'], "the overrides and cancelled moves are forgotten too"
        agents[1].wait_for_line("this agent writes nothing more", 30)
        time.sleep(5)  # passes every 3 s: none writes again
        after = _left(cluster)
        (operators,) = [key for key in after["users"] if f"'{alice}'" in key]
        assert after["users"][operators] == f"{PRODUCE}=2.0E9", after  # Java's Double.toString
        assert after == {**before, "users": {**before["users"], operators: after["users"][operators]}}
        assert lists(admin, topic) == {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()}

        again = cli("cleanup", "--config", config)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == "no record of the sidecars in the cluster: nothing to hand back", again.stdout
        assert agents.stop([1]) == {1: 0}
    finally:
        agents.stop()
        store.delete('["cleanup"]')  # the next tests' agents start after it and would read past it all the same
        admin.alter_reassignments({(topic, 0): None} if admin.list_reassignments() else {})
        admin.alter_user_quotas({None: {PRODUCE: None}, alice: {PRODUCE: None}})
        for broker in cluster.broker_ids:
            admin.incremental_alter_configs("broker", broker, {key: ("DELETE", None) for key in (*RATE_KEYS,
                                                                                                 CORDONED)})
        fleet.start()


def _left(cluster) -> dict:
    """The client quotas of every user and client id (entity -> its quotas), and the brokers' rates and cordons, as
    kafka-configs describes them."""
    described = {}
    for kind in ("users", "clients"):
        found = kafka_configs(cluster.bootstrap_servers, "--describe", "--entity-type", kind).splitlines()
        described[kind] = dict(line.strip().partition(" are ")[::2] for line in found if " are " in line)
    brokers = {broker: kafka_configs(cluster.bootstrap_servers, "--describe", "--entity-type", "brokers",
                                     "--entity-name", str(broker)) for broker in cluster.broker_ids}
    return {**described, "brokers": {broker: sorted(line.strip() for line in text.splitlines()[1:]
                                                    if any(key in line for key in (*RATE_KEYS, CORDONED)))
                                     for broker, text in brokers.items()}}
