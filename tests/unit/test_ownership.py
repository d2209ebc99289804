"""Hand-backs that respect other tools: a value someone changed after the sidecar's write is theirs."""

from quota_sidecar.act import ownership
from quota_sidecar.act.ownership import Write
from quota_sidecar.common.records import Owned

RATE = "follower.replication.throttled.rate"
INITIAL, SIDECAR_RATE = 1_000_000.0, 5_000_000.0  # kafka-reassign-partitions --throttle, then the sidecar's


def test_let_go_puts_back_what_was_replaced_while_the_sidecars_value_is_in_force():
    [write] = ownership.plan({RATE: None}, {RATE: SIDECAR_RATE}, {RATE: Owned(INITIAL, SIDECAR_RATE)})
    assert write == Write(RATE, SIDECAR_RATE, INITIAL, INITIAL, forget=True) and write.changes


def test_a_value_removed_by_another_tool_is_not_written_back_at_the_hand_back():
    # kafka-reassign-partitions --verify removed every throttle after the move: the initial rate stays gone.
    [write] = ownership.plan({RATE: None}, {}, {RATE: Owned(INITIAL, SIDECAR_RATE)})
    assert write.forget and write.left_alone and not write.changes


def test_a_value_changed_by_an_operator_is_not_overwritten_at_the_hand_back():
    [write] = ownership.restore({RATE: 2_000_000.0}, {RATE: Owned(INITIAL, SIDECAR_RATE)})
    assert (write.forget, write.left_alone, write.new) == (True, True, 2_000_000.0)


def test_while_still_wanted_a_changed_value_is_left_alone_and_the_record_says_so():
    [write] = ownership.plan({RATE: 6_000_000.0}, {RATE: 2_000_000.0}, {RATE: Owned(INITIAL, SIDECAR_RATE)})
    assert write.left_alone and not write.forget and not write.changes
    assert write.record() == Owned(INITIAL, SIDECAR_RATE, yielded=True)


def test_a_target_left_to_someone_else_is_not_written_again_then_forgotten_at_let_go():
    yielded = {RATE: Owned(INITIAL, SIDECAR_RATE, yielded=True)}
    assert ownership.plan({RATE: 6_000_000.0}, {}, yielded) == []
    [write] = ownership.plan({RATE: None}, {}, yielded)
    assert write.forget and not write.changes


def test_a_record_that_does_not_know_what_was_written_is_handed_back_as_before():
    old_record = Owned(INITIAL, None, written_known=False)
    [write] = ownership.plan({RATE: None}, {RATE: SIDECAR_RATE}, {RATE: old_record})
    assert (write.new, write.forget, write.changes) == (INITIAL, True, True)


def test_a_new_write_records_the_value_written_and_the_one_it_changes():
    [write] = ownership.plan({RATE: SIDECAR_RATE}, {RATE: INITIAL}, {})
    assert write.record() == Owned(INITIAL, SIDECAR_RATE, before=INITIAL, before_known=True)


def test_a_record_whose_value_was_never_written_leaves_the_target_the_sidecars():
    """An agent cut off with its broker records 1 B/s for the default user, its producer times out and the value
    is never written (the record lands all the same); the next verdict finds the lift's 1 GiB/s in force under a
    record saying 1, and taking it for someone else's change it would write nothing while the disk fills. In force
    is still the value that write was to change: the target is still the sidecars'."""
    unfinished = Owned(None, 1.0, before=SIDECAR_RATE, before_known=True)
    [write] = ownership.plan({RATE: 1.0}, {RATE: SIDECAR_RATE}, {RATE: unfinished})
    assert (write.old, write.new, write.left_alone) == (SIDECAR_RATE, 1.0, False)
    assert ownership.plan({RATE: SIDECAR_RATE}, {RATE: SIDECAR_RATE}, {RATE: unfinished}) == []  # nothing to change
    [changed] = ownership.plan({RATE: 1.0}, {RATE: 2_000_000.0}, {RATE: unfinished})  # neither value: an operator's
    assert changed.left_alone


class RecordingStore:
    def __init__(self):
        self.records, self.log = {}, []

    def put(self, key, value):
        self.records[key] = value
        self.log.append(("put", key))

    def delete(self, key):
        self.records.pop(key, None)
        self.log.append(("delete", key))

    def write_many(self, changes):
        for key, value in changes.items():
            self.delete(key) if value is None else self.put(key, value)


def test_a_value_the_record_names_goes_before_its_record_and_any_other_after_it():
    """A throttle lifted then written again: the record names 1 B/s (in force before the lift), so the value needs no
    record first, and a records topic that stalls does not hold it back; a value it does not name is recorded first."""
    store, applied = RecordingStore(), []
    lifted = Owned(None, SIDECAR_RATE, before=1.0, before_known=True)
    writes = [*ownership.plan({RATE: 1.0}, {RATE: SIDECAR_RATE}, {RATE: lifted}),
              *ownership.plan({"other": 3.0}, {"other": 2.0}, {})]
    assert [w.named for w in writes] == [True, False]

    def apply_all(batch):
        applied.extend(w.target for w in batch)
        store.log.append(("values", tuple(applied)))

    ownership.carry_out_together(writes, store, str, apply_all, lambda write: None)
    assert store.log == [("put", "other"), ("values", (RATE, "other")), ("put", RATE)]
    assert store.records[RATE] == {"replaced": None, "written": 1.0, "before": SIDECAR_RATE}


def test_carry_out_never_writes_a_value_left_alone_even_when_forced():
    store, applied, told = RecordingStore(), [], []
    writes = [*ownership.restore({RATE: 2_000_000.0}, {RATE: Owned(INITIAL, SIDECAR_RATE)}),
              *ownership.plan({"other": 3.0}, {"other": 2.0}, {"other": Owned(1.0, 4.0)})]
    ownership.carry_out(writes, store, str, lambda target, value: applied.append((target, value)), told.append,
                        force=True)
    assert applied == []
    assert store.records == {"other": {"replaced": 1.0, "written": 4.0, "yielded": True}}
    assert [w.target for w in told] == [RATE, "other"]


def test_the_reason_says_what_is_in_force_and_what_the_sidecar_wrote():
    [write] = ownership.plan({RATE: None}, {RATE: 2.0}, {RATE: Owned(1.0, 3.0)})
    assert ownership.left_alone_reason(write, lambda v: "none" if v is None else f"{v:.0f}") == (
        "2 in force, changed by someone else since the sidecar wrote 3: forgotten")


def test_a_plan_that_leaves_a_target_alone_is_made_again_on_records_read_after_the_second_look():
    slept, reads = [], []
    first, fresh = {"records": "first"}, {"records": "fresh"}

    def plan(all_records):
        left_alone = all_records is first  # what the pass read is older than the last write
        return [Write("t", 1.0, 1.0, None, left_alone=left_alone, written=2.0 if left_alone else None)]

    def read_records():
        reads.append(fresh)
        return fresh

    writes = ownership.with_second_look(plan, first, read_records, sleep=slept.append)
    assert slept == [ownership.SECOND_LOOK_SECONDS] and reads == [fresh]
    assert not ownership.leaves_alone(writes)


def test_a_plan_that_leaves_nothing_alone_is_kept_without_a_second_look():
    slept = []
    writes = [Write("t", None, 1.0, None)]
    assert ownership.with_second_look(lambda _: writes, {}, lambda: 1 / 0, sleep=slept.append) is writes
    assert slept == []


def test_a_value_in_force_that_a_sidecar_wrote_moments_ago_is_the_sidecars_not_someone_elses():
    # One sidecar recorded INITIAL and wrote it; another recorded SIDECAR_RATE, and its write was overtaken.
    lately = [{"replaced": None, "written": INITIAL}, {"replaced": None, "written": SIDECAR_RATE}]
    owned = {RATE: Owned(None, SIDECAR_RATE, seen_at=5.0)}
    settled = ownership.settle_races(owned, {RATE: INITIAL}, lambda target: lately)

    assert settled == {RATE: Owned(None, INITIAL, seen_at=5.0)}
    [write] = ownership.plan({RATE: SIDECAR_RATE}, {RATE: INITIAL}, settled)
    assert (write.old, write.new, write.left_alone) == (INITIAL, SIDECAR_RATE, False)


def test_a_value_no_sidecar_wrote_lately_is_still_someone_elses():
    owned = {RATE: Owned(None, SIDECAR_RATE)}
    lately = [{"replaced": None, "written": SIDECAR_RATE}]
    assert ownership.settle_races(owned, {RATE: 2_000_000.0}, lambda target: lately) == owned
    assert ownership.settle_races(owned, {RATE: INITIAL}, lambda target: []) == owned  # written, but not lately
