"""Client quotas wanted for a factor, and the minimal writes that get the cluster there."""

import pytest

from quota_sidecar.act import ownership
from quota_sidecar.act.ownership import Write
from quota_sidecar.common.records import Owned
from quota_sidecar.configuration.settings import QuotaConfig
from quota_sidecar.decide import quotas
from quota_sidecar.decide.quotas import FETCH, PRODUCE, REQUEST, UNLIMITED


@pytest.mark.parametrize("produce, factor, expected", [
    (1024, 1.0, 1024), (1024, 0.0, 1), (1024, 0.5, 512), (1000, 0.0015, 1), (1001, 0.5, 500),
    (None, 1.0, None), (None, 0.3, None), (None, 0.0, 1),
])
def test_producer_rate_is_scaled_and_floored_at_one_byte(produce, factor, expected):
    assert quotas.wanted(QuotaConfig(produce=produce), factor).default_user[PRODUCE] == expected


def test_fetch_and_request_are_never_scaled():
    wanted = quotas.wanted(QuotaConfig(produce=100, fetch=2000, request=40), 0.0)
    assert wanted.default_user == {PRODUCE: 1, FETCH: 2000, REQUEST: 40}


def test_json_shape_uses_null_for_unlimited_and_sorted_names():
    wanted = quotas.wanted(QuotaConfig(fetch=10, excluded_principals=("alice", "bob")), 1.0)
    assert wanted.to_json() == {"default_user": {PRODUCE: None, FETCH: 10, REQUEST: None},
                                "excluded_users": ["alice", "bob"]}


def test_excluded_users_get_unlimited_quotas_for_every_managed_key():
    entities = quotas.wanted(QuotaConfig(produce=100, fetch=50, excluded_principals=("alice",)), 0.0).entities()
    assert entities["alice"] == {PRODUCE: UNLIMITED, FETCH: UNLIMITED}


def test_the_sidecars_own_clients_are_exempt_before_the_default_user_is_throttled():
    config = QuotaConfig(produce=100, sidecar_client_id="qs", sidecar_principal="quota-sidecar")
    entities = list(quotas.wanted(config, 0.0).entities().items())
    assert entities[0] == (("quota-sidecar", "qs"), {PRODUCE: UNLIMITED}) and entities[1][0] is None


def test_without_a_principal_of_their_own_the_sidecars_client_id_keeps_a_rate_a_flood_cannot_fill_a_disk_at():
    """Any client may name itself quota-sidecar: unlimited, that name was a way around every throttle."""
    entities = quotas.wanted(QuotaConfig(produce=100, fetch=50, sidecar_produce=1_000_000), 0.0).entities()
    assert entities[(None, "quota-sidecar")] == {PRODUCE: 1_000_000, FETCH: UNLIMITED}


def plan(wanted, in_force, records):
    return ownership.plan(quotas.targets(wanted), quotas.flatten(in_force), records)


def test_nothing_is_written_when_the_cluster_already_agrees():
    wanted = quotas.wanted(QuotaConfig(produce=100, excluded_principals=("alice",)), 1.0)
    in_force = {None: {PRODUCE: 100.0}, "alice": {PRODUCE: UNLIMITED}, (None, "quota-sidecar"): {PRODUCE: 1e6}}
    records = {(None, PRODUCE): Owned(None, 100.0), ("alice", PRODUCE): Owned(None, UNLIMITED),
               ((None, "quota-sidecar"), PRODUCE): Owned(None, 1e6)}
    assert plan(wanted, in_force, records) == []


def test_what_the_sidecars_wrote_and_no_longer_want_is_handed_back():
    """The client id's exemption once the sidecar has a principal; a principal taken off the excluded list."""
    wanted = quotas.wanted(QuotaConfig(produce=100, sidecar_principal="qs"), 0.0)
    in_force = {(None, "quota-sidecar"): {PRODUCE: UNLIMITED}, "alice": {PRODUCE: UNLIMITED}, None: {PRODUCE: 1.0},
                ("qs-2", "quota-sidecar"): {PRODUCE: UNLIMITED}}  # another agent's principal: its agent keeps it
    owned = {((None, "quota-sidecar"), PRODUCE): Owned(None, UNLIMITED), ("alice", PRODUCE): Owned(50.0, UNLIMITED),
             (None, PRODUCE): Owned(None, 1.0), (("qs-2", "quota-sidecar"), PRODUCE): Owned(None, UNLIMITED)}
    writes = ownership.plan(quotas.targets(wanted, in_force, owned), quotas.flatten(in_force), owned)
    assert writes == [Write((("qs", "quota-sidecar"), PRODUCE), None, UNLIMITED, None),
                      Write(((None, "quota-sidecar"), PRODUCE), UNLIMITED, None, None, forget=True),
                      Write(("alice", PRODUCE), UNLIMITED, 50.0, 50.0, forget=True)]


def test_a_change_records_the_value_it_replaced_first():
    first = plan(quotas.wanted(QuotaConfig(produce=100), 0.0), {None: {PRODUCE: 5000.0}}, {})
    assert first == [Write(((None, "quota-sidecar"), PRODUCE), None, 1e6, None),
                     Write((None, PRODUCE), 5000.0, 1.0, 5000.0)]
    again = plan(quotas.wanted(QuotaConfig(produce=100), 1.0), {None: {PRODUCE: 1.0}},
                 {(None, PRODUCE): Owned(5000.0, 1.0)})
    assert again[1:] == [Write((None, PRODUCE), 1.0, 100.0, 5000.0)]


def test_a_quota_the_sidecar_did_not_set_is_never_removed():
    wanted = quotas.wanted(QuotaConfig(), 1.0)  # wants no producer quota
    assert [w.target for w in plan(wanted, {None: {PRODUCE: 777.0, FETCH: 5.0}}, {})] == [
        ((None, "quota-sidecar"), PRODUCE)]


def test_a_quota_the_sidecar_set_goes_back_to_what_it_replaced():
    wanted = quotas.wanted(QuotaConfig(), 1.0)
    writes = plan(wanted, {None: {PRODUCE: 1.0}}, {(None, PRODUCE): Owned(None, 1.0)})
    assert writes[1:] == [Write((None, PRODUCE), 1.0, None, None, forget=True)] and writes[1].changes


def test_restore_returns_every_recorded_target():
    in_force = quotas.flatten({None: {PRODUCE: 1.0}, "alice": {PRODUCE: UNLIMITED}})
    records = {(None, PRODUCE): Owned(300.0, 1.0), ("alice", PRODUCE): Owned(None, UNLIMITED)}
    assert ownership.restore(in_force, records) == [
        Write((None, PRODUCE), 1.0, 300.0, 300.0, forget=True),
        Write(("alice", PRODUCE), UNLIMITED, None, None, forget=True)]


def test_a_restored_target_already_back_is_only_forgotten():
    [write] = ownership.restore({}, {(None, FETCH): Owned(None, None)})
    assert write.forget and not write.changes


# ---------------------------------------------------------------- tenants: entities that outrank the default user

ALICE, ALICE_APP, ANY_USER_APP = "alice", ("alice", "app"), (None, "app")
IN_FORCE = {
    None: {PRODUCE: 1000.0},                                  # the default user: the sidecar's own target
    (None, quotas.SIDECAR_CLIENT_ID): {PRODUCE: UNLIMITED},   # the sidecar's own clients
    ALICE: {PRODUCE: 1e9, FETCH: 5e6}, ALICE_APP: {PRODUCE: 4e6}, ANY_USER_APP: {PRODUCE: 2e6},
    ("alice", None): {FETCH: 1e6},                            # no producer rate: the default user's applies
    "ops": {PRODUCE: UNLIMITED}, ("ops", "tool"): {PRODUCE: 10.0},  # an excluded principal
    ("bob", quotas.SIDECAR_CLIENT_ID): {PRODUCE: 5.0},
}


def test_every_entity_above_the_default_user_with_a_producer_rate_is_a_tenant_except_the_sidecars_and_excluded():
    rates = quotas.tenant_rates(IN_FORCE, {}, QuotaConfig(excluded_principals=("ops",)))
    assert rates == {ALICE: 1e9, ALICE_APP: 4e6, ANY_USER_APP: 2e6}


def test_a_tenant_the_sidecars_throttled_keeps_the_rate_it_had_before_as_its_own():
    in_force = {ALICE: {PRODUCE: 1.0}}  # written by the sidecars; and bob's quota was deleted meanwhile
    owned = {(ALICE, PRODUCE): Owned(1e9, 1.0), ("bob", PRODUCE): Owned(3e6, 1.0), (None, PRODUCE): Owned(None, 1.0)}
    assert quotas.tenant_rates(in_force, owned, QuotaConfig()) == {ALICE: 1e9, "bob": 3e6}


@pytest.mark.parametrize("factor, expected", [(1.0, None), (0.5, 5e8), (0.0, 1.0), (1e-12, 1.0)])
def test_each_tenants_own_rate_is_scaled_by_the_factor(factor, expected):
    wanted = quotas.wanted(QuotaConfig(produce=1000), factor, {ALICE: 1e9})
    assert wanted.tenants == {ALICE: expected}
    assert wanted.entities()[ALICE] == {PRODUCE: expected}


def test_the_throttle_lifted_hands_each_tenant_back_its_own_rate_unless_someone_changed_it():
    wanted = quotas.wanted(QuotaConfig(produce=1000), 1.0, {ALICE: 1e9, "bob": 3e6})
    owned = {(ALICE, PRODUCE): Owned(1e9, 1.0), ("bob", PRODUCE): Owned(3e6, 1.0)}
    in_force = {(ALICE, PRODUCE): 1.0, ("bob", PRODUCE): 7e6}  # an operator raised bob's meanwhile
    writes = {write.target: write for write in ownership.plan(quotas.targets(wanted), in_force, owned)}
    assert (writes[(ALICE, PRODUCE)].new, writes[(ALICE, PRODUCE)].forget) == (1e9, True)
    assert writes[("bob", PRODUCE)].left_alone and writes[("bob", PRODUCE)].forget


def test_tenants_throttled_are_those_whose_rate_in_force_is_the_throttles():
    wanted = quotas.wanted(QuotaConfig(), 0.0, {ALICE: 1e9, "bob": 3e6, "carol": None})
    count = quotas.tenant_count(wanted, {ALICE: {PRODUCE: 1.0}, "bob": {PRODUCE: 3e6}})
    assert count == quotas.TenantCount(with_a_rate_of_their_own=3, throttled=1)


@pytest.mark.parametrize("entity, label", [
    (None, "<default user>"), ("alice", "User:alice"), (ALICE_APP, "User:alice client-id app"),
    (ANY_USER_APP, "<default user> client-id app"), (("alice", None), "User:alice client-id <default>"),
    ((None, quotas.SIDECAR_CLIENT_ID), f"client-id {quotas.SIDECAR_CLIENT_ID} (sidecar)"),
])
def test_entity_labels_name_each_component(entity, label):
    assert quotas.entity_label(entity) == label


def test_an_excluded_principal_with_a_rate_of_its_own_is_left_as_it_is():
    wanted = quotas.wanted(QuotaConfig(produce=1000, excluded_principals=("ops", "ci")), 0.0)
    in_force = {"ops": {PRODUCE: 123456.0}, "ci": {FETCH: 10.0}}
    assert quotas.targets(wanted, in_force)[("ci", PRODUCE)] == UNLIMITED
    assert ("ops", PRODUCE) not in quotas.targets(wanted, in_force)
    assert quotas.targets(wanted, in_force, {("ops", PRODUCE): Owned(None, UNLIMITED)})[("ops", PRODUCE)] == UNLIMITED
