"""Cordoned log dirs (KIP-1066), decided: a violating dir of this broker is added, a recovered one removed only
when the sidecar added it and it is still there; other entries stay; static entries are never hidden."""

import pytest

from quota_sidecar.decide.cordons import CordonChange, InForce, change, wanted

A, B, OPS = "/data/a", "/data/b", "/data/ops"
VIOLATIONS = ({"broker_id": 3, "log_dir": A}, {"broker_id": 1, "log_dir": B})


def test_the_violating_dirs_of_this_broker_are_wanted_and_none_with_the_opt_out():
    assert wanted(VIOLATIONS, 3) == {A}
    assert wanted(VIOLATIONS, 2) == frozenset()
    assert wanted(VIOLATIONS, 3, enabled=False) == frozenset()


def test_a_violating_dir_is_appended_and_recorded():
    assert change(frozenset({A}), InForce(None), {}) == CordonChange(
        add=frozenset({A}), add_op=("APPEND", A), recorded={A: False})


def test_a_violating_dir_joins_an_operators_entries_which_stay():
    result = change(frozenset({A}), InForce((OPS,)), {})
    assert (result.add_op, result.remove_op, result.entries_after(InForce((OPS,)))) == (("APPEND", A), None, (A, OPS))


def test_a_dir_someone_else_cordoned_is_not_recorded_and_stays_after_recovery():
    assert change(frozenset({OPS}), InForce((OPS,)), {}) == CordonChange()
    assert change(frozenset(), InForce((OPS,)), {}) == CordonChange()


@pytest.mark.parametrize("in_force, remove_op, after", [
    (InForce((A,)), ("DELETE", None), ()),                  # SUBTRACT would leave '' behind
    (InForce((A, OPS)), ("SUBTRACT", A), (OPS,)),
    (InForce((A, OPS), static=(OPS,)), ("DELETE", None), (OPS,)),  # the static list applies again, unchanged
])
def test_a_recovered_dir_the_sidecar_added_is_removed_and_forgotten(in_force, remove_op, after):
    result = change(frozenset(), in_force, {A: False})
    assert (result.remove, result.remove_op, result.recorded, result.forgotten) == (
        frozenset({A}), remove_op, {}, frozenset({A}))
    assert result.entries_after(in_force) == after


def test_a_recovered_dir_no_longer_there_is_only_forgotten():
    result = change(frozenset(), InForce((OPS,)), {A: False})
    assert (result.remove_op, result.forgotten) == (None, frozenset({A}))


def test_an_entry_removed_by_someone_else_while_violating_is_left_out_until_recovery():
    first = change(frozenset({A}), InForce(()), {A: False})
    assert (first.add_op, first.yielded, first.recorded) == (None, frozenset({A}), {A: True})
    still = change(frozenset({A}), InForce(()), {A: True})
    assert (still.add_op, still.yielded, still.recorded) == (None, frozenset(), {A: True})
    recovered = change(frozenset(), InForce(()), {A: True})
    assert (recovered.remove_op, recovered.forgotten) == (None, frozenset({A}))


def test_a_yielded_entry_someone_put_back_is_not_removed_at_recovery():
    assert change(frozenset(), InForce((A,)), {A: True}).remove_op is None


def test_the_opt_out_hands_back_what_the_sidecar_cordoned():
    assert change(wanted(VIOLATIONS, 3, enabled=False), InForce((A, OPS)), {A: False}).remove_op == ("SUBTRACT", A)


def test_a_first_entry_over_a_static_list_keeps_the_static_entries():
    in_force = InForce(None, static=(OPS,))
    result = change(frozenset({A}), in_force, {})
    assert result.add_op == ("SET", f"{OPS},{A}") and result.entries_after(in_force) == (A, OPS)


def test_nothing_is_removed_from_a_static_list_even_a_recorded_entry():
    # The dynamic value is gone and the static list names the dir: not the sidecar's to change.
    result = change(frozenset(), InForce(None, static=(A,)), {A: False})
    assert (result.remove_op, result.forgotten) == (None, frozenset({A}))


def test_every_dir_cordoned_with_star_needs_no_entry():
    assert change(frozenset({A}), InForce(("*",)), {}) == CordonChange()


def test_clean_up_forces_the_removal_of_a_recorded_entry_a_lagging_read_does_not_show():
    assert change(frozenset(), InForce((OPS,)), {A: False}, force=True).remove_op == ("SUBTRACT", A)
    # Without a dynamic value there is nothing of the sidecar's to subtract (a SUBTRACT would set '').
    assert change(frozenset(), InForce(None), {A: False}, force=True).remove_op is None


def test_layers_as_described_read_back():
    layers = {"DYNAMIC_BROKER_CONFIG": f"{A}, {OPS}", "STATIC_BROKER_CONFIG": OPS, "DEFAULT_CONFIG": ""}
    assert InForce.from_layers(layers) == InForce((A, OPS), (OPS,))
    assert InForce.from_layers({"DEFAULT_CONFIG": ""}) == InForce(None, ())
