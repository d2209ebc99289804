"""One line per failure: a failed poll is one WARNING naming its cause, the first poll that succeeds again one
INFO line saying how long they failed; the metrics count the same polls. Fakes inject the faults."""

import logging
import shutil
import types
from datetime import timedelta

import pytest

from quota_sidecar.common.errors import DecisionFailed, RetryableAdminError
from quota_sidecar.common.failure_report import FailureReport
from quota_sidecar.common.observation import Volume
from quota_sidecar.decide.decider import Decider
from quota_sidecar.wiring import assemble
from quota_sidecar.observe.cover_watch import CoverWatch

from builders import AT, Clock, MemoryStore, MiB, OneVolumeAdmin, sidecar_config

CAUSE = "cannot reach any bootstrap server 127.0.0.1:1 (connection refused)"


class FlakyStore:
    """Fault injection: the sidecars' records cannot be read while `down` is set; else there are none."""

    def __init__(self):
        self.down = True

    def read_all(self, create: bool = True):
        if self.down:
            raise RetryableAdminError(CAUSE)
        return {}

    def put(self, key, value):
        pass

    def delete(self, key):
        pass

    def write_many(self, changes):
        for key, value in changes.items():
            self.delete(key) if value is None else self.put(key, value)

    def close(self):
        pass


class OneBrokerAdmin:
    """A cluster of one broker with one roomy volume, and no client quotas set."""

    def live_broker_ids(self):
        return [1]

    def describe_volumes(self, brokers, now):
        return [Volume(1, "/data", 100 * MiB, 80 * MiB, now)]

    def describe_user_quotas(self, entities=None):
        return {entity: {} for entity in entities or ()}

    def alter_user_quotas(self, changes):
        pass

    def close(self):
        pass


def nothing_violated(rows, limit):
    return 1.0, [{**row, "available_ratio": 0.8, "fill_bytes_per_sec": None, "seconds_to_limit": None,
                  "violated": False, "predicted": False, "throttle_factor": 1.0} for row in rows]



class Monotonic:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def sidecar():
    config = sidecar_config()
    car = assemble(config, OneBrokerAdmin(), FlakyStore(), lambda *_: Decider(config, nothing_violated),
                   clock=Clock())
    car.poll_report.monotonic = Monotonic()
    return car


def warnings_and_up(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def test_each_failed_poll_is_one_warning_naming_the_cause(sidecar, caplog):
    for _ in range(3):
        sidecar.run_pass()

    assert warnings_and_up(caplog) == [f"poll failed: reading the sidecars' records: {CAUSE}"] * 3
    assert sidecar.snapshot().counters.poll_failures == 3


def test_polls_that_succeed_again_say_so_once_with_how_long_they_failed(sidecar, caplog):
    caplog.set_level(logging.INFO, logger="quota_sidecar.loop")
    for _ in range(3):
        sidecar.run_pass()
        sidecar.poll_report.monotonic.now += 10
    sidecar.store.down = False

    sidecar.run_pass()
    sidecar.run_pass()

    recovered = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "again" in r.getMessage()]
    assert recovered == ["polls succeed again after 3 failed polls over 30s"]
    counters = sidecar.snapshot().counters
    assert (counters.polls, counters.poll_failures) == (5, 3)


def test_a_failure_while_writing_is_one_warning_and_a_failed_pass(sidecar, caplog):
    sidecar.store.down = False

    def refused(changes):
        raise RetryableAdminError("AlterClientQuotas failed: KafkaConnectionError: connection refused")
    sidecar.admin.alter_user_quotas = refused

    decision = sidecar.run_pass()

    assert decision.error is None
    assert warnings_and_up(caplog) == [
        "pass failed while writing: AlterClientQuotas failed: KafkaConnectionError: connection refused"]
    assert sidecar.snapshot().counters.pass_failures == 1


def test_the_fallback_applies_on_the_validity_timeline_from_the_first_poll(sidecar):
    clock = sidecar.clock
    for seconds in range(0, 400, 60):
        clock.now = AT + timedelta(seconds=seconds)
        decision = sidecar.run_pass()
        assert decision.valid_from == AT
        assert decision.source == ("initial" if seconds <= 300 else "fallback")


class LocalDirAdmin(OneVolumeAdmin):
    """Broker 1's one volume is `log_dir` of this machine (as the broker would report it); the quotas written are
    kept."""

    def __init__(self, log_dir):
        super().__init__(0, 0)
        self.log_dir = log_dir

    def describe_volumes(self, brokers, now):
        usage = shutil.disk_usage(self.log_dir)
        return [Volume(1, self.log_dir, usage.total, usage.free, now)]


def agent(admin, store, tmp_path=None):
    """A sidecar whose aggregator answers once (nothing violated) and then is gone; with `tmp_path`, it watches
    that dir, which a ratio limit of 1.0 puts at the limit."""
    keys = {"broker.id": 1, "throttle.factor.validity.duration": "PT1M", "produce": "1000000",
            "storage.per.volume.limit.min.available.bytes": None, "storage.per.volume.limit.min.available.ratio": "1.0"}
    if tmp_path is not None:
        keys["storage.local.log.dirs"] = str(tmp_path)
    config = sidecar_config(**keys)
    answers = [nothing_violated]

    def aggregator(rows, limit):
        if not answers:
            raise DecisionFailed("the poll ran out of its 10s deadline while waiting for the aggregator's decision")
        return answers.pop()(rows, limit)

    return assemble(config, admin, store, lambda *_: Decider(config, aggregator), clock=Clock())


def up_store():
    store = FlakyStore()
    store.down = False
    return store


def test_without_decisions_a_local_dir_at_the_limit_keeps_its_verdict_past_the_validity(tmp_path):
    """The aggregator gone, every poll fails; a verdict renewed by each pass while the watch sees the dir at the
    limit never gives way to the fallback (which would lift the quota until the next pass)."""
    admin = LocalDirAdmin(str(tmp_path))
    car = agent(admin, up_store(), tmp_path)
    seen = []
    for seconds in range(0, 300, 10):
        car.clock.now = AT + timedelta(seconds=seconds)
        car.watch.sample()
        decision = car.run_pass()
        seen.append((decision.throttle_factor, decision.source))

    assert seen[0] == (1.0, "computed")  # the dir is the broker's: confirmed by this first decision
    assert set(seen[1:]) == {(0.0, "last_valid")}
    assert admin.quotas[None]["producer_byte_rate"] == 1.0


def test_an_aggregator_that_never_answered_does_not_keep_the_local_verdict_from_the_limit(tmp_path):
    """The broker's DescribeLogDirs confirms the watched dir as its own at the first poll, though its decision
    failed: the verdict holds the dir at the limit from the second pass."""
    admin = LocalDirAdmin(str(tmp_path))
    car = agent(admin, up_store(), tmp_path)
    car.decider.judge_volumes = lambda rows, limit: (_ for _ in ()).throw(
        DecisionFailed("the poll ran out of its 10s deadline while waiting for the aggregator's decision"))
    for seconds in (0, 10):
        car.clock.now = AT + timedelta(seconds=seconds)
        car.watch.sample()
        car.run_pass()

    assert admin.quotas[None]["producer_byte_rate"] == 1.0


def test_a_sidecar_that_cannot_decide_does_not_lift_the_quota_another_ones_local_verdict_wrote(tmp_path):
    """Two sidecars, the aggregator gone: the one beside the full dir writes 1 B/s; the other's failed polls keep
    its last valid factor, 1.0, but lift no quota on it: only a decision, or its fallback's start, does."""
    admin = LocalDirAdmin(str(tmp_path))
    beside_the_full_dir, elsewhere = agent(admin, up_store(), tmp_path), agent(admin, up_store())
    in_force = []
    for seconds in range(0, 60, 10):  # within the validity: the other one's factor stays its last valid 1.0
        for car in (beside_the_full_dir, elsewhere):
            car.clock.now = AT + timedelta(seconds=seconds)
        beside_the_full_dir.watch.sample()
        beside_the_full_dir.run_pass()
        decision = elsewhere.run_pass()
        in_force.append((decision.throttle_factor, admin.quotas[None]["producer_byte_rate"]))

    assert in_force[0] == (1.0, 1_000_000.0)  # both decided once: nothing violated
    assert set(in_force[1:]) == {(1.0, 1.0)}


def test_a_dir_that_reaches_the_limit_while_a_pass_waits_for_the_aggregator_gets_its_quota_during_the_wait(tmp_path):
    """The aggregator down, a pass waits for it up to poll.timeout; the pipeline gives the loop a turn between its
    polls, and a dir the watch finds at the limit meanwhile gets the quota then, not at the next pass."""
    admin, config = LocalDirAdmin(str(tmp_path)), sidecar_config(**{
        "broker.id": 1, "storage.local.log.dirs": str(tmp_path), "produce": "1000000",
        "storage.per.volume.limit.min.available.bytes": None, "storage.per.volume.limit.min.available.ratio": "0.5"})
    pipeline = types.SimpleNamespace(while_waiting=None, last_decision=None)  # its wait, in the judge below

    def pipeline_of(while_waiting):  # as wiring.build_pipeline gives the pipeline what to do while it waits
        pipeline.while_waiting = while_waiting
        return pipeline
    in_force_during_the_wait = []

    def aggregator(rows, limit):
        if not in_force_during_the_wait:
            in_force_during_the_wait.append(None)
            return nothing_violated(rows, limit)  # the first pass: the dir is the broker's
        car.watch.at_limit = car.watch.judged = [str(tmp_path)]  # what the watch's sample shows once the flood crosses
        pipeline.while_waiting()
        in_force_during_the_wait.append(admin.quotas[None]["producer_byte_rate"])
        raise DecisionFailed("the poll ran out of its 10s deadline while waiting for the aggregator's decision")

    car = assemble(config, admin, up_store(), lambda *_: Decider(config, aggregator), clock=Clock(),
                   pipeline_of=pipeline_of)
    car.run_pass()
    car.watch.at_limit = car.watch.judged = []  # below the limit as the next pass starts
    car.clock.now = AT + timedelta(seconds=10)
    decision = car.run_pass()

    assert in_force_during_the_wait == [None, 1.0]
    assert (decision.throttle_factor, decision.source) == (0.0, "last_valid")


def test_while_the_watch_predicts_a_violation_a_decision_that_does_not_lifts_no_quota(tmp_path):
    """With a lead time the watch judges its dir on every sample of the fill window; the aggregator's decision,
    made on the few samples a pass publishes, may not see it yet: while the local verdict holds, the pass's factor
    is 0 and it lifts nothing."""
    admin, config = LocalDirAdmin(str(tmp_path)), sidecar_config(**{
        "broker.id": 1, "storage.local.log.dirs": str(tmp_path), "produce": "1000000",
        "storage.per.volume.limit.min.available.bytes": None, "storage.per.volume.limit.min.available.ratio": "0.0001",
        "storage.per.volume.limit.lead.time": "PT10S"})
    car = assemble(config, admin, up_store(), lambda *_: Decider(config, nothing_violated), clock=Clock())
    car.run_pass()  # the dir is the broker's: confirmed by this first decision
    in_force = []
    for judged in ([str(tmp_path)], [str(tmp_path)], []):
        car.watch.judged = judged  # as a sample within the lead time of the limit at the fill rate finds
        car.clock.now += timedelta(seconds=10)
        decision = car.run_pass()
        in_force.append((decision.throttle_factor, admin.quotas[None]["producer_byte_rate"]))

    # the pass's factor is the verdict's while it holds, as status shows it; lifted once the watch no longer predicts it
    assert in_force == [(0.0, 1.0), (0.0, 1.0), (1.0, 1_000_000.0)]


class StallingStore(MemoryStore):
    """Fault injection: while `down`, the records can be neither read nor written, as while the records topic's
    leader is cut off (until Kafka fences it, ~10 s)."""

    down = False

    def read_all(self, create=True):
        if self.down:
            raise RetryableAdminError("reading __quota_sidecar_state failed: KafkaTimeoutError: Failed to get offsets "
                                      "by timestamps in 9999 ms")
        return super().read_all(create)

    def write_many(self, changes):
        if self.down and changes:
            raise RetryableAdminError("writing to __quota_sidecar_state failed: KafkaTimeoutError")
        super().write_many(changes)


def test_while_the_records_stall_a_verdict_that_the_records_name_is_written_all_the_same(tmp_path):
    """With the records topic's leader cut off, every read of it stalls while a flood writes: a local verdict that
    read the records first and wrote its record before its value would write nothing meanwhile. A quota the records
    already name (1 B/s, written by an earlier verdict) goes first, on the records the last pass read."""
    admin, store = LocalDirAdmin(str(tmp_path)), StallingStore()
    config = sidecar_config(**{
        "broker.id": 1, "storage.local.log.dirs": str(tmp_path), "produce": "1000000",
        "storage.per.volume.limit.min.available.bytes": None, "storage.per.volume.limit.min.available.ratio": "0.0001"})
    car = assemble(config, admin, store, lambda *_: Decider(config, nothing_violated), clock=Clock())
    in_force = []
    for judged, stalled in (([], False), ([str(tmp_path)], False), ([], False), ([str(tmp_path)], True)):
        car.watch.judged, store.down = judged, stalled
        car.clock.now += timedelta(seconds=10)
        car.run_pass()
        in_force.append(admin.quotas[None]["producer_byte_rate"])

    assert in_force == [1_000_000.0, 1.0, 1_000_000.0, 1.0]  # throttled, lifted, throttled with the records away


def covering(cover: CoverWatch):
    """wiring.assemble's cover_of for a cover watch built here: as wiring.build_cover's, it wakes the loop and its
    heartbeats say whether this agent's verdict holds."""
    def cover_of(woken, holding, pipeline):
        cover.wake, cover.heartbeats.holding = woken, holding
        return cover
    return cover_of


def test_a_covered_brokers_volume_at_the_limit_gets_the_verdict_from_the_agent_that_covers_it(tmp_path):
    """Broker 3's agent is down; broker 1's covers it: its volume judged at the limit in DescribeLogDirs brings the
    quotas at the pass's start, and no decision lifts them while it stays judged."""
    admin, config = LocalDirAdmin(str(tmp_path)), sidecar_config(**{
        "broker.id": 1, "produce": "1000000", "storage.per.volume.limit.min.available.bytes": str(MiB)})
    heard = types.SimpleNamespace(last_seen=lambda: {1: 0.0, 3: 0.0}, holding_agents=list)  # as read before 3 went silent
    cover = CoverWatch(heard, lambda brokers, now: [3], admin, config.storage_limit, 0.2, 60.0)
    car = assemble(config, admin, up_store(), lambda *_: Decider(config, nothing_violated), clock=Clock(),
                   cover_of=covering(cover))
    in_force = []
    for judged in ([], [(3, "/data")], [(3, "/data")], []):
        cover.judged = judged
        car.clock.now += timedelta(seconds=10)
        decision = car.run_pass()
        in_force.append((decision.throttle_factor, admin.quotas[None]["producer_byte_rate"]))

    assert not car.watch.on and in_force == [(1.0, 1_000_000.0), (0.0, 1.0), (0.0, 1.0), (1.0, 1_000_000.0)]


def test_while_another_agents_heartbeat_says_its_verdict_holds_a_decision_lifts_nothing(tmp_path):
    """Broker 3's agent judges its dir within its reaction time of the limit and writes 1 B/s; this agent's
    decision, made on DescribeLogDirs, sees no violation and would lift it at its next pass. While broker 3's heartbeat
    says its verdict holds, this agent lifts nothing (its factor stays the volumes'); once the verdict lets go, a
    pass lifts."""
    admin, config = LocalDirAdmin(str(tmp_path)), sidecar_config(**{
        "broker.id": 1, "produce": "1000000", "storage.per.volume.limit.min.available.bytes": str(MiB)})
    holding = []  # the agents whose newest heartbeat says their verdict holds
    heard = types.SimpleNamespace(last_seen=lambda: {1: 0.0, 3: 0.0}, holding_agents=lambda: list(holding))
    cover = CoverWatch(heard, lambda brokers, now: [], admin, config.storage_limit, 0.2, 60.0)
    car = assemble(config, admin, up_store(), lambda *_: Decider(config, nothing_violated), clock=Clock(),
                   cover_of=covering(cover))
    in_force = []
    for held_by in ([], [3], [3], []):
        if held_by and not holding:
            admin.quotas[None]["producer_byte_rate"] = 1.0  # broker 3's verdict, written by its own agent
        holding[:] = held_by
        car.clock.now += timedelta(seconds=10)
        decision = car.run_pass()
        in_force.append((decision.throttle_factor, admin.quotas[None]["producer_byte_rate"]))

    assert in_force == [(1.0, 1_000_000.0), (1.0, 1.0), (1.0, 1.0), (1.0, 1_000_000.0)]
    assert heard.holding() is False  # what this agent's own beats say: its verdict does not hold


class ScriptedJudge:
    """The aggregator's answers in turn: "ok", "violated", or "down" (the decision fails)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self, rows, limit):
        answer = self.answers.pop(0)
        if answer == "down":
            raise DecisionFailed("the aggregator is down")
        factor = 0.0 if answer == "violated" else 1.0
        return factor, [{**row, "available_ratio": 0.8, "fill_bytes_per_sec": None, "seconds_to_limit": None,
                         "violated": factor == 0.0, "predicted": False, "throttle_factor": factor} for row in rows]


def test_a_pass_held_by_another_agents_verdict_leaves_no_factor_of_0_behind_it(tmp_path):
    """Agent 1's last pass before the aggregator is killed comes while broker 3's heartbeat still says its verdict
    holds. A factor of 0 decided then would rewrite 1 B/s over agent 3's lift, and stay the last valid factor each
    failed poll after it keeps: the producer would stop above the limit. Held by another agent's verdict, a pass
    lifts nothing, but its own factor is what the volumes call for."""
    admin, store, clock = LocalDirAdmin(str(tmp_path)), up_store(), Clock()
    holding = []  # agent 1's view of the agents whose newest heartbeat says their verdict holds

    def agent(broker, judge, cover=None):
        config = sidecar_config(**{"broker.id": broker, "produce": "1000000",
                                   "storage.per.volume.limit.min.available.bytes": str(MiB)})
        return assemble(config, admin, store, lambda *_: Decider(config, judge), clock=clock,
                        cover_of=None if cover is None else covering(cover))

    heard = types.SimpleNamespace(last_seen=lambda: {1: 0.0, 3: 0.0}, holding_agents=lambda: list(holding))
    agent_1 = agent(1, ScriptedJudge("ok", "ok", "down"),
                    CoverWatch(heard, lambda brokers, now: [], admin, sidecar_config().storage_limit, 0.2, 60.0))
    agent_3 = agent(3, ScriptedJudge("violated", "ok"))
    in_force = []
    for step, holding[:] in ((agent_1, []), (agent_3, [3]), (agent_3, [3]), (agent_1, [3]), (agent_1, [])):
        clock.now += timedelta(seconds=10)
        step.run_pass()
        in_force.append(admin.quotas[None]["producer_byte_rate"])

    # agent 3 throttles, lifts; agent 1's heartbeat view lags a moment, then its polls fail (the aggregator down)
    assert in_force == [1_000_000.0, 1.0, 1_000_000.0, 1_000_000.0, 1_000_000.0]


@pytest.mark.parametrize("error, line", [
    (RuntimeError('<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n\tdetails = '
                  '"failed to connect to all addresses"\n\tdebug_error_string = "UNAVAILABLE:failed"\n>'),
     "UNAVAILABLE: failed to connect to all addresses"),
    (RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.\nmore"),
     "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."),
    (ValueError("\n  first words\nsecond line"), "ValueError: first words"),
    (TimeoutError(), "TimeoutError"),
    # A foreachBatch function's failure, wrapped by the query: the Python exception's own line says what it was.
    (RuntimeError("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function. Return "
                  "Message: Traceback (most recent call last):\n  File \"aggregation.py\", line 1, in write\n"
                  "    save()\npy4j.protocol.Py4JJavaError: An error occurred while calling o4673.save.\n"
                  "\tat org.apache.spark.sql.kafka010.KafkaWriter\nCaused by: org.apache.kafka.common.errors."
                  "TimeoutException: Expiring 1 record(s) for decisions-0:120008 ms has passed since batch creation"),
     "org.apache.kafka.common.errors.TimeoutException: Expiring 1 record(s) for decisions-0:120008 ms has passed "
     "since batch creation"),
    # A Java error through py4j: its first line names only the call; the Java exception's says what failed.
    (RuntimeError("An error occurred while calling o65.parquet.\n: org.apache.hadoop.fs.s3a.UnknownStoreException: "
                  "s3a://no-such-bucket/fleet: Bucket does not exist\n\tat org.apache.hadoop.fs.s3a.S3AUtils"),
     "org.apache.hadoop.fs.s3a.UnknownStoreException: s3a://no-such-bucket/fleet: Bucket does not exist"),
])
def test_a_spark_failure_is_told_in_one_line(error, line):
    from spark_jobs.session import reason

    assert reason(error) == line


def test_replication_passes_report_their_failures_alike(caplog):
    caplog.set_level(logging.INFO, logger="quota_sidecar.loop")
    clock = Monotonic()
    report = FailureReport("replication pass", "replication passes", monotonic=clock)

    report.failure("ListPartitionReassignments failed: NodeNotReadyError")
    clock.now += 5
    report.failure("ListPartitionReassignments failed: NodeNotReadyError")
    report.success()
    report.success()

    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "replication pass failed: ListPartitionReassignments failed: NodeNotReadyError")] * 2 + [
        ("INFO", "replication passes succeed again after 2 failed replication passes over 5s")]


def test_what_is_tried_several_times_a_second_says_each_cause_once_until_it_succeeds(caplog):
    report = FailureReport("heartbeat", "heartbeats", monotonic=lambda: 0.0, first_only=True)
    refused = "READ on TOPIC __quota_sidecar_heartbeats refused for User:quota-sidecar (...)"
    with caplog.at_level(logging.INFO, logger="quota_sidecar.loop"):
        for cause in (CAUSE, CAUSE, refused, CAUSE, refused):
            report.failure(cause)
        report.success()
        report.failure(CAUSE)
    said = [record.getMessage() for record in caplog.records]
    assert said == [f"heartbeat failed: {CAUSE}; said once until it succeeds",
                    f"heartbeat failed: {refused}; said once until it succeeds",
                    "heartbeats succeed again after 5 failed heartbeats over 0s",
                    f"heartbeat failed: {CAUSE}; said once until it succeeds"]
