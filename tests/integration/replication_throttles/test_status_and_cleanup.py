"""`status --direct` reads the cluster and writes nothing; `run --cleanup` leaves the cluster as it found it,
but for a value someone changed after the sidecar wrote it (on Kafka 3.9 in ZooKeeper mode too, with the znode
volumes and the records in ZooKeeper); with `replication.cleanup.foreign.after`, rates other tools left go.
"""

from __future__ import annotations

import json
import time

import pytest

from harness.cluster.local_cluster import LocalKafkaCluster
from harness.agents.replication_checks import (RATE_KEYS, REACTION, TOKEN, broker_configs, cli, assert_equal, eventually,
                                        sidecar_properties)
from harness.agents.sidecar_process import SidecarProcess, http
from harness.cluster.zookeeper_server import children
from quota_sidecar.act.zookeeper_store import ZooKeeperStore
from quota_sidecar.configuration.properties import SIDECAR_CLIENT_ID
from quota_sidecar.decide.cordons import KEY as CORDONED
from quota_sidecar.decide.quotas import PRODUCE
from quota_sidecar.decide.throttles import FOLLOWER_RATE, LEADER_RATE
from quota_sidecar.kafka_clients.admin import ClusterAdmin
from quota_sidecar.observe.znode_volumes import VOLUMES_PATH
from quota_sidecar.observe.zookeeper_session import ZooKeeperSession

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]


def test_opt_in_clears_rates_other_tools_left_once_no_move_was_seen_for_a_while(
        settled, cluster, admin, pipeline, work_dir, report):
    """`replication.cleanup.foreign.after`: rates a finished `kafka-reassign-partitions --throttle` left on
    broker 2 go after that long without a move; without the setting (the fleet's sidecars) they stay."""
    leftovers = {LEADER_RATE: 123_456, FOLLOWER_RATE: 654_321}
    admin.incremental_alter_configs("broker", 2, {key: ("SET", str(rate)) for key, rate in leftovers.items()})
    time.sleep(5)  # several passes of the fleet's sidecar 2, which must not touch them
    assert broker_configs(admin, 2) == leftovers

    sweeper = SidecarProcess("sidecar-2-clearing-foreign-rates", work_dir, sidecar_properties(
        cluster, 2, pipeline, {"replication_cleanup_foreign_after": "PT3S"}))
    report.sources.append(sweeper)
    try:
        sweeper.start(cleanup=True).wait_ready()
        eventually(lambda: assert_equal(broker_configs(admin, 2), {}))
    finally:
        assert sweeper.stop() == 0


@pytest.mark.both_generations
def test_status_direct_writes_nothing_and_cleanup_leaves_the_cluster_as_found_but_for_a_changed_value(
        settled, cluster, admin, store, pipeline, work_dir, report):
    """The real CLI against the real cluster, one sidecar beside broker 2 in place of the fleet: a limit every
    volume is below (the default user throttled, its quota of 5000 replaced), a broker override on broker 2;
    on Kafka 4.4 it cordons broker 2's dir; on Kafka 3.9 in ZooKeeper mode it publishes its znode volumes and
    keeps its records in ZooKeeper. An operator then sets broker 2's leader rate by hand. `status --direct`
    shows what is in force and writes nothing; `--cleanup` puts everything back but the operator's rate."""
    fleet = settled
    assert fleet.stop() == {1: 0, 2: 0, 3: 0}
    in_zookeeper = {} if not cluster.zookeeper_mode else {
        "zookeeper_connect": cluster.zookeeper_connect, "state_store": "zookeeper",
        "storage_local_log_dirs": ",".join(cluster.log_dirs(2)), "storage_local_watch_interval": "PT0S"}
    sidecar = SidecarProcess("sidecar-2-status-and-cleanup", work_dir, sidecar_properties(cluster, 2, pipeline, {
        "storage_per_volume_limit_min_available_bytes": str(1 << 50), "produce": "4000000", **in_zookeeper}))
    report.sources.append(sidecar)
    records = ZooKeeperStore(ZooKeeperSession(cluster.zookeeper_connect, 10.0)) if cluster.zookeeper_mode else store
    admin.alter_user_quotas({None: {PRODUCE: 5000.0}})
    # On KRaft a broker applies the quota a moment after the controller answered: the snapshot waits for it.
    eventually(lambda: assert_equal(admin.describe_user_quotas([None])[None], {PRODUCE: 5000.0}))
    found = _as_found(admin, records, cluster)
    try:
        sidecar.start(cleanup=True).wait_ready()
        assert http("PUT", sidecar.url + "/throttle/2", {"rate": 2_000_002}, TOKEN)[0] == 200
        rates = {LEADER_RATE: 2_000_002, FOLLOWER_RATE: 2_000_002}
        eventually(lambda: assert_equal(broker_configs(admin, 2), rates))
        eventually(lambda: assert_equal(admin.describe_user_quotas([None])[None], {PRODUCE: 1.0}))
        if not cluster.zookeeper_mode:  # cordoned.log.dirs is Kafka 4.3's
            eventually(lambda: assert_equal(admin.describe_configs("broker", [2], [CORDONED])["2"],
                                      {CORDONED: cluster.log_dirs(2)[0]}))
        else:
            assert children(cluster.zookeeper_connect, VOLUMES_PATH) == ["2"]
        running = _as_found(admin, records, cluster)

        done = cli("status", "--direct", "-o", "json", "--config", str(sidecar.config_path))
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        assert _as_found(admin, records, cluster) == running, "status --direct wrote to the cluster"
        assert status["sidecar"]["mode"].startswith("direct") and status["throttle"]["factor"] == 0.0, status
        assert {(v["broker_id"], v["log_dir"]) for v in status["volumes"]} == {
            (b, d) for b in cluster.broker_ids for d in cluster.log_dirs(b)}
        assert {v["state"] for v in status["volumes"]} == {"VIOLATED"}
        if cluster.zookeeper_mode:  # DescribeLogDirs and, beside it, what sidecar 2 published
            assert [v["broker_id"] for v in status["volumes"] if v["published_available_bytes"]] == [2], status
        assert {row["entity"]: row[PRODUCE] for row in status["quotas_in_force"]} == {
            "<default user>": 1, f"client-id {SIDECAR_CLIENT_ID} (sidecar)": 1_000_000}  # no principal: not unlimited
        (row,) = status["replication"]["brokers"]
        assert (row["leader_rate"], row["follower_rate"], row["reason"]) == (2_000_002, 2_000_002, "broker_override")

        admin.incremental_alter_configs("broker", 2, {LEADER_RATE: ("SET", "777777")})  # an operator, by hand
        sidecar.wait_for_line(f"{LEADER_RATE}: 777777 in force, changed by someone else", REACTION)
        assert sidecar.stop() == 0  # --cleanup
        after = _as_found(admin, records, cluster)
        assert after["brokers"][2] == {**found["brokers"][2], LEADER_RATE: "777777"}, after["brokers"]
        assert [key for key in after["records"] if json.loads(key)[0] != "override"] == [], after["records"]
        assert {**after, "brokers": found["brokers"], "records": found["records"]} == found
    finally:
        sidecar.stop()
        admin.incremental_alter_configs("broker", 2, {LEADER_RATE: ("DELETE", None)})
        admin.alter_user_quotas({None: {PRODUCE: None}})
        for key in records.read_all():
            records.delete(key)  # the override, the operator's
        if records is not store:
            records.close()
        fleet.start()


def _as_found(admin: ClusterAdmin, records, cluster: LocalKafkaCluster) -> dict:
    """What a sidecar may change, as an operator reads it: quotas, broker configs, records, published znodes."""
    keys = [*RATE_KEYS, *([] if cluster.zookeeper_mode else [CORDONED])]
    return {"quotas": admin.describe_user_quotas([None, (None, SIDECAR_CLIENT_ID)]),
            "brokers": {b: admin.describe_configs("broker", [b], keys)[str(b)] for b in cluster.broker_ids},
            "records": records.read_all(),
            "znodes": children(cluster.zookeeper_connect, VOLUMES_PATH) if cluster.zookeeper_mode else None}
