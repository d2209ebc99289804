"""Moves throttled by the running sidecars (KIP-73 throttled replicas, kafka-kit autothrottle rates), and
everything the sidecars set gone once the move is over.

- a reassignment started with the Admin API gets Kafka's lists (sources = replicas minus adding in the
  leader list, adding in the follower list) and a rate on each source and destination; entries and rates
  someone else set survive; everything the sidecars set is gone once the move is over, also when a
  sidecar was restarted, crashed or cleaned up in the middle of it, or the topic was deleted;
- after `kafka-reassign-partitions --verify` removed the throttles, none comes back.

A move on loopback is over in well under a second unless it is throttled from its first fetch, and a
sidecar throttles a move only once it has seen it. So each test holds its move with one broker down:
the destination is stopped before the reassignment starts and started again once the sidecars of the
running brokers have written their side.
"""

from __future__ import annotations

import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.cluster.kafka_tools import reassign_partitions
from harness.agents.replication_checks import (MAX_RATE, MIN_RATE, TOKEN, assert_throttled, broker_configs, broker_down,
                                        cli, create_topic, delete_topic, assert_equal, eventually, lists, moving,
                                        own_status, produce, sidecar_records)
from harness.agents.sidecar_process import SidecarProcess, http
from quota_sidecar.common.vocabulary import RULE_REASONS
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from quota_sidecar.kafka_clients.admin import ClusterAdmin

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]


def test_lists_and_rates_follow_the_move_and_go_when_it_is_done(settled, cluster, admin, store, unique_name):
    """Two partitions move onto broker 3: T-0 [1, 2] -> [2, 3] and T-1 [2, 1] -> [1, 3].

    Kafka lists them as replicas (2, 3, 1) and (1, 3, 2), adding 3: sources 1 and 2, destination 3.
    An operator had put `0:9` and `1:2` in the leader list, `0:8` in the follower list and a follower
    rate on broker 3 before; all of it is there again once the move is done. The move is finished by a
    global override set with `quota-sidecar replication-overrides set --autoremove`, which goes with the move.
    """
    fleet, topic = settled, unique_name
    create_topic(cluster, topic, {0: [1, 2], 1: [2, 1]})
    produce(cluster, topic, [0, 1])
    admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("APPEND", "0:9,1:2"),
                                                     FOLLOWER_REPLICAS: ("APPEND", "0:8")})
    admin.incremental_alter_configs("broker", 3, {FOLLOWER_RATE: ("SET", "777777")})
    operator_lists = {LEADER_REPLICAS: {"0:9", "1:2"}, FOLLOWER_REPLICAS: {"0:8"}}
    eventually(lambda: assert_equal(lists(admin, topic), operator_lists))

    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3], (topic, 1): [1, 3]})
        eventually(lambda: assert_equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2", "0:9", "1:1", "1:2"}))
        for source in (1, 2):
            eventually(lambda: assert_throttled(admin, source, LEADER_RATE))
    eventually(lambda: assert_equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3", "0:8", "1:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))

    assert moving(admin, topic) == [0, 1]
    assert lists(admin, topic) == {LEADER_REPLICAS: {"0:1", "0:2", "0:9", "1:1", "1:2"},
                                   FOLLOWER_REPLICAS: {"0:3", "0:8", "1:3"}}
    for broker, (role, key) in {1: ("leader", LEADER_RATE), 2: ("leader", LEADER_RATE),
                                3: ("follower", FOLLOWER_RATE)}.items():
        assert_throttled(admin, broker, key)
        row = eventually(lambda: _status_shows(admin, fleet[broker], broker, role))
        assert row["reason"] in RULE_REASONS, row
    scraped = eventually(lambda: _metrics_show_rate(admin, fleet[3], 3, "follower"))
    assert scraped["quota_sidecar_throttle_factor"] == 1.0
    assert {labels["broker_id"] for labels, _ in scraped["quota_sidecar_volume_available_bytes"]} == {"1", "2", "3"}
    assert {labels["direction"] for labels, _ in scraped["quota_sidecar_network_bytes_per_second"]} == {"tx", "rx"}
    records = sidecar_records(store)
    assert records[("entries", 1, topic, "leader")] == {"entries": ["0:1", "1:1"]}
    assert records[("entries", 2, topic, "leader")] == {"entries": ["0:2"]}, "1:2 is the operator's"
    assert records[("entries", 3, topic, "follower")] == {"entries": ["0:3", "1:3"]}
    assert records[("config", 3, FOLLOWER_RATE)]["replaced"] == 777777

    done = cli("replication-overrides", "set", "-o", "json", "50000000", "--autoremove", "--url", fleet[2].url,
               token=TOKEN)
    assert done.returncode == 0, done.stderr
    eventually(lambda: assert_equal(moving(admin, topic), []))
    eventually(lambda: assert_equal(lists(admin, topic), operator_lists))
    eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {FOLLOWER_RATE: 777777}]))
    eventually(lambda: assert_equal(sidecar_records(store), {}))
    eventually(lambda: assert_equal(http("GET", fleet[1].url + "/throttle")[1]["override"], None))  # autoremove
    admin.incremental_alter_configs("broker", 3, {FOLLOWER_RATE: ("DELETE", None)})


@pytest.mark.both_generations(before_kip_827=True)
def test_after_kafka_reassign_partitions_verify_no_throttle_comes_back(settled, cluster, admin, store, unique_name):
    """Kafka's own tool: `--execute --throttle 1000000`; the sidecars set their rates over it; paused, they
    miss the rest: the operator raises the throttle (`--additional --throttle`, as KIP-73 advises) and
    `--verify` after the move removes every throttle. Resumed, the sidecars must not write back the 1 MB/s
    they had replaced (they did: a stale throttle stayed behind)."""
    fleet, topic, initial = settled, unique_name, 1_000_000
    create_topic(cluster, topic, {0: [1]})
    produce(cluster, topic, [0], size=6 << 20)  # 6 s at the tool's throttle: the sidecars see the move first
    move = {(topic, 0): [2]}
    started = reassign_partitions(cluster.bootstrap_servers, move, "--execute", "--throttle", str(initial))
    assert started.returncode == 0, started.stdout + started.stderr
    # The tool set both rates on both brokers; each sidecar replaces the one of its broker's role.
    eventually(lambda: _sidecar_rate_beside(admin, 1, LEADER_RATE, FOLLOWER_RATE, initial))
    eventually(lambda: _sidecar_rate_beside(admin, 2, FOLLOWER_RATE, LEADER_RATE, initial))
    assert sidecar_records(store)[("config", 2, FOLLOWER_RATE)]["replaced"] == initial
    for broker in (1, 2):
        fleet[broker].send(signal.SIGSTOP)
    try:
        raised = reassign_partitions(cluster.bootstrap_servers, move, "--execute", "--additional",
                                     "--throttle", "100000000")
        assert raised.returncode == 0, raised.stdout + raised.stderr
        eventually(lambda: assert_equal(moving(admin, topic), []))
        verified = reassign_partitions(cluster.bootstrap_servers, move, "--verify")
        assert verified.returncode == 0 and "Clearing broker-level throttles" in verified.stdout, verified.stdout
        eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2)], [{}, {}]))
    finally:
        for broker in (1, 2):
            fleet[broker].send(signal.SIGCONT)
    eventually(lambda: assert_equal({r for r in sidecar_records(store) if r[0] == "config"}, set()))  # let go
    assert [broker_configs(admin, b) for b in (1, 2)] == [{}, {}], "a throttle came back after --verify"
    assert fleet[2].first_line(f"{FOLLOWER_RATE}: none in force, changed by someone else"), fleet[2].log_tail(30)


def test_what_a_sidecar_wrote_is_removed_after_a_restart_a_crash_or_a_cleanup_mid_move(
        settled, cluster, admin, store, unique_name):
    """R-0 moves from [1, 2] to [2, 3]; in the middle of it sidecar 1 stops with --cleanup, sidecar 2
    without it, sidecar 3 is killed. Only sidecar 1's entries and rate go then; all three come back,
    and once the move is cancelled nothing any of them wrote is left, the operator's `0:9` aside."""
    fleet, topic = settled, unique_name
    assert fleet.stop([2]) == {2: 0}
    fleet.start([2], cleanup=False)
    create_topic(cluster, topic, {0: [1, 2]})
    produce(cluster, topic, [0])
    admin.incremental_alter_configs("topic", topic, {LEADER_REPLICAS: ("APPEND", "0:9")})

    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3]})
        eventually(lambda: assert_equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2", "0:9"}))
        for source in (1, 2):
            eventually(lambda: assert_throttled(admin, source, LEADER_RATE))
    eventually(lambda: assert_equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))

    fleet[3].send(signal.SIGKILL)
    assert fleet.stop([1, 2]) == {1: 0, 2: 0}
    assert fleet[3].stop(None) == -signal.SIGKILL
    assert moving(admin, topic) == [0]
    eventually(lambda: assert_equal(lists(admin, topic), {LEADER_REPLICAS: {"0:2", "0:9"}, FOLLOWER_REPLICAS: {"0:3"}}))
    eventually(lambda: assert_equal(broker_configs(admin, 1), {}))
    assert_throttled(admin, 2, LEADER_RATE)
    assert_throttled(admin, 3, FOLLOWER_RATE)

    fleet.start()
    eventually(lambda: assert_equal(lists(admin, topic), {LEADER_REPLICAS: {"0:1", "0:2", "0:9"},
                                                    FOLLOWER_REPLICAS: {"0:3"}}))
    eventually(lambda: assert_throttled(admin, 1, LEADER_RATE))
    assert set(sidecar_records(store)) == {("entries", 1, topic, "leader"), ("entries", 2, topic, "leader"),
                                           ("entries", 3, topic, "follower"), ("config", 1, LEADER_RATE),
                                           ("config", 2, LEADER_RATE), ("config", 3, FOLLOWER_RATE)}

    admin.alter_reassignments({(topic, 0): None})
    eventually(lambda: assert_equal(moving(admin, topic), []))
    eventually(lambda: assert_equal(lists(admin, topic), {LEADER_REPLICAS: {"0:9"}, FOLLOWER_REPLICAS: set()}))
    eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
    eventually(lambda: assert_equal(sidecar_records(store), {}))


def test_a_topic_deleted_in_the_middle_of_its_move_leaves_nothing_behind(
        settled, cluster, admin, store, unique_name):
    """The topic's configs and its move go with it; the sidecars forget the entries they had written
    there and go on with the rest: the rates of the move go too."""
    topic = unique_name
    create_topic(cluster, topic, {0: [1, 2]})
    produce(cluster, topic, [0])
    with broker_down(cluster, 3):
        admin.alter_reassignments({(topic, 0): [2, 3]})
        eventually(lambda: assert_equal(lists(admin, topic)[LEADER_REPLICAS], {"0:1", "0:2"}))
    eventually(lambda: assert_equal(lists(admin, topic)[FOLLOWER_REPLICAS], {"0:3"}))
    eventually(lambda: assert_throttled(admin, 3, FOLLOWER_RATE))
    assert {key[1] for key in sidecar_records(store) if key[0] == "entries"} == {1, 2, 3}

    delete_topic(cluster, topic)

    eventually(lambda: assert_equal(moving(admin, topic), []))
    eventually(lambda: assert_equal(sidecar_records(store), {}))
    eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))


# ---------------------------------------------------------------- helpers for eventually()


def _sidecar_rate_beside(admin: ClusterAdmin, broker: int, key: str, other: str, other_rate: int) -> None:
    """`key` is the sidecar's rate; `other` is still what another tool set."""
    rates = broker_configs(admin, broker)
    assert set(rates) == {key, other} and MIN_RATE <= rates[key] <= MAX_RATE and rates[other] == other_rate, rates


def _metrics_show_rate(admin: ClusterAdmin, sidecar: SidecarProcess, broker: int, role: str) -> dict:
    """The sidecar's /metrics give the rate in force on its broker for the role; all of /metrics by name."""
    with urllib.request.urlopen(sidecar.url + "/metrics", timeout=30) as response:
        families = text_string_to_metric_families(response.read().decode())
    found = {}
    for family in families:
        samples = [(sample.labels, sample.value) for sample in family.samples]
        found[family.name] = samples[0][1] if samples and not samples[0][0] else samples
    rate = broker_configs(admin, broker).get(f"{role}.replication.throttled.rate")
    shown = [value for labels, value in found["quota_sidecar_replication_throttle_rate_bytes"]
             if labels["broker_id"] == str(broker) and labels["role"] == role]
    assert shown == [rate], (shown, rate)
    return found


def _status_shows(admin: ClusterAdmin, sidecar: SidecarProcess, broker: int, role: str) -> dict:
    """The sidecar's status names the role and the rate in force on its broker (which may move)."""
    rates = broker_configs(admin, broker)
    row = own_status(sidecar)
    assert row["role"] == role and row[f"{role}_rate"] == rates.get(f"{role}.replication.throttled.rate"), \
        (row, rates)
    return row
