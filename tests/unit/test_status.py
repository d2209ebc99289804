"""`quota-sidecar status`: one structure from a snapshot, rendered as a table for people."""

import dataclasses
import re
from datetime import timedelta as timedelta
from dataclasses import replace

import pytest

import builders
from builders import judged_row
from quota_sidecar.act.cordoning import CordonView
from quota_sidecar.act.last_resort import LastResort
from quota_sidecar.decide import quotas
from quota_sidecar.decide.throttle_factor import INITIAL, FactorState
from quota_sidecar.decide.throttles import BrokerRates
from quota_sidecar.serve import status


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


@pytest.mark.parametrize("factor, seconds, stale_since", [
    (None, 30, None),                                            # within the validity
    (None, 301, "2026-11-23T08:05:00Z"),                          # the validity after the last success
    (FactorState(1.0, INITIAL, valid_from=builders.AT), 400, "2026-11-23T08:05:00Z"),  # none since the first poll
    (FactorState(), 10_000, None),                               # no poll yet
])
def test_status_says_since_when_the_decisions_are_stale(a_snapshot, factor, seconds, stale_since):
    snapshot = a_snapshot(**({"factor": factor} if factor else {}))
    built = status.build(snapshot, builders.AT + timedelta(seconds=seconds), mode="running")
    text = status.render(built)

    assert built["throttle"]["stale_since"] == stale_since
    assert (f"decisions STALE since {stale_since}: no successful pass within 300s, fallback factor 1.0" in text) \
        is (stale_since is not None)


def test_status_says_how_the_sidecars_own_clients_are_told_apart(a_snapshot, later):
    snapshot = a_snapshot()
    alone = status.render(status.build(snapshot, later, mode="running"))
    assert ("the sidecar's own clients: exempt as client-id quota-sidecar (sidecar) at 1000000 B/s: a client id is "
            "all that tells them apart") in alone
    config = replace(snapshot.config, quotas=replace(snapshot.config.quotas, sidecar_principal="qs"))
    built = status.build(replace(snapshot, config=config), later, mode="running")
    assert built["own_clients"] == "exempt as User:qs client-id quota-sidecar (sidecar)"


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
        "leader_rate": None, "follower_rate": 1, "reason": "disk_guard", "cannot_keep_up": []}]
    assert built["overrides"] == {"global": {"rate": 7, "autoremove": True}, "brokers": {}}
    text = status.render(status.build(a_snapshot(replication=True), later, mode="running"))
    assert "replication throttles:" in text
    assert next(line for line in text.splitlines() if line.split()[:2] == ["3", "follower"]).split()[-1] == "disk_guard"


def test_moves_show_every_moving_replica_and_one_line_per_destination(a_snapshot, later):
    built = status.build(a_snapshot(replication=True), later, mode="running")["replication"]

    assert [(m["topic"], m["partition"], m["broker"], m["state"]) for m in built["progress"]] == [
        ("t", 0, 3, "moving"), ("t", 1, 3, "caught_up"), ("u", 0, 4, "stuck")]
    assert "leader" not in built["progress"][0]
    text = status.render(status.build(a_snapshot(replication=True), later, mode="running"))
    assert "  broker 3: 2 replicas, 1.2 GiB behind, done in ~4m10s" in text.splitlines()
    assert "  broker 4: 1 replica, 4.9 KiB behind, 1 stuck, no end in sight at the present rates" in text.splitlines()
    stuck = next(line for line in text.splitlines() if line.split()[:3] == ["u", "0", "4"])
    assert stuck.split()[-2:] == ["stuck", "(cannot_keep_up)"] and " 5m00s " in stuck


def test_a_sidecar_whose_broker_takes_no_part_in_the_moves_points_to_those_that_do(a_snapshot, later):
    snapshot = a_snapshot(replication=True)
    view = snapshot.replication
    observation = dataclasses.replace(view.observation, reassignments=(
        dataclasses.replace(view.observation.reassignments[0], replicas=(4, 1, 2), adding=(4,)),))
    uninvolved = dataclasses.replace(view, observation=observation,
                                     decision=dataclasses.replace(view.decision, brokers={}, moves=(), destinations={}))

    text = status.render(status.build(dataclasses.replace(snapshot, replication=uninvolved), later, mode="running"))

    lines = text.splitlines()
    assert lines[lines.index("moving replicas:") + 1] == \
        "  measured by the sidecars of the moves' sources and destinations, not this broker's"


def test_a_broker_that_cannot_keep_up_even_at_its_cap_says_so(a_snapshot, later):
    snapshot = a_snapshot(replication=True)
    decision = snapshot.replication.decision
    capped = dataclasses.replace(decision, brokers={3: BrokerRates(None, 36_000_000, None, "keep_up", ("follower",))})
    view = dataclasses.replace(snapshot.replication, decision=capped)
    text = status.render(status.build(dataclasses.replace(snapshot, replication=view), later, mode="running"))
    assert "  broker 3: even its highest follower rate is below what its moves take in (KIP-73's upper bound): " \
           "they may never end" in text.splitlines()


def test_a_sidecar_before_its_first_pass_shows_no_volumes(a_snapshot, later):
    built = status.build(a_snapshot(decision=None), later, mode="running")

    assert built["volumes"] == [] and built["throttle"]["last_poll"] is None
    assert "(none)" in status.render(built)


def test_each_volume_shows_its_fill_rate_and_time_to_the_limit(a_snapshot, later):
    built = status.build(a_snapshot(), later, mode="running")

    assert [(v["fill_bytes_per_sec"], v["seconds_to_limit"]) for v in built["volumes"]] == [
        (1024.0, 56 * 1024), (2048.0, 0.0), (None, None)]
    rows = cells(status.render(built))
    assert rows["/data/a"][-3:] == ["1.0 KiB/s", "fills in 15h55m", "ok"]
    assert rows["/data/b"][-3:] == ["2.0 KiB/s", "reached", "VIOLATED"]
    assert rows["/data/c"][-3:] == ["-", "-", "offline: KAFKA_STORAGE_ERROR"]


def cells(text: str) -> dict[str, list[str]]:
    """The volume table's rows by log dir, each as its cells."""
    return {row[1]: row for row in (re.split(r"\s{2,}", line.strip()) for line in text.splitlines())
            if len(row) > 1 and row[1].startswith("/")}


def test_a_predicted_violation_and_the_soft_zone_are_named(a_snapshot, later):
    snapshot = a_snapshot()
    volumes = snapshot.decision.volumes
    judged = (judged_row(volumes[0], 1000.0, 30.0, violated=True, predicted=True),
              judged_row(volumes[1], -512.0, None, factor=0.25))
    decision = replace(snapshot.decision, judged=judged)

    built = status.build(a_snapshot(decision=decision), later, mode="running")

    assert [v["state"] for v in built["volumes"]][:2] == ["VIOLATED (predicted)", "soft zone: factor 0.25"]
    rows = cells(status.render(built))
    assert rows["/data/a"][-3:] == ["1000 B/s", "fills in 30s", "VIOLATED (predicted)"]
    assert rows["/data/b"][-3:] == ["-512 B/s", "-", "soft zone: factor 0.25"]


@pytest.mark.parametrize("seconds, shown", [
    (None, "-"), (0.0, "reached"), (0.4, "fills in <1s"), (42.9, "fills in 42s"), (192.0, "fills in 3m12s"),
    (3600 + 120, "fills in 1h02m"), (2 * 86400 + 3 * 3600 + 59, "fills in 2d03h"),
])
def test_time_to_the_limit_for_people(seconds, shown):
    assert status._time_to_limit(seconds) == shown


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


def test_moves_the_disk_guard_cancelled_are_shown_with_why(a_snapshot, later):
    move = {"broker": 3, "topic": "t", "partition": 0, "at": "2026-11-25T14:00:00+00:00", "log_dir": "/data/b",
            "replicas": [3, 1], "adding": [3], "removing": [1], "why": "its free space fell to 1 B under the disk guard"}

    built = status.build(a_snapshot(cancelled_moves=(move,)), later, mode="running")

    assert built["cancelled_moves"] == [move]
    row = next(line.strip() for line in status.render(built).splitlines() if "2026-11-25T14:00:00" in line)
    assert row.split()[1:5] == ["t", "0", "3", "/data/b"] and row.endswith("under the disk guard")
    assert "cancelled_moves" not in status.build(a_snapshot(), later, mode="running")


def test_a_copy_between_dirs_the_disk_guard_sent_back_is_shown_with_the_dir_it_stays_in(a_snapshot, later):
    copy = {"broker": 3, "topic": "t", "partition": 0, "at": "2026-11-25T14:00:00+00:00", "log_dir": "/data/b",
            "replicas": [3], "adding": [], "removing": [], "from_log_dir": "/data/a", "why": "its free space fell"}
    rendered = status.render(status.build(a_snapshot(cancelled_moves=(copy,)), later, mode="running"))
    row = next(line.strip() for line in rendered.splitlines() if "2026-11-25T14:00:00" in line)
    assert row.split()[1:7] == ["t", "0", "3", "(from", "/data/a)", "/data/b"]


def test_with_zookeeper_the_published_volumes_are_shown_beside_describe_log_dirs(a_snapshot, later):
    snapshot = a_snapshot()
    reported = snapshot.decision.volumes[0]
    published = replace(reported, available_bytes=7 << 20)
    decision = replace(snapshot.decision, published_volumes=(published,))

    built = status.build(a_snapshot(decision=decision), later, mode="running")

    assert [v["published_available_bytes"] for v in built["volumes"]] == [7 << 20, None, None]
    text = status.render(built)
    assert "znode avail." in text
    assert "7.0 MiB" in next(line for line in text.splitlines() if reported.log_dir in line)


def test_without_zookeeper_there_is_no_published_column(a_snapshot, later):
    built = status.build(a_snapshot(), later, mode="running")

    assert all("published_available_bytes" not in v for v in built["volumes"])
    assert "znode avail." not in status.render(built)


def test_status_names_the_aggregator_with_its_last_decisions_age_and_the_pipelines_lag(a_snapshot, later):
    snapshot = a_snapshot()
    config = replace(snapshot.config, pipeline=replace(snapshot.config.pipeline, bootstrap_servers="pipeline:9092"))
    decided = later - timedelta(seconds=2)
    last = {"aggregator": "kafka-ops-0/41", "observed_at": (decided - timedelta(seconds=0.41)).isoformat(),
            "decided_at": decided.isoformat()}

    built = status.build(replace(snapshot, config=config, last_aggregation=last), later, mode="running")
    waiting = status.build(replace(snapshot, config=config), later, mode="running")

    assert built["sidecar"]["decided_by"] == {"pipeline": "pipeline:9092", "aggregator": "kafka-ops-0/41",
                                              "decided_at": last["decided_at"], "decision_age_seconds": 2.0,
                                              "lag_seconds": pytest.approx(0.41)}
    assert "aggregator kafka-ops-0/41: last decision 2s ago, 0.41s after its observation" in status.render(built)
    assert "aggregator on pipeline:9092: no decision yet" in status.render(waiting)


def test_the_last_resort_is_one_line_while_it_is_in_force(a_snapshot, later):
    in_force = a_snapshot(last_resort=LastResort((None, "alice"), builders.AT))

    built = status.build(in_force, later, mode="running")
    shown = status.render(built)
    not_in_force = status.render(status.build(a_snapshot(), later, mode="running"))

    assert built["last_resort"] == {"entities": ["<default user>", "User:alice"], "since": "2026-11-23T08:00:00Z",
                                    "who": "<default user> (every principal without a quota of its own), User:alice"}
    assert ("LAST RESORT: producers of <default user> (every principal without a quota of its own), User:alice at "
            "1 B/s since 2026-11-23T08:00:00Z; Java producers need a restart after the lift") in shown.splitlines()
    assert "LAST RESORT" not in not_in_force


def test_a_descent_under_way_is_said_with_its_floor_and_the_volume_that_fills(a_snapshot, later):
    snapshot = a_snapshot()
    volumes = snapshot.decision.volumes
    judged = ({**judged_row(volumes[0], 2e6, 90.0), "descending": True},)
    written = replace(snapshot.decision.client_quotas,
                      default_user={**snapshot.decision.client_quotas.default_user, quotas.PRODUCE: 666_667.0})
    decision = replace(snapshot.decision, judged=judged, descending=True, written_quotas=written)

    built = status.build(a_snapshot(decision=decision), later, mode="running")

    assert built["volumes"][0]["state"] == "descending"
    assert built["descent"]["default_user"] == 666_667.0
    assert "DESCENT: producer quotas coming down in steps (at most 3x every 36s) to 26214 B/s; the default " \
           "user's now 666667" in status.render(built)
    assert status.build(a_snapshot(), later, mode="running")["descent"] is None
