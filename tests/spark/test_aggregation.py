"""The aggregator's micro-batch (spark_jobs/aggregation.decisions) on inline Kafka rows: many agents of
clusters with different limits judged in one batch, each decision equal to what a batch run decides for its
observation alone, under its agent's key."""
import json
import logging
from datetime import datetime, timezone

from quota_sidecar.pipeline import messages
from quota_sidecar.configuration.keys import OBSERVATIONS_TOPIC
from spark_jobs import aggregation, replication_rates, volume_violations
from test_move_progress_rule import broker_role, replica

AT = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
GIB = 1 << 30


def volume(broker_id, available, at_seconds=0.0, log_dir="/data", total=10 * GIB):
    return {"broker_id": broker_id, "log_dir": log_dir, "total_bytes": total, "available_bytes": available,
            "usable": True, "at_seconds": at_seconds}


def decided(spark, *observations) -> dict[str, tuple[str, dict]]:
    """observation id -> (key, decision), from one micro-batch of these observations."""
    batch = spark.createDataFrame([(messages.encode(o),) for o in observations], "value binary")
    rows = aggregation.decisions(aggregation.readable(batch), "aggregator-1").collect()
    answers = [(row["key"], json.loads(row["value"])) for row in rows]
    return {decision["answers"]: (key, decision) for key, decision in answers}


def test_each_observation_of_a_batch_is_decided_as_a_batch_run_decides_it_alone(spark):
    bytes_limit = {"min_available_bytes": 2 * GIB, "soft_min_available_bytes": 4 * GIB, "lead_time_seconds": 30.0}
    ratio_limit = {"min_available_ratio": 0.1}
    filling = [volume(1, 5 * GIB, -20.0), volume(1, 3 * GIB, 0.0), volume(2, 8 * GIB)]
    steady = [volume(1, GIB // 2), volume(2, 9 * GIB, log_dir="/data-1")]
    first = messages.observation("cluster-a", 1, AT, volumes=filling, limits=bytes_limit)
    second = messages.observation("cluster-b", 7, AT, volumes=steady, limits=ratio_limit)

    answers = decided(spark, first, second)

    for sent, rows, limits, key in ((first, filling, bytes_limit, "cluster-a/1"),
                                    (second, steady, ratio_limit, "cluster-b/7")):
        factor, judged = volume_violations.decide(spark, rows, limits)
        answer_key, decision = answers[sent["id"]]
        assert answer_key == key
        assert (decision["cluster"], decision["agent"], decision["aggregator"]) == (
            sent["cluster"], sent["agent"], "aggregator-1")
        assert decision["volumes"] == {"factor": factor, "rows": judged}
        assert decision["replication"] is None
        assert datetime.fromisoformat(decision["decided_at"]).tzinfo is not None
    assert answers[first["id"]][1]["volumes"]["factor"] < 1.0  # the soft zone
    assert answers[second["id"]][1]["volumes"]["factor"] == 0.0  # below the ratio


def test_replication_rows_get_the_rates_moves_and_destinations_of_a_batch_run(spark):
    rows = [broker_role(1, "leader", [replica()]), broker_role(3, "follower", [replica()])]
    sent = messages.observation("cluster-a", 3, AT, replication=rows)

    (_, decision), = decided(spark, sent).values()

    assert decision["volumes"] is None
    assert decision["replication"] == replication_rates.decide(spark, rows)


def test_volumes_all_offline_decide_factor_one_and_an_unreadable_message_gets_no_decision(spark):
    offline = messages.observation("cluster-a", 1, AT, volumes=[{**volume(1, 0), "usable": False}],
                                   limits={"min_available_bytes": 1})
    batch = spark.createDataFrame([(messages.encode(offline),), (b"not json",),
                                   (messages.encode({**offline, "version": 99, "id": "x"}),)],
                                  "value binary")

    rows = aggregation.decisions(aggregation.readable(batch), "aggregator-1").collect()

    (row,) = rows
    assert json.loads(row["value"])["volumes"] == {"factor": 1.0, "rows": []}


def test_an_observation_of_replication_without_rows_gets_a_decision_with_none(spark):
    sent = messages.observation("cluster-a", 2, AT, replication=[])

    (_, decision), = decided(spark, sent).values()

    assert decision["replication"] == {"rates": [], "moves": [], "destinations": []}


def kafka_rows(spark, *observations, partition=4, first_offset=10):
    """A micro-batch as Spark's Kafka source hands it to the query: each observation under its agent's key."""
    return spark.createDataFrame(
        [(messages.key(o["cluster"], o["agent"]).encode(), messages.encode(o), OBSERVATIONS_TOPIC, partition,
          first_offset + index) for index, o in enumerate(observations)],
        "key binary, value binary, topic string, partition int, offset long")


def test_an_observation_of_a_version_the_aggregator_does_not_know_is_refused_with_one_line_the_others_decided(
        spark, caplog):
    def asked(agent):
        return messages.observation("cluster-a", agent, AT, volumes=[volume(agent, 5 * GIB)],
                                    limits={"min_available_bytes": GIB})

    current, newer, newer_again = asked(1), {**asked(3), "version": 2}, {**asked(3), "version": 2}
    unsaid = {name: value for name, value in asked(2).items() if name != "version"}
    written = []

    aggregation.decide(kafka_rows(spark, current, newer, unsaid, newer_again), "aggregator-1",
                       lambda decided: written.extend(decided.collect()))

    assert {json.loads(row["value"])["answers"] for row in written} == {current["id"], unsaid["id"]}
    assert [r.getMessage() for r in caplog.records
            if r.name == messages.log.name and r.levelno == logging.WARNING] == [
        f"refused an observation of version 2 from the agent of broker 3 of cluster cluster-a at "
        f"{OBSERVATIONS_TOPIC}-4 offset 11: this aggregator reads version 1, and a message without one as version 1; "
        "skipped (said once for this sender and version)"]

