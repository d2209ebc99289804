"""Throttle overrides set through one sidecar's API, or `quota-sidecar replication-overrides`, take effect on every
broker and survive restarts; a broker override throttles the catch-up of a restarted broker; changes without the
token are refused.
"""

from __future__ import annotations

import json
import ssl

import pytest
import trustme

from harness.cluster.disk import ReplicaSampler, replica_bytes
from harness.clients.quota_window import BAND, most_let_through, slope
from harness.agents.replication_checks import (BROKER_PROPERTIES, MOVE_BYTES, PREFIX, REACTION, TOKEN, broker_configs,
                                        broker_down, cli, create_topic, assert_equal, eventually, lists, own_status, produce,
                                        sidecar_records)
from harness.cluster.ports import free_loopback_ports
from harness.agents.sidecar_process import SidecarProcess, http
from quota_sidecar.decide.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

pytestmark = [pytest.mark.integration, pytest.mark.spark_connect]


@pytest.mark.both_generations(before_kip_827=True)
def test_overrides_set_through_one_sidecar_reach_every_broker_and_survive_restarts(settled, admin):
    """Broker overrides apply without a move, in both roles, each by the sidecar beside that broker."""
    fleet = settled
    wanted = {1: 1_000_001, 2: 2_000_002, 3: 3_000_003}
    for broker in (2, 3):
        assert http("PUT", f"{fleet[1].url}/throttle/{broker}", {"rate": wanted[broker]}, TOKEN) == \
            (200, {"broker_id": broker, "override": {"rate": wanted[broker]}})
    done = cli("replication-overrides", "set", "-o", "json", str(wanted[1]), "--broker", "1", "--url", fleet[1].url,
               token=TOKEN)
    assert done.returncode == 0, done.stderr

    def in_force():
        for broker, rate in wanted.items():
            assert broker_configs(admin, broker) == {LEADER_RATE: rate, FOLLOWER_RATE: rate}, broker
            row = own_status(fleet[broker])
            assert (row["leader_rate"], row["follower_rate"], row["reason"]) == (rate, rate, "broker_override")

    eventually(in_force)
    code, read = http("GET", f"{fleet[3].url}/throttle/2")
    assert (code, read["override"], read["changed"]["by"]) == (200, {"rate": 2_000_002}, "127.0.0.1")  # the audit

    assert fleet.stop() == {1: 0, 2: 0, 3: 0}  # --cleanup: the rates go with the sidecars...
    eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))
    fleet.start()  # ...and the overrides, kept in the cluster, bring them back
    eventually(in_force)
    done = cli("replication-overrides", "get", "-o", "json", "--broker", "1", "--url", fleet[2].url)
    assert done.returncode == 0 and json.loads(done.stdout)["override"] == {"rate": 1_000_001}, done

    assert http("DELETE", f"{fleet[3].url}/throttle/2", token=TOKEN) == (200, {"broker_id": 2, "removed": True})
    assert http("DELETE", f"{fleet[2].url}/throttle/3", token=TOKEN)[0] == 200
    done = cli("replication-overrides", "remove", "-o", "json", "--broker", "1", "--url", fleet[3].url, token=TOKEN)
    assert done.returncode == 0, done.stderr
    eventually(lambda: assert_equal([broker_configs(admin, b) for b in (1, 2, 3)], [{}, {}, {}]))


def test_a_broker_override_throttles_the_catch_up_of_a_restarted_broker(settled, cluster, admin, store, unique_name):
    """Autothrottle's rule: a broker with an override has its out-of-sync replicas throttled as a follower.

    While broker 3 is down, its replica of C-0 [1, 3] falls out of the ISR and records are written to
    broker 1. Sidecar 3 puts `0:3` in the follower list then, so the catch-up after the restart runs at
    the override's rate from its first fetch; the entry goes once the replica is in sync again, and
    the emptied list goes with it rather than stay as an empty value.

    The replica's bytes are read on disk every 0.1 s from before the restart. The first fetches after a
    restart can bring more than the quota's window at once, then held; from a second after the first fetch on,
    the replica must stay within what Kafka's quota lets through since then (the rate over that time, one quota
    window of it at once, and one fetch more), and the catch-up's rate lies in Kafka's band. Unthrottled, the
    6 MiB arrive within a second.
    """
    fleet, topic, rate, size = settled, unique_name, 200_000, 2 * MOVE_BYTES  # 6 MiB: half a minute
    fetch = int(BROKER_PROPERTIES["replica.fetch.max.bytes"])
    create_topic(cluster, topic, {0: [1, 3]})
    assert http("PUT", f"{fleet[1].url}/throttle/3", {"rate": rate}, TOKEN)[0] == 200
    eventually(lambda: assert_equal(broker_configs(admin, 3), {LEADER_RATE: rate, FOLLOWER_RATE: rate}))

    with ReplicaSampler(cluster.log_dirs(3)[0], topic, 0) as replica:
        with broker_down(cluster, 3):
            produce(cluster, topic, [0], size)
            eventually(lambda: assert_equal(lists(admin, topic), {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: {"0:3"}}))
            assert sidecar_records(store)[("entries", 3, topic, "follower")] == {"entries": ["0:3"]}
        eventually(lambda: assert_equal(3 in admin.describe_partitions([topic])[(topic, 0)].isr, True),
                   REACTION + size / rate)
    growth, leader = replica.growth(), replica_bytes(cluster.log_dirs(1)[0], topic, 0)
    assert growth and growth[-1][1] == leader, f"caught up to {leader} B on the leader: {replica.samples[-3:]}"
    after_a_second = [(at - 1.0, size) for at, size in growth if at >= 1.0]
    assert after_a_second, f"all {leader} B arrived within a second of the first fetch: not throttled"
    burst = after_a_second[0][1]
    assert leader - burst > most_let_through(rate, 0, fetch), \
        f"{burst} B of {leader} B arrived in the first second: less was left than the quota lets through at once"
    too_fast = [(round(at + 1.0, 1), size) for at, size in after_a_second
                if size - burst > most_let_through(rate, at, fetch)]
    assert not too_fast, f"the catch-up outran the override's {rate} B/s: (s from its first fetch, B) {too_fast[:5]}"
    assert slope(after_a_second) >= BAND[0] * rate, \
        f"the catch-up ran at {slope(after_a_second):.0f} B/s under a {rate} B/s throttle"

    eventually(lambda: assert_equal(admin.describe_configs("topic", [topic], [FOLLOWER_REPLICAS])[topic], {}))
    # the record is forgotten after the entry is removed (a crash between the two leaves it to hand back)
    eventually(lambda: assert_equal(("entries", 3, topic, "follower") in sidecar_records(store), False))
    assert http("DELETE", f"{fleet[2].url}/throttle/3", token=TOKEN)[0] == 200
    eventually(lambda: assert_equal(broker_configs(admin, 3), {}))


def test_changes_need_the_token_and_are_refused_where_none_is_configured(
        settled, cluster, pipeline, work_dir, report):
    fleet = settled
    body = {"rate": 5_000_000}
    assert http("PUT", fleet[1].url + "/throttle", body)[0] == 401
    assert http("PUT", fleet[1].url + "/throttle/2", body, token="not-" + TOKEN)[0] == 401
    assert http("DELETE", fleet[1].url + "/throttle", token="not-" + TOKEN)[0] == 401
    done = cli("replication-overrides", "set", "-o", "json", "5000000", "--url", fleet[1].url)
    assert done.returncode == 2 and "HTTP 401" in done.stderr, done
    assert http("GET", fleet[2].url + "/throttle") == (200, {"broker_id": None, "override": None})
    assert http("GET", fleet[2].url + "/throttle/2") == (200, {"broker_id": 2, "override": None})

    # A sidecar without api.token: the disk protection alone, checked once a minute.
    no_token = SidecarProcess("sidecar-without-token", work_dir, {
        PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers,
        PREFIX + "storage.check.interval": "PT0S",
        **pipeline,
    })
    report.sources.append(no_token)
    try:
        no_token.start(cleanup=True).wait_ready()
        status, answer = http("PUT", no_token.url + "/throttle", body, token=TOKEN)
        assert status == 403 and "api.token" in answer["error"], answer
        done = cli("replication-overrides", "set", "-o", "json", "5000000", "--url", no_token.url, token=TOKEN)
        assert done.returncode == 2 and "HTTP 403" in done.stderr, done
        assert http("GET", no_token.url + "/throttle") == (200, {"broker_id": None, "override": None})
    finally:
        no_token.stop()


def test_over_https_the_token_sets_an_override_recorded_with_its_origin_and_the_cli_finds_the_sidecar(
        settled, cluster, pipeline, work_dir, report, tmp_path):
    """The endpoint over TLS (http.tls.*, a certificate the test's CA issues: none is committed), a plain listener
    beside it (http.plain.port) for the probes; `quota-sidecar replication-overrides` and `status` with the sidecar's
    --config
    reach it without a --url."""
    ca = trustme.CA()
    files = {name: tmp_path / name for name in ("ca.crt", "tls.crt", "tls.key")}
    leaf = ca.issue_cert("127.0.0.1")
    for name, blob in (("ca.crt", ca.cert_pem), ("tls.crt", leaf.cert_chain_pems[0]), ("tls.key", leaf.private_key_pem)):
        blob.write_to_path(str(files[name]))
    plain, secure = free_loopback_ports(2)
    sidecar = SidecarProcess("sidecar-tls", work_dir, {
        PREFIX + "kafka.admin.bootstrap.servers": cluster.bootstrap_servers, PREFIX + "storage.check.interval": "PT0S",
        PREFIX + "api.token": TOKEN, PREFIX + "http.tls.cert.file": files["tls.crt"],
        PREFIX + "http.tls.key.file": files["tls.key"], PREFIX + "http.plain.port": plain, **pipeline}, port=secure)
    report.sources.append(sidecar)
    context = ssl.create_default_context(cafile=str(files["ca.crt"]))
    https = f"https://127.0.0.1:{secure}"
    try:
        sidecar.start(cleanup=True)
        eventually(lambda: _polled(f"http://127.0.0.1:{plain}/healthz"), 240)  # as the kubelet probes it
        assert http("PUT", https + "/throttle/2", {"rate": 2_000_002}, TOKEN, context=context) == \
            (200, {"broker_id": 2, "override": {"rate": 2_000_002}})
        code, read = http("GET", https + "/throttle/2", context=context)
        assert (code, read["override"], read["changed"]["by"], read["changed"]["over"]) == \
            (200, {"rate": 2_000_002}, "127.0.0.1", "https")
        assert "throttle override set by 127.0.0.1 over https: broker 2 -> {'rate': 2000002}" in \
            sidecar.log_path.read_text()
        done = cli("replication-overrides", "get", "-o", "json", "--broker", "2", "--config", str(sidecar.config_path))
        assert done.returncode == 0 and json.loads(done.stdout)["override"] == {"rate": 2_000_002}, done
        done = cli("replication-overrides", "remove", "-o", "json", "--broker", "2", "--config",
                   str(sidecar.config_path), token=TOKEN)
        assert done.returncode == 0 and json.loads(done.stdout)["removed"], done
        assert TOKEN not in sidecar.log_path.read_text()
    finally:
        sidecar.stop()


def _polled(url: str) -> bool:
    try:
        code, health = http("GET", url)
    except OSError as error:  # not listening yet
        raise AssertionError(f"{url}: {error}") from None
    assert code == 200 and health["last_poll"], health
    return True
