"""The sidecars' volumes in ZooKeeper (zookeeper.connect), on Kafka 3.2 in ZooKeeper mode: its DescribeLogDirs
has no sizes (before KIP-827), so the znodes are the only volume source.

Real ZooKeeper, real brokers, real sidecar processes: a killed sidecar's znode goes with its session, and
a ZooKeeper server stopped for longer than the session timeout makes the polls fail until it is back.
(The flood on the same broker generation is in test_disk_protection.py.)
"""

from __future__ import annotations

import json
import signal

import pytest

from harness.cluster.local_cluster import BEFORE_KIP_827
from harness.agents.sidecar_process import SidecarProcess
from harness.waiting import eventually
from harness.cluster.zookeeper_server import children
from quota_sidecar.configuration import config as cfg
from quota_sidecar.serve import direct_status
from quota_sidecar.observe.znode_volumes import VOLUMES_PATH
from quota_sidecar.wiring import build_sidecar

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]
P = cfg.PREFIX
VALIDITY_SECONDS = 15


def properties(cluster, pipeline: dict, broker: int, **extra) -> dict[str, str]:
    return {P + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, P + "zookeeper.connect": cluster.zookeeper_connect,
            P + "zookeeper.session.timeout": "PT2S", P + "broker.id": str(broker),
            P + "storage.local.log.dirs": cluster.log_dirs(broker)[0], P + "storage.cordon.log.dirs": "false",
            P + "storage.per.volume.limit.min.available.bytes": "1", P + "storage.check.interval": "PT1S",
            P + "throttle.factor.validity.duration": f"PT{VALIDITY_SECONDS}S", P + "throttle.factor.fallback": "0.5",
            P + "produce": "1000000", P + "poll.timeout": "PT30S", **pipeline, **{P + key: str(value) for key, value in extra.items()}}


def published_brokers(cluster) -> list[int]:
    return sorted(int(child) for child in children(cluster.zookeeper_connect, VOLUMES_PATH))


def next_pass(sidecar, condition, timeout: float, what: str):
    """Passes one a second until one meets `condition`; that pass's decision."""
    return eventually(lambda: decision if condition(decision := sidecar.run_pass()) else None, timeout, what,
                      every=1)


def test_status_direct_on_a_cluster_where_no_sidecar_ran_makes_no_znode(make_kafka_cluster, pipeline):
    cluster = make_kafka_cluster(brokers=1, **BEFORE_KIP_827)
    looking = build_sidecar(cfg.from_properties(properties(cluster, pipeline, 1, **{"state.store": "zookeeper"})))
    try:
        direct_status.look(looking, timeout=30)  # what `status --direct` does
    finally:
        looking.close()
    assert "quota-sidecar" not in children(cluster.zookeeper_connect, "/"), children(cluster.zookeeper_connect,
                                                                                    "/quota-sidecar")


def test_a_killed_sidecars_znode_goes_and_its_broker_counts_as_absent(make_kafka_cluster, pipeline, sidecars, tmp_path,
                                                                     caplog):
    """Both sidecars keep their records in ZooKeeper too (state.store=zookeeper): no topic of theirs."""
    cluster = make_kafka_cluster(brokers=2, **BEFORE_KIP_827)
    in_zookeeper = {"state.store": "zookeeper"}
    beside_1 = build_sidecar(cfg.from_properties(properties(cluster, pipeline, 1, **in_zookeeper)))
    sidecars.append(beside_1)
    with SidecarProcess("sidecar-2", tmp_path, properties(cluster, pipeline, 2, **in_zookeeper)) as beside_2:
        beside_2.wait_ready()
        eventually(lambda: published_brokers(cluster) == [2], 60, "sidecar 2's znode")
        both = next_pass(beside_1, lambda d: d.error is None and {v.broker_id for v in d.volumes if v.usable} == {1, 2},
                         60, "a pass with both brokers' published volumes")
        assert (both.source, both.active_brokers) == ("computed", 2)
        assert {v.log_dir for v in both.volumes} == {cluster.log_dirs(1)[0], cluster.log_dirs(2)[0]}

        beside_2.stop(signal.SIGKILL)
        eventually(lambda: published_brokers(cluster) == [1], 30, "sidecar 2's znode to go with its session")
        kept = beside_1.run_pass()
        assert (kept.error, kept.source) == (None, "computed")
        assert [v for v in kept.volumes if v.broker_id == 2 and v.observed_at < kept.at], "broker 2's last volumes count"
        fallback = next_pass(beside_1, lambda d: d.source == "fallback", VALIDITY_SECONDS + 30, "the fallback")
        assert fallback.throttle_factor == 0.5 and "absent" in fallback.error
        # the fallback's quota, written: a step of the descent, so no sooner than produce.descent.step after the
        # sidecar's first write (its `produce` over no quota at all)
        next_pass(beside_1, lambda d: beside_1.quota_writer.in_force[None]["producer_byte_rate"] == 500_000.0, 45,
                  "the fallback's quota written")
        assert any(json.loads(key)[0] == "quota" for key in beside_1.store.read_all()), "its records, in ZooKeeper"
        assert beside_1.admin.describe_partitions(["__quota_sidecar_state"]) == {}, "no state topic"
    # Found from ApiVersions, said once per broker however many passes asked.
    assert caplog.text.count("Broker 1 answers DescribeLogDirs below v4 (before KIP-827)") == 1


def test_a_zookeeper_session_loss_fails_the_polls_then_the_fallback_applies_and_it_recovers(make_kafka_cluster, pipeline,
                                                                                          sidecars):
    cluster = make_kafka_cluster(brokers=1, **BEFORE_KIP_827)
    sidecar = build_sidecar(cfg.from_properties(properties(cluster, pipeline, 1)))
    sidecars.append(sidecar)
    assert next_pass(sidecar, lambda d: d.error is None and any(v.usable for v in d.volumes), 60,
                     "a pass with the published volumes").source == "computed"

    cluster.zookeeper.stop()
    try:
        failed = sidecar.run_pass()
        assert "ZooKeeper" in failed.error and failed.source == "last_valid", failed.error
        fallback = next_pass(sidecar, lambda d: d.source == "fallback", VALIDITY_SECONDS + 40, "the fallback")
        assert fallback.throttle_factor == 0.5
    finally:
        cluster.zookeeper.start()

    back = next_pass(sidecar, lambda d: d.error is None and d.source == "computed", 90, "a computed pass again")
    assert [v.broker_id for v in back.volumes if v.usable] == [1]
    assert published_brokers(cluster) == [1]
