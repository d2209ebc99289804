"""The decider without Spark: what it hands the volume judge (each volume's history within the fill window)
and what it makes of the judged rows. tests/spark/test_decider_with_spark.py runs the same path on the real job."""

from dataclasses import replace
from datetime import timedelta

from builders import AT, judged_row, sidecar_config
from quota_sidecar.common.observation import Observation, Volume
from quota_sidecar.decide.decider import Decider


class RecordingJudge:
    """Judges every volume healthy, except those named violated or predicted; keeps the rows it was given."""

    def __init__(self, violated=(), predicted=()):
        self.rows, self.violated, self.predicted = [], set(violated), set(predicted)

    def __call__(self, rows, params):
        self.rows.append(rows)
        newest = {}
        for row in rows:  # the job takes a volume's newest row as its state now
            newest[(row["broker_id"], row["log_dir"])] = row
        judged = [judged_row(Volume(b, d, row["total_bytes"], row["available_bytes"], AT), None, None,
                             violated=(b, d) in self.violated | self.predicted, predicted=(b, d) in self.predicted)
                  for (b, d), row in sorted(newest.items())]
        return min([r["throttle_factor"] for r in judged] or [1.0]), judged


def poll(seconds, *volumes):
    at = AT + timedelta(seconds=seconds)
    return Observation(at=at, brokers=tuple(sorted({b for b, _, _ in volumes})),
                       volumes=tuple(Volume(b, d, 1000, available, at) for b, d, available in volumes))


def times(rows):
    return [(row["log_dir"], row["at_seconds"], row["available_bytes"]) for row in rows]


def test_the_judge_gets_each_volumes_measurements_within_the_window():
    judge = RecordingJudge()
    decider = Decider(sidecar_config(**{"storage.fill.window": "PT30S"}), judge)

    for seconds, available in ((0, 900), (20, 800), (40, 700)):
        decider.decide(poll(seconds, (1, "/a", available)))

    assert [times(rows) for rows in judge.rows] == [
        [("/a", 0.0, 900)],
        [("/a", -20.0, 900), ("/a", 0.0, 800)],
        [("/a", -20.0, 800), ("/a", 0.0, 700)]]  # the poll at 0 s is 40 s old: outside the window


def test_an_offline_volume_is_not_judged_and_leaves_no_history():
    judge = RecordingJudge()
    decider = Decider(sidecar_config(), judge)
    decider.decide(poll(0, (1, "/a", 900)))
    at = AT + timedelta(seconds=10)
    offline = Observation(at=at, brokers=(1,), volumes=(Volume(1, "/a", -1, -1, at, "KAFKA_STORAGE_ERROR"),))

    decision = decider.decide(offline)

    assert judge.rows[-1] == [] and decision.to_json()["volumes"] == []
    assert [v.observed_at for v in decider.history[(1, "/a")]] == [AT]


def test_a_failed_poll_records_nothing_and_judges_nothing():
    judge = RecordingJudge()
    decider = Decider(sidecar_config(), judge)

    decision = decider.decide(Observation(at=AT, error="DescribeLogDirs timed out"))

    assert judge.rows == [] and decider.history == {} and decision.to_json()["volumes"] == []


def test_decisions_list_every_judged_volume_and_violations_say_if_predicted():
    judge = RecordingJudge(violated=[(2, "/a")], predicted=[(1, "/b")])
    decider = Decider(sidecar_config(), judge)

    decision = decider.decide(poll(0, (2, "/a", 10), (1, "/b", 500), (1, "/a", 900))).to_json()

    assert [(v["broker_id"], v["log_dir"]) for v in decision["volumes"]] == [(1, "/a"), (1, "/b"), (2, "/a")]
    assert {"fill_bytes_per_sec", "seconds_to_limit", "total_bytes", "available_bytes"} <= set(decision["volumes"][0])
    assert [(v["broker_id"], v["log_dir"], v["predicted"]) for v in decision["violations"]] == [
        (1, "/b", True), (2, "/a", False)]
    assert decision["throttle_factor"] == 0.0


def test_a_local_dir_at_the_limit_sets_the_factor_to_0_and_a_failed_poll_after_it_keeps_it():
    decider = Decider(sidecar_config(**{"produce": "1000000", "throttle.factor.validity.duration": "PT5M"}),
                      RecordingJudge())
    decider.decide(poll(0, (1, "/a", 900)))
    assert decider.factor.factor == 1.0

    wanted = decider.judged_locally(AT + timedelta(seconds=1))
    failed = decider.decide(Observation(at=AT + timedelta(seconds=2), error="DescribeLogDirs timed out"))

    assert wanted.default_user["producer_byte_rate"] == 1.0
    assert (failed.throttle_factor, failed.source) == (0.0, "last_valid")


def test_a_pass_the_local_verdict_holds_for_decides_a_factor_of_0_whatever_the_volumes_polled_say():
    """A dir about to reach the limit in the watch's samples (the agent's reaction time from it) is above it in
    DescribeLogDirs: the pass's factor is still 0, as the quotas the verdict wrote, and status says so."""
    decider = Decider(sidecar_config(), RecordingJudge())
    held = decider.decide(replace(poll(0, (1, "/a", 900)), held_locally=True))
    free = decider.decide(poll(1, (1, "/a", 900)))

    assert (held.throttle_factor, held.source, held.error) == (0.0, "computed", None)
    assert held.client_quotas == decider.judged_locally(AT)
    assert free.throttle_factor == 1.0


def test_a_decision_looked_at_the_cluster_when_its_factor_was_computed_or_the_fallback_applied():
    decider = Decider(sidecar_config(**{"throttle.factor.validity.duration": "PT5M"}), RecordingJudge())
    computed = decider.decide(poll(0, (1, "/a", 900)))
    kept = decider.decide(Observation(at=AT + timedelta(seconds=60), error="DescribeLogDirs timed out"))
    fallback = decider.decide(Observation(at=AT + timedelta(seconds=400), error="DescribeLogDirs timed out"))

    assert computed.looked_at == AT
    assert (kept.source, kept.looked_at) == ("last_valid", AT)  # its factor rests on the first poll's look
    assert (fallback.source, fallback.looked_at) == ("fallback", AT + timedelta(seconds=400))


def test_the_fallback_is_written_though_its_polls_fail_and_a_kept_factor_is_not_stepped():
    decider = Decider(sidecar_config(**{"throttle.factor.validity.duration": "PT5M", "produce": 1e6,
                                        "throttle.factor.fallback": 0.5}), RecordingJudge())
    decider.decide(poll(0, (1, "/a", 900)))
    kept = decider.decide(Observation(at=AT + timedelta(seconds=60), error="DescribeLogDirs timed out"))
    fallback = decider.decide(Observation(at=AT + timedelta(seconds=400), error="DescribeLogDirs timed out"))

    assert kept.written_quotas.default_user["producer_byte_rate"] == 1e6
    assert (fallback.source, fallback.written_quotas.default_user["producer_byte_rate"]) == ("fallback", 5e5)


def test_the_tenants_of_the_last_poll_that_read_them_are_throttled_by_a_failed_poll_and_the_local_verdict():
    decider = Decider(sidecar_config(), RecordingJudge(violated={(1, "/a")}))
    first = decider.decide(replace(poll(0, (1, "/a", 900)), tenant_rates={"alice": 1e9}))
    failed = decider.decide(Observation(at=AT + timedelta(seconds=10), error="DescribeCluster timed out"))

    assert first.client_quotas.tenants == failed.client_quotas.tenants == {"alice": 1.0}
    assert decider.judged_locally(AT + timedelta(seconds=20)).tenants == {"alice": 1.0}


def test_the_rate_question_asked_ahead_is_the_one_judged_unless_this_polls_violations_change_it():
    """A pass asks the aggregator its rate question beside its volumes (one round trip for both); the rows
    come from the last poll's violations, so a broker catching up outside a move that violates only now is
    asked about after the volumes, as before."""
    from quota_sidecar.common.observation import BrokerLoad, Reassignment, ReplicationObservation
    from quota_sidecar.configuration.settings import ReplicationConfig
    from quota_sidecar.decide.throttles import ReplicationDecider

    asked, judged = [], []

    def rate_judge(rows):
        judged.append(rows)
        return {"rates": [{**row, "rate": 42, "reason": "computed", "keep_up_capped": False} for row in rows],
                "moves": [], "destinations": []}

    replication = ReplicationDecider(ReplicationConfig(capacity_default=100), rate_judge, own_broker=3)
    decider = Decider(sidecar_config(), RecordingJudge(violated={(3, "/a")}), replication, asked.append)
    moving = ReplicationObservation(broker_load={3: BrokerLoad(0, 0)},
                                    reassignments=(Reassignment("t", 0, (1, 3), adding=(3,)),))
    catching_up = ReplicationObservation(broker_load={3: BrokerLoad(0, 0)}, catching_up={"u": ((0, 3),)})

    decider.decide(replace(poll(0, (3, "/a", 900)), replication=catching_up))
    assert asked == [] and len(judged) == 1  # not involved before this poll found /a violating
    decider.decide(replace(poll(10, (3, "/a", 900)), replication=moving))
    assert asked == [judged[1]]


def test_a_volume_judged_descending_lowers_the_producer_quota_written():
    """The job's `descending` column reaches the descent: a third of the fill rate is written, the goal stays."""
    def judge(rows, params):
        row = rows[-1]
        volume = Volume(row["broker_id"], row["log_dir"], row["total_bytes"], row["available_bytes"], AT)
        return 1.0, [{**judged_row(volume, 600_000.0, 60.0), "descending": True}]

    decision = Decider(sidecar_config(), judge).decide(poll(0, (3, "/a", 900)))

    assert decision.descending and decision.to_json()["volumes"][0]["descending"]
    assert decision.written_quotas.default_user["producer_byte_rate"] == 200_000
    assert decision.client_quotas.default_user["producer_byte_rate"] == 1_000_000
