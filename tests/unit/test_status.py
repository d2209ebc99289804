"""`quota-sidecar status`: one structure from a snapshot, rendered as a table for people."""

from quota_sidecar import status
from quota_sidecar.cordoning import CordonView


def test_status_names_every_volume_with_its_state(a_snapshot, later):
    built = status.build(a_snapshot(), later, mode="running")

    assert [(v["broker_id"], v["log_dir"], v["state"]) for v in built["volumes"]] == [
        (1, "/data/a", "ok"), (3, "/data/b", "VIOLATED"), (2, "/data/c", "offline: KAFKA_STORAGE_ERROR")]
    assert built["volumes"][1]["margin"] == 20 * (1 << 20) - 24 * (1 << 20)
    assert built["throttle"]["factor"] == 0.0 and built["throttle"]["age_seconds"] == 30.0
    assert "replication" not in built


def test_the_table_shows_factor_volumes_and_quotas(a_snapshot, later):
    text = status.render(status.build(a_snapshot(), later, mode="running"))

    assert "throttle factor 0.000  source computed  age 30s" in text
    assert "fallback applied 0x" in text
    violated = next(line for line in text.splitlines() if "/data/b" in line)
    assert "64.0 MiB" in violated and "20.0 MiB" in violated and "-4,194,304 B" in violated and "VIOLATED" in violated
    assert any(line.split()[:2] == ["<default", "user>"] and line.split()[2] == "1" for line in text.splitlines())
    assert "unlimited" in next(line for line in text.splitlines() if "quota-sidecar (sidecar)" in line)


def test_an_absent_brokers_volume_says_when_it_was_last_seen(a_snapshot, later):
    snapshot = a_snapshot()
    decision = snapshot.decision.__class__(**{**snapshot.decision.__dict__, "at": later})

    built = status.build(a_snapshot(decision=decision), later, mode="running")

    assert all("broker absent; last seen 2026-11-23T08:00:00Z" in v["state"] for v in built["volumes"])


def test_replication_shows_the_move_this_brokers_role_load_rates_and_why(a_snapshot, later):
    built = status.build(a_snapshot(replication=True), later, mode="running")["replication"]

    assert built["moves"] == [{"topic": "t", "partition": 0, "replicas": [3, 1, 2], "adding": [3], "removing": [1]}]
    assert built["brokers"] == [{
        "broker_id": 3, "role": "follower", "tx_bytes_per_sec": 1000, "rx_bytes_per_sec": 2001,
        "replication_tx_bytes_per_sec": None, "replication_rx_bytes_per_sec": 1500, "capacity": 40_000_000,
        "leader_rate": None, "follower_rate": 1, "reason": "disk_guard"}]
    assert built["overrides"] == {"global": {"rate": 7, "autoremove": True}, "brokers": {}}
    text = status.render(status.build(a_snapshot(replication=True), later, mode="running"))
    assert "replication throttles:" in text
    assert next(line for line in text.splitlines() if line.split()[:2] == ["3", "follower"]).split()[-1] == "disk_guard"


def test_a_sidecar_before_its_first_pass_shows_no_volumes(a_snapshot, later):
    built = status.build(a_snapshot(decision=None), later, mode="running")

    assert built["volumes"] == [] and built["throttle"]["last_poll"] is None
    assert "(none)" in status.render(built)


def test_cordoned_dirs_of_this_broker_say_which_the_sidecar_added(a_snapshot, later):
    view = CordonView(3, True, ("/data/b", "/data/ops"), ("/data/b",))

    built = status.build(a_snapshot(cordons=view), later, mode="running")

    assert built["cordoned"] == {"broker_id": 3, "enabled": True, "unavailable": False,
                                 "log_dirs": ["/data/b", "/data/ops"], "by_sidecar": ["/data/b"]}
    assert ("cordoned log dirs of broker 3 (cordoned.log.dirs): /data/b (by the sidecar), /data/ops"
            in status.render(built))
    older = status.render(status.build(a_snapshot(cordons=CordonView(3, True, unavailable=True)), later, "running"))
    assert "unavailable, the broker does not know the key (Kafka < 4.3)" in older
    assert "cordoned" not in status.build(a_snapshot(), later, mode="running")
