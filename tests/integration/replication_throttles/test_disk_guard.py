"""The disk guard with real sidecars on a cluster of the test's own: a move into a nearly full volume is paused
until space is freed; KIP-956 remote quotas are set, lifted on the violating broker and cleaned up.

The move is held with its source down (tests/integration/replication_throttles/test_move_throttles.py says why).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from harness.cluster.local_cluster import SmallFilesystemUnavailable
from harness.agents.replication_checks import (BROKER_PROPERTIES, broker_configs, broker_down, cli, create_topic,
                                        delete_topic, assert_equal, eventually, fleet_of, lists, moving, produce)
from quota_sidecar.common.observation import UNLIMITED
from quota_sidecar.decide.throttles import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, REMOTE_COPY,
                                            REMOTE_FETCH)
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]


def test_disk_guard_pauses_a_move_into_a_nearly_full_volume_and_remote_quotas_come_and_go(
        make_kafka_cluster, pipeline, work_dir, report, unique_name, request):
    """Broker 2's only log dir is a 32 MiB filesystem with less than the 24 MiB the limit wants free.
    (Three brokers: stopping one of two would leave the KRaft quorum without a majority.)

    A move into it gets follower rate 1 (the guard) from its first fetch and stays where it is while the
    source would send megabytes a second; once space is freed the guard lifts and the move completes.
    KIP-956 quotas: set on both brokers, the copy quota lifted on the violating one, and on clean-up
    removed, or put back to what an operator had set.

    Cordoning is off here: on Kafka 4.3+ a sidecar cordons the violating dir, and Kafka then refuses a move
    into a broker whose every dir is cordoned. The guard is for moves that started before the dir
    violated, brokers older than 4.3, and the opt-out.
    """
    try:
        cluster = make_kafka_cluster(brokers=3, small_log_dirs={(2, 0): 32 << 20},
                                     broker_properties={**BROKER_PROPERTIES, "log.segment.delete.delay.ms": "1000"})
    except SmallFilesystemUnavailable as unavailable:
        pytest.skip(str(unavailable))
    limit = 24 << 20
    moved, filler = f"{unique_name}-moved", f"{unique_name}-filler"
    create_topic(cluster, moved, {0: [1]})
    create_topic(cluster, filler, {0: [2]})
    produce(cluster, moved, [0])
    produce(cluster, filler, [0], size=12 << 20)  # before the sidecars: their quotas would stop it
    admin = ClusterAdmin({"bootstrap_servers": cluster.bootstrap_servers.split(",")})
    request.addfinalizer(admin.close)
    (small,) = admin.describe_volumes([2], datetime.now(timezone.utc))
    assert small.available_bytes < limit, f"the filler did not fill broker 2's volume: {small}"
    admin.incremental_alter_configs("broker", 1, {REMOTE_FETCH: ("SET", "1234567")})  # an operator's
    (work_dir / unique_name).mkdir()
    fleet = fleet_of(cluster, pipeline, work_dir / unique_name, report,
                  storage_per_volume_limit_min_available_bytes=str(limit),
                  replication_capacity_bytes_per_second="10000000",
                  replication_min_rate_bytes_per_second="2000000",
                  remote_copy_max_bytes_per_second="5000000",
                  remote_fetch_max_bytes_per_second="6000000",
                  remote_copy_lift_on_violation="true",
                  storage_cordon_log_dirs="false")
    try:
        fleet.start()
        remote = (REMOTE_COPY, REMOTE_FETCH)
        quotas = {REMOTE_COPY: 5000000, REMOTE_FETCH: 6000000}
        eventually(lambda: assert_equal([broker_configs(admin, b, remote) for b in (1, 2, 3)],
                                  [quotas, {REMOTE_COPY: UNLIMITED, REMOTE_FETCH: 6000000}, quotas]))

        with broker_down(cluster, 1):  # the source: nothing moves before broker 2's side is throttled
            admin.alter_reassignments({(moved, 0): [2]})
            eventually(lambda: assert_equal(lists(admin, moved), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: {"0:2"}}))
            eventually(lambda: assert_equal(broker_configs(admin, 2), {FOLLOWER_RATE: 1}))
            done = cli("status", "-o", "json", "--config", str(fleet[2].config_path))
            assert done.returncode == 0, done.stderr
            status = json.loads(done.stdout)
            assert status["sidecar"]["mode"] == "running", status["sidecar"]  # this sidecar's view
            (guard,) = status["replication"]["brokers"]
            assert (guard["role"], guard["follower_rate"], guard["reason"]) == ("follower", 1, "disk_guard")
        eventually(lambda: assert_equal(lists(admin, moved), {LEADER_REPLICAS: {"0:1"}, FOLLOWER_REPLICAS: {"0:2"}}))
        source = eventually(lambda: _rate_at_least(admin, 1, LEADER_RATE, 2_000_000))

        # Paused: at the source's rate the whole 3 MiB would take under two seconds. This waits on purpose (eight
        # replication passes): what is checked is that nothing happens in the meantime.
        before = admin.describe_replica_sizes(2, {moved: [0]}).get((moved, 0), 0)
        time.sleep(8)
        after = admin.describe_replica_sizes(2, {moved: [0]}).get((moved, 0), 0)
        assert moving(admin, moved) == [0], "the move into the nearly full volume was not paused"
        assert after - before < 512 << 10 and after < 1 << 20, (before, after, source)
        assert broker_configs(admin, 2) == {FOLLOWER_RATE: 1}

        delete_topic(cluster, filler)
        eventually(lambda: assert_equal(moving(admin, moved), []))  # the guard lifted: the move completed
        eventually(lambda: assert_equal(lists(admin, moved), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()}))
        eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
        eventually(lambda: assert_equal(broker_configs(admin, 2, remote), quotas))
    finally:
        codes = fleet.stop()
    assert codes == {1: 0, 2: 0, 3: 0}
    eventually(lambda: assert_equal([broker_configs(admin, b, remote) for b in (1, 2, 3)],
                              [{REMOTE_FETCH: 1234567}, {}, {}]))  # the operator's put back, the rest gone


def _rate_at_least(admin: ClusterAdmin, broker: int, key: str, floor: int) -> int:
    rate = broker_configs(admin, broker).get(key)
    assert rate is not None and rate >= floor, (broker, key, rate)
    return rate
