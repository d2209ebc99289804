"""/metrics: what a scrape reads from the published snapshot, through a registry of its own."""

from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from builders import AT, judged_row
from quota_sidecar.act.last_resort import LastResort
from quota_sidecar.act.snapshot import Counters
from quota_sidecar.serve.metrics import registry_for


def scrape(snapshot) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry_for(lambda: snapshot)).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_factor_counters_and_volumes(a_snapshot):
    samples = scrape(a_snapshot())

    assert samples[("quota_sidecar_throttle_factor", ())] == 0.0
    assert samples[("quota_sidecar_polls_total", ())] == 4
    assert samples[("quota_sidecar_poll_failures_total", ())] == 1
    assert samples[("quota_sidecar_limit_violated_total", ())] == 2
    assert samples[("quota_sidecar_writes_total", ())] == 3
    assert samples[("quota_sidecar_moves_cancelled_total", ())] == 0
    assert samples[("quota_sidecar_poll_duration_seconds", ())] == 0.25
    assert samples[("quota_sidecar_active_log_dirs", ())] == 2
    assert samples[("quota_sidecar_volume_available_bytes", (("broker_id", "3"), ("log_dir", "/data/b")))] == 20 << 20
    assert not [key for key in samples if key[0] == "quota_sidecar_volume_available_bytes" and ("broker_id", "2") in key[1]]


def test_each_volumes_fill_rate_and_time_to_the_limit(a_snapshot):
    samples = scrape(a_snapshot())

    a, b = (("broker_id", "1"), ("log_dir", "/data/a")), (("broker_id", "3"), ("log_dir", "/data/b"))
    assert samples[("quota_sidecar_volume_fill_bytes_per_second", a)] == 1024.0
    assert samples[("quota_sidecar_volume_seconds_to_limit", a)] == 56 * 1024
    assert samples[("quota_sidecar_volume_fill_bytes_per_second", b)] == 2048.0
    assert samples[("quota_sidecar_volume_seconds_to_limit", b)] == 0.0


def test_a_volume_without_a_fill_rate_or_not_filling_has_no_sample(a_snapshot):
    snapshot = a_snapshot()
    volumes = snapshot.decision.volumes
    decision = replace(snapshot.decision, judged=(judged_row(volumes[0], None, None),
                                                  judged_row(volumes[1], -5.0, None)))

    samples = scrape(a_snapshot(decision=decision))

    assert [key[1] for key in samples if key[0] == "quota_sidecar_volume_fill_bytes_per_second"] == [
        (("broker_id", "3"), ("log_dir", "/data/b"))]
    assert not [key for key in samples if key[0] == "quota_sidecar_volume_seconds_to_limit"]


def test_replication_rates_with_their_reason_and_the_measured_network(a_snapshot):
    samples = scrape(a_snapshot(replication=True))

    rate = ("quota_sidecar_replication_throttle_rate_bytes",
            (("broker_id", "3"), ("reason", "disk_guard"), ("role", "follower")))
    assert samples[rate] == 1
    assert samples[("quota_sidecar_network_bytes_per_second", (("broker_id", "3"), ("direction", "rx")))] == 2000.6
    measured = ("quota_sidecar_replication_measured_bytes_per_second", (("broker_id", "3"), ("direction", "rx")))
    assert samples[measured] == 1500.2


def test_each_moving_replica_s_lag_eta_and_each_destination_s_sum_and_stuck_replicas(a_snapshot):
    samples = scrape(a_snapshot(replication=True))

    def replica(topic, partition, broker):
        return (("broker", str(broker)), ("partition", str(partition)), ("topic", topic))

    assert samples[("quota_sidecar_replica_lag_bytes", replica("t", 0, 3))] == 1_288_490_189
    assert samples[("quota_sidecar_replica_lag_seconds", replica("u", 0, 4))] == 300.0
    assert samples[("quota_sidecar_replica_eta_seconds", replica("t", 0, 3))] == 250.0
    assert ("quota_sidecar_replica_eta_seconds", replica("u", 0, 4)) not in samples  # never ends at these rates
    assert samples[("quota_sidecar_sum_replica_lag_bytes", (("broker_id", "3"),))] == 1_288_490_189
    assert samples[("quota_sidecar_stuck_replicas", (("broker_id", "4"), ("reason", "cannot_keep_up")))] == 1
    assert samples[("quota_sidecar_stuck_replicas", (("broker_id", "3"), ("reason", "no_progress")))] == 0


def test_before_the_first_pass_only_the_counters_are_there(a_snapshot):
    samples = scrape(a_snapshot(decision=None))

    assert samples[("quota_sidecar_polls_total", ())] == 4
    assert not [key for key in samples if key[0].startswith("quota_sidecar_volume")]


def test_the_factors_source_and_the_quotas_in_force(a_snapshot):
    samples = scrape(a_snapshot())

    assert samples[("quota_sidecar_throttle_factor_source", (("source", "computed"),))] == 1
    assert samples[("quota_sidecar_client_quota", (("entity", "<default user>"), ("quota", "producer_byte_rate")))] == 1.0


def test_moves_in_progress_with_replication_on(a_snapshot):
    assert scrape(a_snapshot(replication=True))[("quota_sidecar_moves_in_progress", ())] == 1


def test_with_an_aggregator_its_last_decisions_time_and_the_pipelines_lag(a_snapshot):
    decision = {"aggregator": "kafka-ops-0/41", "observed_at": "2026-11-25T12:00:00+00:00",
                "decided_at": "2026-11-25T12:00:00.412Z"}

    samples = scrape(replace(a_snapshot(), last_aggregation=decision))

    assert samples[("quota_sidecar_pipeline_lag_seconds", ())] == 0.412
    assert samples[("quota_sidecar_aggregator_decision_timestamp_seconds", ())] == 1795608000.412
    assert ("quota_sidecar_pipeline_lag_seconds", ()) not in scrape(a_snapshot())


def test_the_last_resort_is_a_gauge_and_its_episodes_a_counter(a_snapshot):
    without = scrape(a_snapshot())
    with_it = scrape(a_snapshot(last_resort=LastResort((None, "alice"), AT),
                                counters=Counters(last_resort_episodes=2)))

    assert without[("quota_sidecar_last_resort", ())] == 0
    assert without[("quota_sidecar_last_resort_episodes_total", ())] == 0
    assert with_it[("quota_sidecar_last_resort", ())] == 1
    assert with_it[("quota_sidecar_last_resort_episodes_total", ())] == 2


def test_a_descent_under_way_is_a_gauge(a_snapshot):
    snapshot = a_snapshot()
    descending = replace(snapshot, decision=replace(snapshot.decision, descending=True))

    assert scrape(snapshot)[("quota_sidecar_descending", ())] == 0
    assert scrape(descending)[("quota_sidecar_descending", ())] == 1
