"""The last resort, said plainly: the hard limit's 1 B/s producer quota is one WARNING when it goes in force (naming
whose producers will need a restart), one INFO line when it no longer is, and counted; only a 1 B/s the sidecars
wrote is one."""

import logging
import shutil
from datetime import timedelta

import pytest

from builders import AT, Clock, MemoryStore, OneVolumeAdmin, QuotasInMemory, sidecar_config
from quota_sidecar.act import last_resort
from quota_sidecar.act.quota_writes import QuotaWriter
from quota_sidecar.act.snapshot import Counters
from quota_sidecar.common import records
from quota_sidecar.common.errors import DecisionFailed
from quota_sidecar.common.observation import Volume
from quota_sidecar.common.records import Owned
from quota_sidecar.decide import quotas
from quota_sidecar.decide.decider import Decider
from quota_sidecar.wiring import assemble

PRODUCE = quotas.PRODUCE
ALICE = "alice"  # a tenant: a principal with a producer rate of its own
WHO = "<default user> (every principal without a quota of its own), User:alice"
WARNING = (f"the hard limit: producer quota 1 B/s on {WHO}; Java producers of these principals stay silent until "
           "restarted even after the throttle lifts (librdkafka ~60 s, kafka-python 3.x up to ~9 min): restart them "
           "once room is back")
LIFTED = (f"the hard limit's producer quota of 1 B/s is no longer in force (on {WHO} since 2026-11-23T08:00:00Z): "
          "restart the Java producers of these principals that have not sent since")


@pytest.fixture
def writer():
    config = sidecar_config().quotas
    return QuotaWriter(config, QuotasInMemory({ALICE: {PRODUCE: 5e6}}), MemoryStore(), Counters())


def at(writer, factor, seconds=0):
    """One pass's writes at `factor`, decided from a look `seconds` after AT."""
    wanted = quotas.wanted(writer.config, factor, {ALICE: 5e6})
    writer.apply(wanted, records.parse(writer.store.read_all()), seen_at=AT + timedelta(seconds=seconds))


def said(caplog, level):
    return [record.getMessage() for record in caplog.records
            if record.levelno == level and record.name == last_resort.__name__]


def test_the_last_resort_is_one_warning_while_it_stays_and_one_info_line_when_lifted(writer, caplog):
    caplog.set_level(logging.INFO)
    at(writer, 0.5)
    for seconds in (10, 20, 30):
        at(writer, 0.0, seconds)
    assert said(caplog, logging.WARNING) == [WARNING]
    assert writer.last_resort == last_resort.LastResort((None, ALICE), AT + timedelta(seconds=10))
    assert writer.counters.last_resort_episodes == 1
    assert said(caplog, logging.INFO) == []

    at(writer, 1.0, 40)

    assert said(caplog, logging.INFO) == [LIFTED.replace("08:00:00Z", "08:00:10Z")]
    assert writer.last_resort is None
    assert writer.admin.quotas[ALICE][PRODUCE] == 5e6


def test_each_episode_is_counted_and_warned_of_again(writer, caplog):
    for seconds, factor in enumerate((0.0, 1.0, 0.0, 0.0, 1.0, 0.0)):
        at(writer, factor, seconds)

    assert writer.counters.last_resort_episodes == 3
    assert said(caplog, logging.WARNING) == [WARNING] * 3


def test_a_throttle_above_the_hard_limit_is_not_the_last_resort(writer, caplog):
    at(writer, 0.01)

    assert writer.admin.quotas[None][PRODUCE] == 10_000.0
    assert writer.last_resort is None and writer.counters.last_resort_episodes == 0
    assert said(caplog, logging.WARNING) == []


def test_an_entity_that_comes_to_the_last_resort_later_is_one_info_line(writer, caplog):
    caplog.set_level(logging.INFO)
    writer.apply(quotas.wanted(writer.config, 0.0), {}, seen_at=AT)  # alice not known as a tenant yet

    at(writer, 0.0, 10)

    assert said(caplog, logging.WARNING) == [WARNING.replace(", User:alice", "")]
    assert said(caplog, logging.INFO) == [
        f"the hard limit's producer quota of 1 B/s now on {WHO} (was on <default user> (every principal without a "
        "quota of its own)): restart their Java producers once room is back"]
    assert writer.last_resort.since == AT and writer.counters.last_resort_episodes == 1


def test_a_hand_back_by_cleanup_ends_it(writer, caplog):
    caplog.set_level(logging.INFO)
    at(writer, 0.0)

    writer.stop()

    assert writer.last_resort is None and said(caplog, logging.INFO) == [LIFTED]


def test_status_direct_reads_it_without_a_word_in_the_log(writer, caplog):
    at(writer, 0.0, 5)
    looking = QuotaWriter(writer.config, writer.admin, writer.store, Counters())

    looking.look(quotas.wanted(writer.config, 0.0, {ALICE: 5e6}), records.parse(writer.store.read_all()))

    assert looking.last_resort == last_resort.LastResort((None, ALICE), AT + timedelta(seconds=5))
    assert said(caplog, logging.WARNING) == [WARNING]  # the writer's, not the look's


@pytest.mark.parametrize("in_force, owned, known, found", [
    ({None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 1.0, seen_at=7.0)}, (), {None: 7.0}),  # another sidecar's
    ({None: {PRODUCE: 1.0}}, {}, (), {}),  # set by someone else: not the sidecars' to say
    ({None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 1.0, yielded=True)}, (), {}),  # someone else's since
    ({None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 2.0)}, (), {}),  # changed by someone else to 1 B/s
    ({None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 2.0)}, (None,), {None: None}),  # records older than it
    ({None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 1.0, yielded=True)}, (None,), {}),
    ({None: {PRODUCE: 2.0}}, {(None, PRODUCE): Owned(None, 2.0)}, (None,), {}),  # a throttle, not the last resort
    ({ALICE: {"consumer_byte_rate": 1.0}}, {(ALICE, "consumer_byte_rate"): Owned(None, 1.0)}, (), {}),  # producers only
], ids=["recorded", "not-the-sidecars", "yielded", "changed-by-others", "known-records-older", "known-yielded",
        "above", "consumers"])
def test_only_a_producer_quota_of_1_b_s_the_sidecars_wrote_is_the_last_resort(in_force, owned, known, found):
    assert last_resort.written(in_force, owned, known=known) == found


def test_the_loop_says_it_once_over_passes_and_publishes_it_for_status_and_metrics(caplog):
    """Every pass at the hard limit rewrites nothing: one WARNING; the snapshot carries it until the lift."""
    verdicts = [0.0, 0.0, 0.0, 1.0]

    def judge(rows, limit):
        factor = verdicts.pop(0)
        return factor, [{**row, "available_ratio": 0.01, "fill_bytes_per_sec": None, "seconds_to_limit": None,
                         "violated": factor == 0.0, "predicted": False, "throttle_factor": factor} for row in rows]

    config = sidecar_config(**{"broker.id": 1})
    car = assemble(config, OneVolumeAdmin(100 << 20, 1 << 20), MemoryStore(), lambda *_: Decider(config, judge),
                   clock=Clock())
    published = []
    for seconds in range(0, 40, 10):
        car.clock.now = AT + timedelta(seconds=seconds)
        car.run_pass()
        snapshot = car.snapshot()
        published.append((snapshot.last_resort and snapshot.last_resort.entities, snapshot.counters.last_resort_episodes))

    assert published == [((None,), 1), ((None,), 1), ((None,), 1), (None, 1)]
    assert said(caplog, logging.WARNING) == [WARNING.replace(", User:alice", "")]


def test_the_local_verdict_says_it_once_too(tmp_path, caplog):
    """The aggregator gone after its first answer, the local watch finds its dir at the limit at every sample: the
    verdict writes 1 B/s before each pass, one WARNING in all."""
    answers = [lambda rows, limit: (1.0, [{**row, "available_ratio": 0.5, "fill_bytes_per_sec": None,
                                           "seconds_to_limit": None, "violated": False, "predicted": False,
                                           "throttle_factor": 1.0} for row in rows])]

    def aggregator(rows, limit):
        if not answers:
            raise DecisionFailed("the poll ran out of its 10s deadline while waiting for the aggregator's decision")
        return answers.pop()(rows, limit)

    config = sidecar_config(**{"broker.id": 1, "storage.local.log.dirs": str(tmp_path),
                               "storage.per.volume.limit.min.available.bytes": None,
                               "storage.per.volume.limit.min.available.ratio": "1.0"})
    admin = OneVolumeAdmin(100 << 20, 1 << 20)
    usage = shutil.disk_usage(tmp_path)  # as the broker reports its log dir on this machine
    admin.describe_volumes = lambda brokers, now: [Volume(1, str(tmp_path), usage.total, usage.free, now)]
    car = assemble(config, admin, MemoryStore(), lambda *_: Decider(config, aggregator), clock=Clock())
    for seconds in range(0, 40, 10):
        car.clock.now = AT + timedelta(seconds=seconds)
        car.watch.sample()
        car.run_pass()

    assert admin.quotas[None][PRODUCE] == 1.0
    assert said(caplog, logging.WARNING) == [WARNING.replace(", User:alice", "")]
    assert car.snapshot().counters.last_resort_episodes == 1
