"""The decision path shared by `run` and `evaluate`, with the real embedded Spark aggregation."""

from datetime import datetime, timedelta, timezone

import pytest

from quota_sidecar.common.observation import Observation, Volume
from quota_sidecar.configuration import config as cfg
from quota_sidecar.decide.decider import Decider
from spark_jobs.judges import on_spark
from spark_jobs import volume_violations

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
P = cfg.PREFIX


def config(**extra):
    return cfg.from_properties({P + "kafka.admin.bootstrap.servers": "127.0.0.1:9092",
                                P + "storage.per.volume.limit.min.available.bytes": "100",
                                **{P + k: v for k, v in extra.items()}})


def poll(seconds, *volumes, brokers=None):
    at = T0 + timedelta(seconds=seconds)
    found = tuple(Volume(b, f"/data-{b}", 1000, available, at) for b, available in volumes)
    return Observation(at=at, brokers=tuple(brokers if brokers is not None else [b for b, _ in volumes]),
                       volumes=found)


def failed(seconds, why="DescribeLogDirs timed out"):
    return Observation(at=T0 + timedelta(seconds=seconds), error=why)


@pytest.fixture(scope="module")
def judge(spark):  # the shared embedded session, which on_spark("") finds
    return on_spark("", volume_violations.decide)


def test_violation_throttles_producers_to_one_byte(judge):
    decider = Decider(config(produce="5000"), judge)
    decision = decider.decide(poll(0, (1, 1000), (2, 50)))
    assert (decision.throttle_factor, decision.source) == (0.0, "computed")
    assert [v["broker_id"] for v in decision.violations] == [2]
    assert decision.client_quotas.default_user["producer_byte_rate"] == 1


def test_stopped_broker_counts_until_validity_then_the_fallback_applies(judge):
    decider = Decider(config(**{"throttle.factor.validity.duration": "PT60S", "throttle.factor.fallback": "0.5"}),
                      judge)
    seen = [decider.decide(obs) for obs in (
        poll(0, (1, 1000), (2, 50)),   # broker 2 is full
        poll(30, (1, 1000)),           # broker 2 stopped: its last volumes still count
        poll(61, (1, 1000)),           # ... until they are older than the validity: unknown -> fallback
        poll(70, (1, 1000)),
        poll(80, (1, 1000), (2, 900)),  # broker 2 is back, with room
    )]
    assert [(d.throttle_factor, d.source) for d in seen] == [
        (0.0, "computed"), (0.0, "computed"), (0.5, "fallback"), (0.5, "fallback"), (1.0, "computed")]
    assert "absent" in seen[2].error and seen[2].entered_fallback and not seen[3].entered_fallback


def test_failed_polls_keep_the_last_factor_within_validity(judge):
    decider = Decider(config(**{"throttle.factor.validity.duration": "PT2M", "throttle.factor.fallback": "0"}), judge)
    seen = [decider.decide(obs) for obs in (poll(0, (1, 1000)), failed(60), failed(120), failed(180), poll(240, (1, 1000)))]
    assert [(d.throttle_factor, d.source) for d in seen] == [
        (1.0, "computed"), (1.0, "last_valid"), (1.0, "last_valid"), (0.0, "fallback"), (1.0, "computed")]
    assert seen[1].error == "DescribeLogDirs timed out"


def test_offline_dirs_are_shown_but_not_judged(judge):
    decider = Decider(config(), judge)
    at = T0
    offline = Volume(1, "/bad", -1, -1, at, "KAFKA_STORAGE_ERROR")
    decision = decider.decide(Observation(at=at, brokers=(1,), volumes=(offline, Volume(1, "/ok", 1000, 900, at))))
    assert decision.throttle_factor == 1.0 and decision.active_log_dirs == 1 and offline in decision.volumes


class FailingSparkJudge:
    """Fault injection: Spark unavailable, which a real session cannot be made to be on demand."""

    def __call__(self, rows, params):
        raise ConnectionError("Spark Connect server at sc://127.0.0.1:1 is unavailable")


def test_spark_unavailable_counts_as_a_failed_poll():
    decider = Decider(config(**{"throttle.factor.validity.duration": "PT0S", "throttle.factor.fallback": "0"}),
                      FailingSparkJudge())
    first, second = decider.decide(poll(0, (1, 1000))), decider.decide(poll(1, (1, 1000)))
    assert (first.throttle_factor, first.source) == (1.0, "initial")  # valid from the first poll
    assert (second.throttle_factor, second.source) == (0.0, "fallback")
    assert "Spark Connect server" in second.error


def test_fill_rate_comes_from_the_polls_within_the_window(judge):
    decider = Decider(config(**{"storage.fill.window": "PT30S"}), judge)
    seen = [decider.decide(poll(t, (1, available))) for t, available in ((0, 900), (20, 800), (40, 700), (70, 700))]

    assert [(d.judged[0]["fill_bytes_per_sec"], d.judged[0]["seconds_to_limit"]) for d in seen] == [
        (None, None),   # one poll: no fill rate yet
        (5.0, 140.0),   # (800 - 100) / 5
        (5.0, 120.0),   # the poll at 0 s is older than the window by now: 20 s and 40 s
        (0.0, None)]    # 40 s and 70 s: steady, never reaches the limit
    assert sorted(decider.history) == [(1, "/data-1")] and len(decider.history[(1, "/data-1")]) == 2


def test_an_absent_brokers_volume_is_judged_without_counting_twice(judge):
    decider = Decider(config(**{"storage.fill.window": "PT1M"}), judge)
    decider.decide(poll(0, (1, 900), (2, 900)))
    decider.decide(poll(10, (1, 900), (2, 800)))
    absent = decider.decide(poll(20, (1, 900)))  # broker 2 stopped: its volume of 10 s ago still counts

    assert [(r["broker_id"], r["fill_bytes_per_sec"]) for r in absent.judged] == [(1, 0.0), (2, 10.0)]
    assert len(decider.history[(2, "/data-2")]) == 2  # its remembered volume is not a new measurement

    later = decider.decide(poll(80, (1, 900)))  # its measurements left the window; its volume is still judged

    assert (2, "/data-2") not in decider.history
    assert [(r["broker_id"], r["available_bytes"], r["fill_bytes_per_sec"]) for r in later.judged] == [
        (1, 900, 0.0), (2, 800, None)]


def test_the_soft_zone_scales_produce_and_is_no_violation(judge):
    decider = Decider(config(produce="5000", **{"storage.per.volume.soft.limit.min.available.bytes": "300"}), judge)

    decision = decider.decide(poll(0, (1, 200), (2, 250)))

    assert decision.throttle_factor == 0.5 and decision.violations == ()
    assert decision.client_quotas.default_user["producer_byte_rate"] == 2500
    assert [v["throttle_factor"] for v in decision.to_json()["volumes"]] == [0.5, 0.75]


def test_a_predicted_violation_is_a_violation_that_says_so(judge):
    decider = Decider(config(**{"storage.per.volume.limit.lead.time": "PT2M"}), judge)
    decider.decide(poll(0, (1, 900), (2, 900)))

    decision = decider.decide(poll(10, (1, 800), (2, 100)))

    assert decision.throttle_factor == 0.0
    assert [(v["broker_id"], v["predicted"], v["seconds_to_limit"]) for v in decision.violations] == [
        (1, True, 70.0), (2, False, 0.0)]
    assert decision.to_json()["volumes"][0] == {
        "broker_id": 1, "log_dir": "/data-1", "total_bytes": 1000, "available_bytes": 800, "available_ratio": 0.8,
        "fill_bytes_per_sec": 10.0, "seconds_to_limit": 70.0, "violated": True, "predicted": True,
        "throttle_factor": 0.0, "descending": False}
